"""The connections of a model client: one keep-alive HTTP/1.1 httpx client per thread,
the sockets they open (for the deadline watchdog), timeouts from a deadline, and the POST
of a generation sent straight to the thread's transport."""

from __future__ import annotations

import contextlib
import socket
import ssl
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator, Mapping

import httpx

from pytest_agentbench.core.jsontypes import JsonObject
from pytest_agentbench.models.plain_http import PlainHTTPTransport

CONNECT_TIMEOUT_S = 10.0

_NO_DEADLINE = httpx.Timeout(None, connect=CONNECT_TIMEOUT_S)


def timeout_for(deadline: float | None) -> httpx.Timeout:
    """httpx timeouts for a request that must finish by ``deadline`` (monotonic)."""
    if deadline is None:
        return _NO_DEADLINE
    remaining = max(deadline - time.monotonic(), 0.001)
    return httpx.Timeout(remaining, connect=min(CONNECT_TIMEOUT_S, remaining))


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


class ThreadConnections:
    """One httpx client per thread for one model's endpoint, sharing one TLS context.

    ``_post`` sends a generation's POST straight to the thread's transport (the client's
    own, the one its other requests use) when no environment proxy may route it: what
    ``httpx.Client.stream`` adds on the way (request building, auth and redirect
    handling, cookies, event hooks, a bound stream) cost about as much CPU per request
    as httpcore's own work, and a request at 128 in flight spends CPU the run is short
    of (bench/paired.py, docs/scale.md)."""

    public_endpoint: str

    def _open(self, endpoint: str, headers: Mapping[str, str], trust_env: bool) -> None:
        """Set the endpoint and the options of the per-thread clients (made on first use
        by each thread: ``_http``)."""
        self._url = httpx.URL(endpoint)  # parsed once, not on every request
        self._headers = {
            "user-agent": "pytest-agentbench",
            "content-type": "application/json",
            **headers,
        }
        self._trust_env = trust_env
        self._limits = httpx.Limits(max_connections=64, max_keepalive_connections=8)
        self._tls: ssl.SSLContext | None = None
        #: whether ``_post`` may skip the client: no environment proxy (None: not known yet)
        self._direct: bool | None = None
        self._local = threading.local()
        self._clients: list[httpx.Client] = []
        self._plain: list[PlainHTTPTransport] = []
        self._clients_lock = threading.Lock()
        self._closed = False

    @property
    def _http(self) -> httpx.Client:
        """This thread's httpx client. One client (one connection pool) per thread, not
        one for all: httpcore checks every idle connection of a pool (a ``poll`` call,
        under the pool's lock) each time it hands one out, so with one pool for 64
        rollout threads the pool, not the model, set the pace; per thread, a request
        costs the same at 64 or 128 in flight as at 8."""
        client: httpx.Client | None = getattr(self._local, "client", None)
        if client is None:
            with self._clients_lock:
                if self._direct is None:
                    # httpx mounts a proxy transport for what the environment names
                    # (urllib's getproxies, as httpx reads it), and sends a URL's user
                    # and password as basic auth: such a client sends every request
                    self._direct = not (
                        (self._trust_env and urllib.request.getproxies())
                        or self._url.username
                        or self._url.password
                    )
                plain_http = self._direct and self._url.scheme == "http"
                if self._tls is None and not plain_http:
                    self._tls = (
                        # never used (no redirects are followed): loading the CA bundle
                        # for a plain-HTTP endpoint (a local server) was ~20 ms of CPU
                        ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
                        if self._url.scheme == "http"
                        else httpx.create_ssl_context(verify=True, trust_env=self._trust_env)
                    )
            sockets: list[socket.socket] = []
            trace = _socket_tracer(sockets)

            def traced(request: httpx.Request) -> None:
                request.extensions["trace"] = trace

            # made outside the lock: 128 rollout threads starting at once queued on it
            # (a thread-aware profile of a 128-in-flight run: 7.6 % of the threads' time)
            transport: httpx.BaseTransport | None = None
            plain: PlainHTTPTransport | None = None
            if plain_http:
                # every request of the thread on plain sockets (models/plain_http.py):
                # httpcore is not even imported. Nothing of the environment applies to
                # plain HTTP without a proxy, so the client need not read it again.
                transport = plain = PlainHTTPTransport(sockets)
            elif self._direct:  # (a transport given, httpx mounts no environment proxy)
                transport = httpx.HTTPTransport(
                    verify=self._tls or True,
                    http1=True,
                    http2=False,
                    limits=self._limits,
                    trust_env=self._trust_env,
                )
            client = httpx.Client(
                verify=self._tls or True,
                headers=self._headers,
                http1=True,
                http2=False,
                trust_env=self._trust_env and plain is None,
                limits=self._limits,
                transport=transport,
                # every request of this client (the scripted one's admin requests
                # too: they may open the connection a generation reuses) keeps the
                # sockets it opens
                event_hooks={"request": [traced]},
            )
            with self._clients_lock:
                if self._closed:
                    client.close()  # requests after close() fail as with a closed client
                    if plain is not None:
                        plain.close()
                else:
                    self._clients.append(client)
                    if plain is not None:
                        self._plain.append(plain)
            self._local.client = client
            self._local.sockets = sockets
            self._local.transport = transport
            self._local.trace = trace
            # the headers the client sends on every request, merged once
            self._local.headers = list(client.headers.raw)
        return client

    @property
    def http(self) -> httpx.Client:
        """This thread's keep-alive httpx client, sending this model's headers (its key
        among them): for the provider's other endpoints (models/batch.py)."""
        return self._http

    @property
    def _sockets(self) -> list[socket.socket]:
        """The sockets of this thread's connections (closed ones pruned as new ones
        come), kept by the trace of its requests (``_socket_tracer``)."""
        self._http  # noqa: B018 (makes this thread's client and its list)
        sockets: list[socket.socket] = self._local.sockets
        return sockets

    @contextlib.contextmanager
    def _post(
        self, content: bytes, headers: Mapping[str, str], timeout: httpx.Timeout
    ) -> Iterator[httpx.Response]:
        """POST ``content`` to the endpoint with the client's headers and ``headers``; the
        response is streamed (read it in the block) and closed after. Sent as the
        thread's client would send it (the same headers, timeouts, trace and
        connections), straight to its transport; through the client itself when a proxy
        may apply or the client is closed (which then refuses it, as after ``close``)."""
        client = self._http
        local = self._local
        transport: httpx.BaseTransport | None = local.transport
        if transport is None or client.is_closed:
            with client.stream(
                "POST", self._url, content=content, headers=headers, timeout=timeout
            ) as response:
                yield response
            return
        sent: httpx.Headers | list[tuple[bytes, bytes]] = local.headers
        if headers:  # merged as the client merges them
            sent = httpx.Headers(sent)
            sent.update(headers)
        request = httpx.Request(
            "POST",
            self._url,
            headers=sent,
            content=content,
            extensions={"timeout": timeout.as_dict(), "trace": local.trace},
        )
        response = transport.handle_request(request)
        response.request = request
        try:
            yield response
        finally:
            response.close()

    def close(self) -> None:
        """Close every thread's client: requests in flight end promptly, later ones fail."""
        with self._clients_lock:
            self._closed = True
            clients, self._clients = self._clients, []
            plain, self._plain = self._plain, []
        for client in clients:
            client.close()
        for transport in plain:
            transport.close()
