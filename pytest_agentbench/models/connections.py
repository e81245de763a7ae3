"""The connections of a model client: one way per thread to its endpoint (our own HTTP/1.1
on keep-alive plain sockets for an ``http://`` endpoint reached directly,
models/plain_http.py; httpx for the rest, models/httpx_path.py, imported only then), the
sockets they open (for the deadline watchdog), timeouts from a deadline, and the POST of
a generation. Either way the reply is models/wire.py's ``Response`` and every failure
its exception."""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

from pytest_agentbench.models.plain_http import PlainHTTPTransport
from pytest_agentbench.models.wire import Response, Target, Timeout

if TYPE_CHECKING:  # (imported where an endpoint needs it: models/httpx_path.py)
    import httpx

    from pytest_agentbench.models.httpx_path import HttpxConnections

CONNECT_TIMEOUT_S = 10.0

_NO_DEADLINE = Timeout(connect=CONNECT_TIMEOUT_S, read=None, write=None, pool=None)

#: What every request carries before the client's own headers, as httpx sends them
#: (the encodings models/wire.py decodes).
BASE_HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (b"accept", b"*/*"),
    (b"accept-encoding", b"gzip, deflate"),
    (b"connection", b"keep-alive"),
)


def timeout_for(deadline: float | None) -> Timeout:
    """The timeouts of a request that must finish by ``deadline`` (monotonic)."""
    if deadline is None:
        return _NO_DEADLINE
    remaining = max(deadline - time.monotonic(), 0.001)
    return Timeout(
        connect=min(CONNECT_TIMEOUT_S, remaining), read=remaining, write=remaining, pool=remaining
    )


def environment_names_a_proxy() -> bool:
    """Whether the environment names a proxy as urllib's ``getproxies`` reads it (which
    httpx mounts its proxies from): on Linux and other Unixes only the ``*_proxy``
    variables, read here without importing urllib.request (it imports http.client and
    email); on macOS and Windows the system's settings too, so urllib itself."""
    if sys.platform in ("darwin", "win32"):
        import urllib.request

        return bool(urllib.request.getproxies())
    named: dict[str, str] = {}
    for name, value in os.environ.items():  # any case first
        if value and name.lower().endswith("_proxy"):
            named[name.lower()[:-6]] = value
    if "REQUEST_METHOD" in os.environ:  # a CGI script: HTTP_PROXY may be a client's header
        named.pop("http", None)
    for name, value in os.environ.items():  # then the lower-case names, which win
        if name.endswith("_proxy"):
            if value:
                named[name.lower()[:-6]] = value
            else:
                named.pop(name.lower()[:-6], None)
    return bool(named)


def header_list(
    base: Sequence[tuple[bytes, bytes]], headers: Mapping[str, str]
) -> list[tuple[bytes, bytes]]:
    """``base`` with ``headers`` over it (a name in both, in any case, takes
    ``headers``' value); values ASCII, as httpx requires them."""
    if not headers:
        return list(base)
    extra = [
        (name.lower().encode("ascii"), value.encode("ascii")) for name, value in headers.items()
    ]
    names = {name for name, _ in extra}
    return [(name, value) for name, value in base if name.lower() not in names] + extra


class _Way(Protocol):
    """How one thread's requests reach the endpoint."""

    sockets: list[socket.socket]

    def send(
        self,
        method: str,
        url: str | None,
        content: bytes,
        headers: Mapping[str, str],
        timeout: Timeout,
    ) -> Response: ...

    def close(self) -> None: ...


class _PlainWay:
    """A thread's requests on plain sockets (models/plain_http.py)."""

    def __init__(self, target: Target, headers: Mapping[str, str]) -> None:
        self.sockets: list[socket.socket] = []
        self.transport = PlainHTTPTransport(self.sockets)
        self._target = target
        self._headers = header_list(BASE_HEADERS, headers)

    def send(
        self,
        method: str,
        url: str | None,
        content: bytes,
        headers: Mapping[str, str],
        timeout: Timeout,
    ) -> Response:
        target = self._target if url is None else Target(url)
        sent = header_list(self._headers, headers) if headers else self._headers
        return self.transport.send(method, target, sent, content, timeout)

    def close(self) -> None:
        self.transport.close()


class ThreadConnections:
    """One way to the endpoint per thread for one model: plain sockets or one httpx
    client each (one connection pool per thread, not one for all: with one pool for 64
    rollout threads the pool, not the model, set the pace; per thread, a request costs
    the same at 64 or 128 in flight as at 8).

    The plain way is taken when httpx would add nothing: an ``http://`` endpoint with no
    user or password in its URL, and no proxy the environment names (when the client
    trusts the environment). Nothing of the environment applies to such a request."""

    public_endpoint: str

    def _open(self, endpoint: str, headers: Mapping[str, str], trust_env: bool) -> None:
        """Set the endpoint and the options of the per-thread ways (made on first use
        by each thread: ``_way``)."""
        self._endpoint = endpoint
        self._target = Target(endpoint)  # parsed once, not on every request
        self._headers = {
            "user-agent": "pytest-agentbench",
            "content-type": "application/json",
            **headers,
        }
        self._trust_env = trust_env
        #: whether no environment proxy may route the endpoint (None: not known yet)
        self._direct: bool | None = None
        self._httpx_shared: HttpxConnections | None = None
        self._local = threading.local()
        self._ways: list[_Way] = []
        self._ways_lock = threading.Lock()
        self._closed = False

    def _plain(self) -> bool:
        """Whether this endpoint's requests go on plain sockets (the class docstring)."""
        with self._ways_lock:
            if self._direct is None:
                # httpx mounts a proxy transport for what the environment names, and
                # sends a URL's user and password as basic auth: such a client sends
                # every request
                self._direct = not (
                    (self._trust_env and environment_names_a_proxy()) or self._target.credentials
                )
            return self._direct and self._target.scheme == "http"

    def _httpx(self) -> HttpxConnections:
        """What this model's httpx clients share (made once)."""
        from pytest_agentbench.models.httpx_path import HttpxConnections

        self._plain()  # (decides ``_direct``)
        with self._ways_lock:
            if self._httpx_shared is None:
                self._httpx_shared = HttpxConnections(
                    self._endpoint, self._headers, self._trust_env, bool(self._direct)
                )
            return self._httpx_shared

    def _keep(self, way: _Way) -> None:
        """Close ``way`` with the others (at once, when the client is closed already)."""
        with self._ways_lock:
            if not self._closed:
                self._ways.append(way)
                return
        way.close()  # requests after close() fail as with a closed client

    @property
    def _way(self) -> _Way:
        """This thread's way to the endpoint (made on its first request)."""
        way: _Way | None = getattr(self._local, "way", None)
        if way is None:
            # made outside the lock: 128 rollout threads starting at once queued on it
            # (a thread-aware profile of a 128-in-flight run: 7.6 % of the threads' time)
            if self._plain():
                way = _PlainWay(self._target, self._headers)
            else:
                way = self._httpx().thread([])
            self._keep(way)
            self._local.way = way
        return way

    @property
    def http(self) -> httpx.Client:
        """This thread's keep-alive httpx client, sending this model's headers (its key
        among them): for the provider's other endpoints (models/batch.py). On the plain
        way it is a client of its own, made on first use."""
        from pytest_agentbench.models.httpx_path import HttpxThread

        way = self._way
        if isinstance(way, HttpxThread):
            return way.client
        client: httpx.Client | None = getattr(self._local, "http", None)
        if client is None:
            thread = self._httpx().thread(way.sockets)
            self._keep(thread)
            self._local.http = client = thread.client
        return client

    @property
    def _sockets(self) -> list[socket.socket]:
        """The sockets of this thread's connections (closed ones pruned as new ones
        come), for the deadline watchdog."""
        return self._way.sockets

    def _send(
        self,
        method: str,
        url: str | None,
        *,
        content: bytes = b"",
        headers: Mapping[str, str] | None = None,
        timeout: Timeout = _NO_DEADLINE,
    ) -> Response:
        """``method`` to ``url`` (None: the endpoint) with the client's headers and
        ``headers``, on this thread's way; the reply's body not read yet (read it or
        close it). RuntimeError once the client is closed; models/wire.py's exceptions
        for every failure."""
        way = self._way
        if self._closed:
            raise RuntimeError(f"the client of {self.public_endpoint} was closed")
        return way.send(method, url, content, headers or {}, timeout)

    @contextlib.contextmanager
    def _post(
        self, content: bytes, headers: Mapping[str, str], timeout: Timeout
    ) -> Iterator[Response]:
        """POST ``content`` to the endpoint with the client's headers and ``headers``; the
        response is streamed (read it in the block) and closed after."""
        response = self._send("POST", None, content=content, headers=headers, timeout=timeout)
        try:
            yield response
        finally:
            response.close()

    def close(self) -> None:
        """Close every thread's way: requests in flight end promptly, later ones fail."""
        with self._ways_lock:
            self._closed = True
            ways, self._ways = self._ways, []
        for way in ways:
            way.close()
