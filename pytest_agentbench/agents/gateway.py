"""The gateway: the run's local model endpoint that agents under test call.

One HTTP server per process (under xdist, one per worker: a route lives where its task
runs) on 127.0.0.1. Each task gets a route (agents/route.py): its own base URL path
``/agent/<id>`` and its own stand-in key; a request is attributed to its task only when
both match. The gateway speaks OpenAI Chat Completions (``/v1/chat/completions``),
OpenAI Responses (``/v1/responses``) and Anthropic Messages (``/v1/messages``): it
relays the agent's request, as the agent wrote it, to the task's model over the same
protocol through the plugin's own client for that model (models/http.py ``Relay``: the
real key, retries, the run's rate limit and circuit breaker, the deadline), hands the
reply back byte for byte as it streams, and reads it on the way with the client's own
parser: usage (provider-native, normalised), text, tool calls, the loop watch. A
confirmed loop, the deadline, the circuit breaker end the request and stop the route,
which ends the agent's process group. When the model's provider does not serve the
agent's protocol, the request is translated instead (agents/translate.py): sent in
neutral form through the model's own client, its reply rendered in the agent's
protocol (agents/replies.py), under the same watch and limits.

This module is the server: its sockets, the routes it holds, and each request's
admission (the path names an open route, the key is that route's). What one admitted
call does (relayed or translated, watched, recorded) is agents/gateway_calls.py.

The agent never holds the real key: it has the stand-in, which is good for its route on
this gateway only; the gateway's clients add the real one upstream.
"""

from __future__ import annotations

import contextlib
import hmac
import json
import os
import shutil
import socket
import socketserver
import sys
import tempfile
import threading
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from pytest_agentbench.agents.gateway_calls import relay
from pytest_agentbench.agents.route import ClientFor, Route
from pytest_agentbench.core.jsontypes import JsonObject, JsonValue
from pytest_agentbench.models.event_json import parse_json
from pytest_agentbench.models.siblings import PROTOCOL_PATHS
from pytest_agentbench.runner.loopguard import KillPolicy
from pytest_agentbench.runner.tool_loop import ToolLoopPolicy
from pytest_agentbench.scripted.handler import WIRES

#: The largest request body accepted (an agent's whole conversation).
MAX_BODY_BYTES = 64 * 1024 * 1024
#: Relaying threads: each keeps its own upstream connections (models/http.py).
RELAY_THREADS = 256
#: Closed routes remembered, so that a late request with a route's key learns why it ended.
ENDED_KEPT = 4096


class _Quiet(socketserver.BaseServer):
    """A server for which an agent that went away (a reset keep-alive connection: the
    official SDKs close one after a stream's last event, before its end) is nothing to
    report."""

    def handle_error(
        self, request: socket.socket | tuple[bytes, socket.socket], address: object
    ) -> None:
        if not isinstance(sys.exc_info()[1], OSError):
            super().handle_error(request, address)


class _Server(_Quiet, ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    #: dozens of agents connect at once (the default backlog of 5 refused some)
    request_queue_size = 1024
    gateway: Gateway


class _UnixServer(_Quiet, socketserver.ThreadingUnixStreamServer):
    """The gateway on a Unix socket: how an agent in a strict sandbox (no network but its
    own loopback) reaches it, through agents/netbridge.py."""

    daemon_threads = True
    block_on_close = False
    request_queue_size = 1024
    gateway: Gateway


class Gateway:
    """See the module docstring. ``start`` binds and serves; ``open_route`` /
    ``close_route`` add and remove a task; ``close`` stops the server."""

    def __init__(self) -> None:
        self._routes: dict[str, Route] = {}
        self._ended: OrderedDict[str, tuple[str, str]] = OrderedDict()
        self._lock = threading.Lock()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._pool: ThreadPoolExecutor | None = None
        self._unix: _UnixServer | None = None
        self._unix_dir: str | None = None
        self.url = ""

    def start(self) -> str:
        """Serve on a free port of 127.0.0.1; the gateway's URL (no trailing slash)."""
        with self._lock:
            if self._server is None:
                server = _Server(("127.0.0.1", 0), _Handler)
                server.gateway = self
                self._pool = ThreadPoolExecutor(RELAY_THREADS, "agentbench-gateway-relay")
                self._thread = threading.Thread(
                    target=server.serve_forever,
                    kwargs={"poll_interval": 0.2},
                    name="agentbench-gateway",
                    daemon=True,
                )
                self._thread.start()
                self._server = server
                self.url = f"http://127.0.0.1:{server.server_address[1]}"
        return self.url

    def unix_socket(self) -> str:
        """The path of the gateway's Unix socket (in a folder of its own under /tmp),
        served from the first call on; the same routes and keys apply."""
        self.start()
        with self._lock:
            if self._unix is None:
                self._unix_dir = tempfile.mkdtemp(prefix="agb-gw-", dir="/tmp")
                server = _UnixServer(os.path.join(self._unix_dir, "gw.sock"), _Handler)
                server.gateway = self
                threading.Thread(
                    target=server.serve_forever,
                    kwargs={"poll_interval": 0.2},
                    name="agentbench-gateway-unix",
                    daemon=True,
                ).start()
                self._unix = server
            return str(self._unix.server_address)

    def close(self) -> None:
        """Stop every route's agent and the server."""
        with self._lock:
            unix, self._unix = self._unix, None
            unix_dir, self._unix_dir = self._unix_dir, None
            server, self._server = self._server, None
            pool, self._pool = self._pool, None
            routes = list(self._routes.values())
            self._routes.clear()
        for route in routes:
            route.stop("harness_error", "the run stopped")
        for each in (server, unix):
            if each is not None:
                each.shutdown()
                each.server_close()
        if unix_dir is not None:
            shutil.rmtree(unix_dir, ignore_errors=True)
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)

    def open_route(
        self,
        task_key: str,
        model_label: str,
        clients: ClientFor,
        *,
        kill_policy: KillPolicy | None = None,
        tool_loop: ToolLoopPolicy | None = None,
    ) -> Route:
        """A new route for one task's rollout (the gateway started if it was not)."""
        url = self.start()
        route = Route.new(
            url, task_key, model_label, clients, kill_policy=kill_policy, tool_loop=tool_loop
        )
        with self._lock:
            self._routes[route.id] = route
        return route

    def close_route(self, route: Route) -> None:
        """Forget ``route``: later requests on it with its key are refused with HTTP 409
        saying why it ended (the last ``ENDED_KEPT`` routes are remembered for that), any
        other with 401."""
        stop = route.stop_info
        why = stop.message if stop is not None else "its rollout finished"
        with self._lock:
            self._routes.pop(route.id, None)
            self._ended[route.id] = (route.key, why)
            while len(self._ended) > ENDED_KEPT:
                self._ended.popitem(last=False)

    def route(self, route_id: str) -> Route | None:
        return self._routes.get(route_id)

    def ended(self, route_id: str, presented: str | None) -> str | None:
        """Why the closed route ``route_id`` ended, when ``presented`` is its key (None
        for a route never opened, forgotten, or a wrong key)."""
        with self._lock:
            found = self._ended.get(route_id)
        if found is None or presented is None or not hmac.compare_digest(presented, found[0]):
            return None
        return found[1]

    def relay(self, route: Route, protocol: str, handler: _Handler, body: JsonObject) -> None:
        """Relay one agent request on a thread of the relay pool; wait for it."""
        pool = self._pool
        if pool is None:
            handler.send_error_body(protocol, 503, "the gateway is closed")
            return
        with route.relaying():
            pool.submit(relay, route, protocol, handler, body).result()


class _Handler(BaseHTTPRequestHandler):
    """One agent connection (HTTP/1.1 keep-alive)."""

    protocol_version = "HTTP/1.1"
    server_version = "agentbench-gateway"
    server: _Server | _UnixServer

    def setup(self) -> None:
        super().setup()
        if self.connection.family != socket.AF_UNIX:
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: object) -> None:
        pass

    def _route_id(self) -> str | None:
        parts = self.path.split("?", 1)[0].split("/", 3)  # "", "agent", id, rest
        return parts[2] if len(parts) >= 3 and parts[1] == "agent" else None

    def _route(self) -> tuple[Route | None, str]:
        """The route the path names and the endpoint below it (``/chat/completions``…);
        (None, "") when the path names no open route."""
        route_id = self._route_id()
        if route_id is None:
            return None, ""
        route = self.server.gateway.route(route_id)
        parts = self.path.split("?", 1)[0].split("/", 3)
        rest = "/" + (parts[3] if len(parts) > 3 else "")
        return route, (rest.rstrip("/").removeprefix("/v1") or "/")

    def _key(self) -> str | None:
        auth = self.headers.get("authorization")
        if auth and auth.lower().startswith("bearer "):
            return auth[7:].strip()
        return self.headers.get("x-api-key") or self.headers.get("api-key")

    def _admitted(self, protocol: str) -> Route | None:
        route, _ = self._route()
        route_id = self._route_id() if route is None else None
        why = self.server.gateway.ended(route_id, self._key()) if route_id else None
        if why is not None:  # a closed route, asked with its own key
            self.send_error_body(protocol, 409, f"agentbench gateway: the task has ended: {why}")
            return None
        if route is None or not route.admits(self._key()):
            self.send_error_body(
                protocol,
                401,
                "agentbench gateway: unknown route or wrong key (each task has its own base "
                "URL and key; this one is closed or was never opened)",
            )
            return None
        return route

    def do_GET(self) -> None:
        _, endpoint = self._route()
        if endpoint == "/models":
            admitted = self._admitted("chat")
            if admitted is None:
                return
            models: list[JsonValue] = [
                {"id": admitted.model_label, "object": "model", "owned_by": "agentbench"}
            ]
            self._send_json(200, {"object": "list", "data": models})
            return
        self.send_error_body("chat", 404, f"unknown endpoint GET {self.path}")

    def do_POST(self) -> None:
        _, endpoint = self._route()
        protocol = PROTOCOL_PATHS.get(endpoint)
        body = self._read_json(protocol or "chat")
        if body is None:
            return
        if protocol is None:
            self.send_error_body("chat", 404, f"unknown endpoint POST {self.path}")
            return
        route = self._admitted(protocol)
        if route is None:
            return
        if route.stopped.is_set():
            info = route.stop_info
            why = info.message if info is not None else "the task has ended"
            self.send_error_body(protocol, 409, f"agentbench gateway: the task has ended: {why}")
            return
        self.server.gateway.relay(route, protocol, self, body)

    def _read_json(self, protocol: str) -> JsonObject | None:
        length = self.headers.get("content-length")
        if length is None or not length.isdigit() or int(length) > MAX_BODY_BYTES:
            self.close_connection = True
            self.send_error_body(protocol, 400, "a JSON body with a content-length is needed")
            return None
        raw = self.rfile.read(int(length))
        try:
            body = parse_json(raw.decode("utf-8"))
        except ValueError:
            body = None
        if not isinstance(body, dict):
            self.send_error_body(protocol, 400, "the request body is not a JSON object")
            return None
        return body

    def _send_json(self, status: int, data: JsonObject) -> None:
        self.send_raw(status, "application/json", json.dumps(data).encode())

    def send_raw(self, status: int, content_type: str, raw: bytes) -> None:
        """A whole reply of ``content_type``; a hung-up agent is not an error here."""
        self.send_response(status)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(raw)))
        self.end_headers()
        with contextlib.suppress(OSError):
            self.wfile.write(raw)

    def send_error_body(self, protocol: str, status: int, message: str) -> None:
        """An error in the protocol's own shape (the scripted provider's wire code)."""
        path = next(p for p, name in PROTOCOL_PATHS.items() if name == protocol)
        self._send_json(status, WIRES[path].error_body(status, message, ""))
