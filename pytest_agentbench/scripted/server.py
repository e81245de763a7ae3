"""The scripted provider: a real HTTP server on loopback that answers from scripts.

It speaks each protocol in ``handler.WIRES`` (streaming and not) with the shapes of the
real API, so any client, the official SDKs included, can be tested against it without
spending money; ``handler.py`` answers each request, this module binds, serves, stops and
keeps the request log. Which reply answers a request: the script named by the
``x-agentbench-script`` header, percent-encoded UTF-8 (else the body's ``model`` when it
names a script, else the default script), at the turn given by ``x-agentbench-turn``
(else the conversation's place in its script; retries stay on their turn): see
``book.py``.

Admin endpoints: ``POST /_agentbench/scripts`` registers scripts (every pytest-xdist
worker posts its own; re-posting the same scripts changes nothing), ``GET
/_agentbench/requests`` lists the recorded requests, ``GET /_agentbench/stats`` counts
generation requests (``in_flight`` now and ``max_in_flight`` ever: from the request's
arrival until its last byte is about to be written), ``GET /_agentbench/health``.

It speaks the provider batch APIs too (OpenAI Files + Batch, Anthropic Message Batches:
``batches.py``); a batch ends at the ``batch_polls``-th read of its status, and its
entries are answered by the same machinery as live requests (``answer.py``).
"""

from __future__ import annotations

import ipaddress
import threading
from collections import deque
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from pytest_agentbench.core.jsontypes import JsonObject
from pytest_agentbench.scripted.book import ScriptBook
from pytest_agentbench.scripted.handler import ChatHandler
from pytest_agentbench.scripted.loopback import LoopbackHTTPServer, LoopbackHTTPServer6
from pytest_agentbench.scripted.script import parse_replies, parse_scripts

if TYPE_CHECKING:
    from pytest_agentbench.scripted.batches import BatchOffice


def is_loopback(host: str) -> bool:
    """True for ``localhost``, 127.0.0.0/8 and ::1: the only places the server may bind."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


#: How many of the latest chat requests a server keeps for ``requests``.
REQUEST_LOG = 1000


class ScriptedServer:
    """The scripted provider, serving in a background thread until ``stop``.

    ``requests`` records the last ``REQUEST_LOG`` chat requests as dicts: ``path``,
    ``key`` (the script that answered; None for the default script), ``turn``, ``body``
    (the JSON sent) and ``headers`` (lower-case names; credential values replaced by
    ``[redacted]``). Older ones are dropped (a 10 000-task run would otherwise keep every
    prompt); ``stats["requests"]`` counts them all.

    ``serial=True`` serves one generation at a time, as llama-cpp-python does: the others
    wait in a queue, a streamed one with its response headers sent and a ``: ping``
    comment every second (no event until its turn), an unstreamed one with nothing sent.

    ``batch_polls`` (>= 1): how many reads of a provider batch's status it takes to end
    it. Answered batch entries join ``requests`` marked ``batch`` and ``custom_id``;
    ``stats`` counts them apart (``batches`` created, ``batch_entries`` answered).
    """

    def __init__(
        self,
        scripts: Mapping[str, Sequence[object]] | None = None,
        default: Sequence[object] | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        serial: bool = False,
        batch_polls: int = 1,
    ) -> None:
        if not is_loopback(host):
            raise ValueError(
                f"the scripted provider only listens on loopback (127.0.0.1, ::1, localhost); "
                f"refusing host {host!r}"
            )
        self.host = "127.0.0.1" if host.lower() == "localhost" else host.strip("[]")
        self.port = port
        self._lock = threading.Lock()
        self._book = ScriptBook(REQUEST_LOG)
        if default is not None:
            self._book.set_default(parse_replies(default, "default"))
        self._requests: deque[JsonObject] = deque(maxlen=REQUEST_LOG)
        self._request_count = 0
        self._in_flight = 0
        self._max_in_flight = 0
        self._stopping = threading.Event()
        #: held while a generation is served, when the server serves one at a time
        self._serial = threading.Lock() if serial else None
        self._httpd: LoopbackHTTPServer | None = None
        self._thread: threading.Thread | None = None
        #: the provider batch APIs (batches.py, made when first asked: ``_batches``): a
        #: batch ends at its ``batch_polls``-th read
        if batch_polls < 1:
            raise ValueError(f"batch_polls must be an integer >= 1, got {batch_polls!r}")
        self._batch_polls = batch_polls
        self._batch_office: BatchOffice | None = None
        if scripts:
            self.add_scripts(scripts)

    @property
    def _batches(self) -> BatchOffice:
        """The batch and file endpoints, made at the first batch request (a run that
        sends none never imports batches.py)."""
        office = self._batch_office
        if office is None:
            from pytest_agentbench.scripted.batches import BatchOffice

            with self._lock:
                if self._batch_office is None:
                    self._batch_office = BatchOffice(
                        self._book,
                        self._record_batch,
                        lambda: self.url.removesuffix("/v1"),
                        self._batch_polls,
                    )
                office = self._batch_office
        return office

    def start(self) -> str:
        """Bind (a free port unless one was given), serve in a daemon thread, return the
        base URL ``http://127.0.0.1:PORT/v1``."""
        if self._httpd is not None:
            return self.url
        self._stopping.clear()
        server_class = LoopbackHTTPServer6 if ":" in self.host else LoopbackHTTPServer
        self._httpd = server_class((self.host, self.port), ChatHandler)
        self._httpd.provider = self
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"agentbench-scripted-{self._httpd.server_address[1]}",
            daemon=True,
        )
        self._thread.start()
        return self.url

    @property
    def url(self) -> str:
        if self._httpd is None:
            raise RuntimeError("the scripted server is not running; call start() first")
        port = self._httpd.server_address[1]
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{port}/v1"

    def stop(self) -> None:
        """Stop serving: wake hanging replies, drop open connections, close the socket."""
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        self._stopping.set()
        httpd.shutdown()
        httpd.drop_connections()
        httpd.server_close()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def __enter__(self) -> ScriptedServer:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def add_scripts(self, scripts: object) -> None:
        """Register or replace scripts; raises ValueError naming a bad key and index.
        A replaced script restarts its turn counter only when its replies changed."""
        self._book.add_scripts(parse_scripts(scripts, "scripts"))

    def set_default(self, replies: object) -> None:
        """Set (or with None, remove) the script for requests that name no known key."""
        self._book.set_default(parse_replies(replies, "default") if replies is not None else None)

    @property
    def requests(self) -> list[JsonObject]:
        with self._lock:
            return list(self._requests)

    @property
    def stats(self) -> dict[str, int]:
        office = self._batch_office
        with self._lock:
            return {
                "requests": self._request_count,
                "in_flight": self._in_flight,
                "max_in_flight": self._max_in_flight,
                "batches": office.created if office is not None else 0,
                "batch_entries": office.answered if office is not None else 0,
            }

    def _flight(self, change: int) -> None:
        with self._lock:
            self._in_flight += change
            self._max_in_flight = max(self._max_in_flight, self._in_flight)

    @property
    def script_keys(self) -> list[str]:
        return self._book.keys()

    def _record(self, entry: JsonObject) -> None:
        with self._lock:
            self._requests.append(entry)
            self._request_count += 1

    def _record_batch(self, entry: JsonObject) -> None:
        """Log an answered batch entry (marked ``batch``); not a live request."""
        with self._lock:
            self._requests.append(entry)
