"""The httpx way of a model's requests: an ``https://`` endpoint, one an environment's
proxy may route, one with a user or password in its URL (sent as basic auth), and the
provider's other endpoints (models/batch.py's ``http`` client). Imported only for those:
a run against a plain-HTTP server never imports httpx (models/connections.py decides).

One httpx client per thread (one connection pool each: httpcore checks every idle
connection of a pool each time it hands one out, so one pool for 64 rollout threads set
the pace), sharing one TLS context; a generation's POST goes straight to the thread's
transport when no proxy may route it (what ``httpx.Client.send`` adds on the way cost
about as much CPU per request as httpcore's own work). At this boundary httpx's responses
become models/wire.py's (``adapt``: the connection's socket kept for the deadline
watchdog) and its exceptions ours (``translated``: the same class name, the same
message), so retries, deadlines, the queue clock and every error message see one kind of
failure on both ways.
"""

from __future__ import annotations

import socket
import ssl
import threading
from collections.abc import Callable, Iterator, Mapping

import httpx

from pytest_agentbench.core.jsontypes import JsonObject
from pytest_agentbench.models import wire

_OURS: dict[str, type[wire.WireError]] = {
    kind.__name__: kind
    for kind in (
        wire.ConnectTimeout,
        wire.ReadTimeout,
        wire.WriteTimeout,
        wire.PoolTimeout,
        wire.ConnectError,
        wire.ReadError,
        wire.WriteError,
        wire.CloseError,
        wire.RemoteProtocolError,
        wire.LocalProtocolError,
        wire.ProxyError,
        wire.UnsupportedProtocol,
        wire.DecodingError,
    )
}
_OURS["TimeoutException"] = wire.WireTimeout


def translated(exc: httpx.HTTPError) -> wire.WireError:
    """Our exception for httpx's ``exc``: the class of the same name (or of its nearest
    base we have), with its message; one we have no class for keeps httpx's name as
    its message when it had none."""
    kind: type[wire.WireError] = wire.WireError
    for base in type(exc).__mro__:
        found = _OURS.get(base.__name__)
        if found is not None:
            kind = found
            break
    message = str(exc)
    if not message and kind.__name__ != type(exc).__name__:
        message = type(exc).__name__
    return kind(message)


class _Translated:
    """An httpx response's raw body as a ``wire.ByteStream``: httpx's exceptions become
    ours as they are raised."""

    def __init__(self, response: httpx.Response) -> None:
        self._response = response

    def __iter__(self) -> Iterator[bytes]:
        try:
            yield from self._response.iter_raw()
        except httpx.HTTPError as exc:
            raise translated(exc) from exc

    def close(self) -> None:
        try:
            self._response.close()
        except httpx.HTTPError as exc:
            raise translated(exc) from exc


def adapt(response: httpx.Response) -> wire.Response:
    """``response`` (its body not read yet) as models/wire.py's, reading the same bytes."""
    network: object = response.extensions.get("network_stream")
    extra = getattr(network, "get_extra_info", None)
    sock = extra("socket") if extra is not None else None
    return wire.Response(
        response.status_code,
        wire.Headers(response.headers.multi_items()),
        _Translated(response),
        sock if isinstance(sock, socket.socket) else None,
    )


def _timeouts(timeout: wire.Timeout) -> dict[str, float | None]:
    return {
        "connect": timeout.connect,
        "read": timeout.read,
        "write": timeout.write,
        "pool": timeout.pool,
    }


def _socket_tracer(sockets: list[socket.socket]) -> Callable[[str, JsonObject], None]:
    """An httpcore trace hook that keeps the socket of each connection it opens in
    ``sockets``: a request waiting for its response headers has no other handle on its
    socket (the watchdog of a queued request shuts it: models/queue.py)."""

    def trace(event: str, info: JsonObject) -> None:
        if event == "connection.connect_tcp.complete":
            stream: object = info.get("return_value")
            extra = getattr(stream, "get_extra_info", None)
            sock = extra("socket") if extra is not None else None
            if isinstance(sock, socket.socket):
                sockets[:] = [s for s in sockets if s.fileno() != -1]
                sockets.append(sock)

    return trace


class HttpxConnections:
    """What one model's httpx clients share: the endpoint, the headers, the limits and
    one TLS context (made once, by the first thread). ``direct``: no proxy may route the
    endpoint and its URL holds no credentials, so a generation's POST may skip the
    client (models/connections.py decides it)."""

    def __init__(
        self, endpoint: str, headers: Mapping[str, str], trust_env: bool, direct: bool
    ) -> None:
        self.url = httpx.URL(endpoint)
        self.headers = dict(headers)
        self.trust_env = trust_env
        self.direct = direct
        self.limits = httpx.Limits(max_connections=64, max_keepalive_connections=8)
        self._tls: ssl.SSLContext | None = None
        self._lock = threading.Lock()

    def _tls_context(self) -> ssl.SSLContext:
        with self._lock:
            if self._tls is None:
                self._tls = (
                    # never used (no redirects are followed): loading the CA bundle for
                    # a plain-HTTP endpoint (a local server) was ~20 ms of CPU
                    ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
                    if self.url.scheme == "http"
                    else httpx.create_ssl_context(verify=True, trust_env=self.trust_env)
                )
            return self._tls

    def thread(self, sockets: list[socket.socket]) -> HttpxThread:
        """A new client for one thread; the sockets it opens are added to ``sockets``."""
        tls = self._tls_context()
        transport: httpx.BaseTransport | None = None
        if self.direct:  # (a transport given, httpx mounts no environment proxy)
            transport = httpx.HTTPTransport(
                verify=tls, http1=True, http2=False, limits=self.limits, trust_env=self.trust_env
            )
        trace = _socket_tracer(sockets)

        def traced(request: httpx.Request) -> None:
            request.extensions["trace"] = trace

        client = httpx.Client(
            verify=tls,
            headers=self.headers,
            http1=True,
            http2=False,
            trust_env=self.trust_env,
            limits=self.limits,
            transport=transport,
            # every request of this client keeps the sockets it opens
            event_hooks={"request": [traced]},
        )
        return HttpxThread(self.url, client, transport, trace, sockets)


class HttpxThread:
    """One thread's httpx client and what its requests need: ``send`` gives the reply as
    models/wire.py's, every failure as its exception."""

    def __init__(
        self,
        url: httpx.URL,
        client: httpx.Client,
        transport: httpx.BaseTransport | None,
        trace: Callable[[str, JsonObject], None],
        sockets: list[socket.socket],
    ) -> None:
        self.url = url
        self.client = client
        self.sockets = sockets
        self._transport = transport
        self._trace = trace
        # the headers the client sends on every request, merged once
        self._headers = list(client.headers.raw)

    def send(
        self,
        method: str,
        url: str | None,
        content: bytes,
        headers: Mapping[str, str],
        timeout: wire.Timeout,
    ) -> wire.Response:
        """``method`` to ``url`` (None: the endpoint) with the client's headers and
        ``headers``; the reply's body not read yet."""
        try:
            if url is None and self._transport is not None and not self.client.is_closed:
                # straight to the transport, sent as the client would send it (the same
                # headers, timeouts, trace and connections)
                sent: httpx.Headers | list[tuple[bytes, bytes]] = self._headers
                if headers:  # merged as the client merges them
                    sent = httpx.Headers(sent)
                    sent.update(headers)
                request = httpx.Request(
                    method,
                    self.url,
                    headers=sent,
                    content=content,
                    extensions={"timeout": _timeouts(timeout), "trace": self._trace},
                )
                response = self._transport.handle_request(request)
                response.request = request
            else:
                request = self.client.build_request(
                    method,
                    self.url if url is None else url,
                    content=content or None,
                    headers=headers,
                    timeout=httpx.Timeout(**_timeouts(timeout)),
                )
                response = self.client.send(request, stream=True)
        except httpx.HTTPError as exc:
            raise translated(exc) from exc
        return adapt(response)

    def close(self) -> None:
        self.client.close()
