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
import time
from collections import OrderedDict
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from pytest_agentbench.agents import replies, translate
from pytest_agentbench.agents.route import CallRecord, ClientFor, Route, overflow_message
from pytest_agentbench.agents.translate import Untranslatable
from pytest_agentbench.core.durations import any_seconds_text, seconds_text
from pytest_agentbench.core.jsontypes import JsonObject, JsonValue
from pytest_agentbench.core.records import Failure
from pytest_agentbench.core.stream import StreamEvent
from pytest_agentbench.errors import (
    CircuitOpen,
    ContextOverflow,
    ModelError,
    ModelTimeout,
    QueueTimeout,
)
from pytest_agentbench.models.base import REQUEST_CALL, REQUEST_TASK, Generation, ModelRequest
from pytest_agentbench.models.siblings import PROTOCOL_NAMES, PROTOCOL_PATHS
from pytest_agentbench.models.sse import parse_json
from pytest_agentbench.models.usage import recovered_usage
from pytest_agentbench.runner.agent import ToolLoopPolicy
from pytest_agentbench.runner.loopguard import KillPolicy, LoopGuard, LoopKilled
from pytest_agentbench.scripted.handler import WIRES

#: Response headers not handed on: the gateway frames the body itself (chunked).
_HOP_HEADERS = frozenset(
    {"connection", "keep-alive", "transfer-encoding", "content-length", "upgrade", "date"}
)
#: Request headers of the agent handed on upstream (what selects API features).
_FORWARDED = ("anthropic-beta", "anthropic-version", "openai-beta")
#: The largest request body accepted (an agent's whole conversation).
MAX_BODY_BYTES = 64 * 1024 * 1024
#: Relaying threads: each keeps its own upstream connections (models/http.py).
RELAY_THREADS = 256
#: Closed routes remembered, so that a late request with a route's key learns why it ended.
ENDED_KEPT = 4096


class _AgentReply:
    """The reply to one agent request, written as the upstream reply arrives (a Relay):
    its status and headers, then each chunk of its body, chunked."""

    def __init__(
        self, handler: _Handler, body: Mapping[str, JsonValue], headers: Mapping[str, str]
    ) -> None:
        self.handler = handler
        self.body = body
        self.headers = headers
        self._started = False
        self.bytes = 0

    @property
    def started(self) -> bool:
        return self._started

    def start(self, status: int, headers: list[tuple[str, str]]) -> None:
        handler = self.handler
        handler.send_response(status)
        for name, value in headers:
            if name.lower() not in _HOP_HEADERS:
                handler.send_header(name, value)
        handler.send_header("transfer-encoding", "chunked")
        handler.end_headers()
        self._started = True

    def send(self, chunk: bytes) -> None:
        if chunk:
            self.bytes += len(chunk)
            self.handler.wfile.write(b"%x\r\n%b\r\n" % (len(chunk), chunk))

    def finish(self) -> None:
        self.handler.wfile.write(b"0\r\n\r\n")


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
            pool.submit(_relay, route, protocol, handler, body).result()


def _error_entry(exc: ModelError) -> JsonObject:
    partial = getattr(exc, "partial", None)
    entry: JsonObject = {
        "error": str(exc),
        "status": exc.status,
        "endpoint": exc.endpoint,
        "sent": not isinstance(exc, CircuitOpen),
        "retries": list(getattr(exc, "retries", None) or []),
    }
    exchange = getattr(partial, "exchange", None)
    if isinstance(exchange, dict):
        entry = {**exchange, **entry}
    return entry


def _killed(
    route: Route, attempt: int, where: JsonObject, guard: LoopGuard, exc: LoopKilled
) -> str:
    """Record a call the loop watch killed and stop the route; the stop's message."""
    whole = exc.whole  # arrived whole: its usage known
    text = whole.text if whole is not None else guard.answer
    usage = (
        whole.usage.as_dict()
        if whole is not None
        else recovered_usage(text, guard.thinking).as_dict()
    )
    exchange = dict(whole.exchange) if whole is not None else {}
    entry: JsonObject = {**where, **exchange, "killed": exc.evidence, "answer_chars": len(text)}
    waited = whole.waited_s if whole is not None else 0.0
    route.record(CallRecord(attempt, entry, usage, guard.summary(), text, waited_s=waited))
    said = "reply (it arrived whole)" if whole is not None else "stream"
    message = (
        f"loop in the model's {said} at {seconds_text(time.monotonic() - route.started)} s "
        f"(period {exc.evidence['period']} ×{exc.evidence['repetitions']:g} in "
        f"{exc.evidence['channel']})"
    )
    route.stop("loop_killed", message, exc.evidence)
    return message


def _failed(
    route: Route,
    call: tuple[int, JsonObject],
    handler: _Handler,
    protocol: str,
    started: bool,
    exc: ModelError | OSError,
    body: Mapping[str, JsonValue],
) -> None:
    """Record a call that failed (``call``: its attempt and entry so far) and answer the
    agent: an error in its protocol's shape, or its stream cut when it had begun. The
    breaker, the deadline and a context overflow stop the route (an overflow is the
    harness's to fix, as in the built-in loop, whatever the agent would do next); an
    OSError is the agent hanging up."""
    attempt, where = call
    if isinstance(exc, OSError):
        route.record(CallRecord(attempt, {**where, "error": f"the agent hung up: {exc}"}))
        handler.close_connection = True
        return
    entry = {**where, **_error_entry(exc)}
    if exc.waited_s >= 0.0005:
        entry["waited_s"] = round(exc.waited_s, 3)
    route.record(CallRecord(attempt, entry, waited_s=exc.waited_s))
    if isinstance(exc, ContextOverflow):
        message = overflow_message(where, body, exc)
        failure = Failure.from_error(exc)
        route.stop("harness_error", message, failure=replace(failure, message=message))
    elif isinstance(exc, CircuitOpen | QueueTimeout):
        # the breaker; or no reply began within the queue's bound (not the agent's time)
        route.stop("harness_error", str(exc))
    elif isinstance(exc, ModelTimeout):
        route.stop("timeout", str(exc))
    if started:
        handler.close_connection = True
    else:
        status = exc.status or (504 if isinstance(exc, ModelTimeout) else 502)
        handler.send_error_body(protocol, status, str(exc))


def _done(
    route: Route,
    attempt: int,
    where: JsonObject,
    guard: LoopGuard,
    generation: Generation,
    started: float,
) -> None:
    """Record a call that succeeded (before its reply ends: the agent may exit then)."""
    usage = generation.usage.as_dict()
    entry: JsonObject = {
        **where,
        **generation.exchange,
        "usage": usage,
        "model_s": round(time.monotonic() - started, 3),
    }
    tools = len(generation.tool_calls)
    route.record(
        CallRecord(
            attempt,
            entry,
            usage,
            guard.summary(),
            generation.text,
            tools,
            ok=True,
            waited_s=generation.waited_s,
        )
    )


#: What a provider answers for an endpoint it does not have: the request is translated.
_NOT_SERVED = (404, 405)


def _relay(route: Route, protocol: str, handler: _Handler, body: JsonObject) -> None:
    """One agent request through ``route``: the tool-call loop watch on its history, the
    relay to the task's model, the record of the call, and a stop when the call must end
    the agent."""
    call, attempt, turn = route.next_call()
    where: JsonObject = {
        "attempt": attempt + 1,
        "turn": turn,
        "call": call + 1,
        "protocol": protocol,
        "at_s": round(time.monotonic() - route.started, 3),
    }
    evidence = route.watch_tools(protocol, body)
    if evidence is not None:
        message = (
            f"loop in the agent's tool calls at {any_seconds_text(evidence['killed_s'])} s "
            "(period "
            f"{evidence['period']} ×{evidence['repetitions']}, {evidence['rule']})"
        )
        route.record(CallRecord(attempt, {**where, "killed": evidence}))
        route.stop("loop_killed", message, evidence)
        handler.send_error_body(protocol, 400, f"agentbench gateway: {message}")
        handler.close_connection = True
        return
    client = route.client(protocol)
    if client is None:
        _translate(route, protocol, handler, body, where, (call, attempt))
        return
    headers = {name: value for name in _FORWARDED if (value := handler.headers.get(name))}
    reply = _AgentReply(handler, body, headers)
    left = route.deadline - time.monotonic()
    request = ModelRequest(
        messages=(),
        timeout_s=max(left, 0.001) if left != float("inf") else None,
        stream=body.get("stream") is True,
        metadata={REQUEST_TASK: route.task_key, REQUEST_CALL: str(call)},
        relay=reply,
    )
    guard = LoopGuard(route.kill_policy)
    started = time.monotonic()
    try:
        generation = guard.check(client.generate(request, guard.chain(route.on_event)))
    except LoopKilled as exc:
        _killed(route, attempt, where, guard, exc)
        if exc.whole is None:  # else it arrived whole: relayed to the agent already
            handler.close_connection = True
            return
        try:  # relayed whole already: end it as sent, then the agent is stopped
            reply.finish()
        except OSError:
            handler.close_connection = True
        return
    except (ModelError, OSError) as exc:
        status = exc.status if isinstance(exc, ModelError) else None
        if status in _NOT_SERVED and not reply.started and route.not_served(protocol):
            # the provider has no such endpoint (many local servers serve Chat alone)
            refused = f"HTTP {status} from the model's {PROTOCOL_NAMES[protocol]} endpoint"
            where = {**where, "relay_refused": refused}
            _translate(route, protocol, handler, body, where, (call, attempt))
            return
        _failed(route, (attempt, where), handler, protocol, reply.started, exc, body)
        return
    _done(route, attempt, where, guard, generation, started)  # before the reply ends
    try:
        reply.finish()
    except OSError:
        handler.close_connection = True


def _translate(
    route: Route,
    protocol: str,
    handler: _Handler,
    body: JsonObject,
    where: JsonObject,
    numbers: tuple[int, int],
) -> None:
    """``_relay`` for a model whose provider does not serve the agent's protocol: the
    request in neutral form (agents/translate.py) through the model's client of another
    protocol (Chat, else Responses, else Messages), the reply rendered in the agent's
    (agents/replies.py; streamed live when the agent streams); the same loop watch,
    deadline, breaker and record as a relayed call, the record saying ``translated``."""
    call, attempt = numbers
    own = next(
        ((name, made) for name in PROTOCOL_NAMES if (made := route.client(name)) is not None),
        None,
    )
    try:
        if own is None:
            raise Untranslatable(
                "its client speaks none of the built-in protocols (a plugin's client), so "
                "the gateway can neither relay nor translate"
            )
        parsed = translate.parse(protocol, body)
    except Untranslatable as exc:
        message = (
            f"the task's model {route.model_label} is not served over "
            f"{PROTOCOL_NAMES[protocol]}, which this agent calls, and the request cannot be "
            f"translated: {exc}"
        )
        route.record(CallRecord(attempt, {**where, "error": message, "status": 400}))
        handler.send_error_body(protocol, 400, message)
        return
    name, client = own
    where = {**where, "translated": f"{protocol}→{name}"}
    if parsed.dropped_tools:
        where["dropped_tools"] = list(parsed.dropped_tools)
    left = route.deadline - time.monotonic()
    request = ModelRequest(
        messages=parsed.messages,
        system=parsed.system,
        tools=parsed.tools,
        max_tokens=parsed.max_tokens,
        sampling=parsed.sampling,
        timeout_s=max(left, 0.001) if left != float("inf") else None,
        stream=True,  # the loop watch reads the model's stream as it arrives
        metadata={REQUEST_TASK: route.task_key, REQUEST_CALL: str(call)},
    )
    guard = LoopGuard(route.kill_policy)
    reply = _AgentReply(handler, body, {})
    live = replies.stream_for(protocol, route.model_label, body) if parsed.stream else None

    def hand_on(event: StreamEvent) -> None:
        """The answer's text and thinking to a streaming agent as they arrive (after the
        loop watch)."""
        if live is not None and event.kind in ("text", "thinking") and event.text:
            piece = live.text if event.kind == "text" else live.thinking
            chunk = piece(event.text)
            if chunk and not reply.started:
                reply.start(200, [("content-type", replies.SSE), ("cache-control", "no-cache")])
            reply.send(chunk)
        if route.on_event is not None:
            route.on_event(event)

    started = time.monotonic()
    try:
        generation = guard.check(client.generate(request, guard.chain(hand_on)))
    except LoopKilled as exc:
        message = _killed(route, attempt, where, guard, exc)
        if not reply.started:
            handler.send_error_body(protocol, 400, f"agentbench gateway: {message}")
        handler.close_connection = True  # a stream begun is cut where it was
        return
    except (ModelError, OSError) as exc:
        _failed(route, (attempt, where), handler, protocol, reply.started, exc, body)
        return
    _done(route, attempt, where, guard, generation, started)
    try:
        if live is None:
            kind, raw = replies.render(protocol, generation, route.model_label, body)
            handler.send_raw(200, kind, raw)
            return
        if not reply.started:
            reply.start(200, [("content-type", replies.SSE), ("cache-control", "no-cache")])
        reply.send(live.end(generation))
        reply.finish()
    except OSError:
        handler.close_connection = True


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
