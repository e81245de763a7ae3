"""One agent request through its route on the gateway (agents/gateway.py, which admits
it): the tool-call loop watch on its history; the relay to the task's model over the
agent's own protocol, byte for byte as it streams, or, when the model's provider does
not serve that protocol, the request translated (agents/translate.py) and the reply
rendered back (agents/replies.py); the record of the call on the route, whatever its
end (done, killed by the loop watch, failed); and the route's stop when the call must
end the agent.
"""

from __future__ import annotations

import email.message
import time
from collections.abc import Mapping
from dataclasses import replace
from io import BufferedIOBase
from typing import Protocol

from pytest_agentbench.agents import replies, translate
from pytest_agentbench.agents.route import CallRecord, Route, overflow_message
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
from pytest_agentbench.models.siblings import PROTOCOL_NAMES
from pytest_agentbench.models.usage import recovered_usage
from pytest_agentbench.runner.loopguard import LoopGuard, LoopKilled

#: Response headers not handed on: the gateway frames the body itself (chunked).
_HOP_HEADERS = frozenset(
    {"connection", "keep-alive", "transfer-encoding", "content-length", "upgrade", "date"}
)
#: Request headers of the agent handed on upstream (what selects API features).
_FORWARDED = ("anthropic-beta", "anthropic-version", "openai-beta")


class Connection(Protocol):
    """What a call needs of the agent's connection: the gateway's HTTP handler."""

    headers: email.message.Message
    wfile: BufferedIOBase
    close_connection: bool

    def send_response(self, code: int, message: str | None = None) -> None: ...

    def send_header(self, keyword: str, value: str) -> None: ...

    def end_headers(self) -> None: ...

    def send_raw(self, status: int, content_type: str, raw: bytes) -> None: ...

    def send_error_body(self, protocol: str, status: int, message: str) -> None: ...


class _AgentReply:
    """The reply to one agent request, written as the upstream reply arrives (a Relay):
    its status and headers, then each chunk of its body, chunked."""

    def __init__(
        self, handler: Connection, body: Mapping[str, JsonValue], headers: Mapping[str, str]
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
    handler: Connection,
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


def relay(route: Route, protocol: str, handler: Connection, body: JsonObject) -> None:
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
    handler: Connection,
    body: JsonObject,
    where: JsonObject,
    numbers: tuple[int, int],
) -> None:
    """``relay`` for a model whose provider does not serve the agent's protocol: the
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
