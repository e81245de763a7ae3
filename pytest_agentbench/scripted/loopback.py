"""The scripted server's sockets: a threading HTTP server on a loopback address (IPv4
or IPv6) that keeps its open connections, so stopping can unblock every handler still
reading or writing, and stays quiet about clients that went away; and ``Provider``,
what a request handler (``handler.py``) asks of the server that holds it."""

from __future__ import annotations

import contextlib
import socket
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Protocol

from pytest_agentbench.core.jsontypes import JsonObject

if TYPE_CHECKING:
    from pytest_agentbench.scripted.batches import BatchOffice
    from pytest_agentbench.scripted.book import ScriptBook


class Provider(Protocol):
    """What a request asks of the scripted server that received it (``server.py``'s
    ``ScriptedServer`` is the one provider): its script book, counts and request log. The
    handler knows the server by this alone, so ``server.py`` imports this module and
    never the other way round."""

    _book: ScriptBook
    _stopping: threading.Event
    #: held while a generation is served, when the server serves one at a time
    _serial: threading.Lock | None

    @property
    def url(self) -> str: ...

    @property
    def _batches(self) -> BatchOffice:
        """The batch and file endpoints (made when first asked)."""
        ...

    @property
    def requests(self) -> list[JsonObject]: ...

    @property
    def stats(self) -> dict[str, int]: ...

    @property
    def script_keys(self) -> list[str]: ...

    def add_scripts(self, scripts: object) -> None: ...

    def set_default(self, replies: object) -> None: ...

    def _flight(self, change: int) -> None: ...

    def _record(self, entry: JsonObject) -> None: ...


#: What socketserver hands a TCP server for each connection (typeshed's ``_RequestType``).
_Request = socket.socket | tuple[bytes, socket.socket]


class LoopbackHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 512
    provider: Provider

    def __init__(
        self, server_address: tuple[str, int], handler: type[BaseHTTPRequestHandler]
    ) -> None:
        self._connections: set[_Request] = set()
        self._connections_lock = threading.Lock()
        super().__init__(server_address, handler)

    def process_request(self, request: _Request, client_address: object) -> None:
        with self._connections_lock:
            self._connections.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: _Request) -> None:
        with self._connections_lock:
            self._connections.discard(request)
        super().shutdown_request(request)

    def drop_connections(self) -> None:
        """Unblock every handler still reading from or writing to a client."""
        with self._connections_lock:
            connections = list(self._connections)
        for connection in connections:
            if isinstance(connection, socket.socket):  # (always, over TCP)
                with contextlib.suppress(OSError):
                    connection.shutdown(socket.SHUT_RDWR)

    def handle_error(self, request: _Request, client_address: object) -> None:
        if isinstance(sys.exc_info()[1], OSError):
            return  # a client went away or the server is stopping: nothing to report
        super().handle_error(request, client_address)


class LoopbackHTTPServer6(LoopbackHTTPServer):
    address_family = socket.AF_INET6
