"""One task's way through the gateway: its base URL path and stand-in key, the clients of
its model, and the record of every call its agent made (the task's trajectory).

A route is opened for a rollout and closed with it. The gateway attributes a request to
a route by its path *and* key (both must match), so with dozens of agents in flight
every call lands on its own task. A route ends its agent when it must: ``stop`` records
why (``loop_killed``, ``timeout``, ``harness_error``) with the evidence, and sets
``stopped``, which the agent's runner watches to kill the agent's process group.
"""

from __future__ import annotations

import hmac
import json
import secrets
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import field

from pytest_agentbench.agents.endpoint import AgentEndpoint
from pytest_agentbench.core.fastclass import dataclass
from pytest_agentbench.core.jsontypes import JsonObject, JsonValue
from pytest_agentbench.core.records import Failure
from pytest_agentbench.core.stream import EventSink
from pytest_agentbench.errors import ContextOverflow
from pytest_agentbench.models.base import ModelClient, ToolCall
from pytest_agentbench.runner.loopguard import GuardSummary, KillPolicy
from pytest_agentbench.runner.tool_loop import ToolLoopPolicy, ToolLoopWatch
from pytest_agentbench.runner.tools import canonical_call

#: How a route ended its agent early.
StopReason = str  # "loop_killed" | "timeout" | "harness_error"

#: The model client of a protocol (``chat``, ``responses``, ``messages``), or None when
#: the task's model does not speak it.
ClientFor = Callable[[str], ModelClient | None]


@dataclass
class RouteStop:
    """Why a route ended its agent: the outcome, the one-line message, the evidence, and
    the structured failure when it is more than the outcome says (a context overflow)."""

    reason: StopReason
    message: str
    evidence: JsonObject | None = None
    at_s: float = 0.0
    failure: Failure | None = None


@dataclass
class CallRecord:
    """One model call as the gateway saw it: its trajectory entry, normalised usage (None
    when the call produced none), the loop guard's summary, the reply's text and whether
    it called tools."""

    attempt: int
    entry: JsonObject
    usage: JsonObject | None = None
    guard: GuardSummary | None = None
    text: str = ""
    tool_calls: int = 0
    ok: bool = False
    #: Seconds the call waited in its server's queue (models/queue.py): credited.
    waited_s: float = 0.0


@dataclass
class Route:
    """See the module docstring. ``task_key`` names the task to the model's client (the
    scripted provider's script); ``clients`` gives the task's model per protocol."""

    id: str
    key: str
    base_url: str
    task_key: str
    model_label: str
    clients: ClientFor
    kill_policy: KillPolicy = field(default_factory=KillPolicy)
    tool_loop: ToolLoopPolicy = field(default_factory=ToolLoopPolicy)
    deadline: float = float("inf")
    on_event: EventSink | None = None
    attempt: int = 0
    started: float = field(default_factory=time.monotonic)
    records: list[CallRecord] = field(default_factory=list)
    stop_info: RouteStop | None = None
    stopped: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)
    _calls: int = 0
    _turns: int = 0
    _in_flight: int = 0
    _idle: threading.Condition = field(default_factory=threading.Condition)
    _tool_watch: ToolLoopWatch | None = None
    _tool_ids: set[str] = field(default_factory=set)
    _clients: dict[str, ModelClient | None] = field(default_factory=dict)

    @classmethod
    def new(
        cls,
        gateway_url: str,
        task_key: str,
        model_label: str,
        clients: ClientFor,
        *,
        kill_policy: KillPolicy | None = None,
        tool_loop: ToolLoopPolicy | None = None,
    ) -> Route:
        """A route with a fresh random path and key under ``gateway_url``."""
        route_id = secrets.token_urlsafe(12)
        return cls(
            id=route_id,
            key="agb-" + secrets.token_urlsafe(24),
            base_url=f"{gateway_url}/agent/{route_id}",
            task_key=task_key,
            model_label=model_label,
            clients=clients,
            kill_policy=kill_policy or KillPolicy(),
            tool_loop=tool_loop or ToolLoopPolicy(),
        )

    @property
    def endpoint(self) -> AgentEndpoint:
        return AgentEndpoint(self.base_url, self.key)

    @property
    def calls(self) -> int:
        """Model calls made through this route so far (all attempts)."""
        return self._calls

    def admits(self, presented: str | None) -> bool:
        """Whether ``presented`` (the request's key) is this route's key."""
        return presented is not None and hmac.compare_digest(presented, self.key)

    def client(self, protocol: str) -> ModelClient | None:
        with self.lock:
            if protocol not in self._clients:
                self._clients[protocol] = self.clients(protocol)
            return self._clients[protocol]

    def not_served(self, protocol: str) -> bool:
        """The model's endpoint for ``protocol`` answered that it does not exist (a local
        server without ``/v1/responses``): from now on ``client(protocol)`` is None, so
        this route translates instead. False (nothing changed) when no other protocol
        could carry the request."""
        others = [name for name in ("chat", "responses", "messages") if name != protocol]
        if not any(self.client(name) is not None for name in others):
            return False
        with self.lock:
            self._clients[protocol] = None
        return True

    def begin_attempt(self, index: int, deadline: float, on_event: EventSink | None) -> None:
        """The agent's next run (a repair round continues it): its calls are recorded
        under ``index``; the tool-call loop watch starts afresh."""
        with self.lock:
            self.attempt = index
            self.deadline = deadline
            self.on_event = on_event
            self._turns = 0
            self._tool_watch = ToolLoopWatch(self.tool_loop)

    def next_call(self) -> tuple[int, int, int]:
        """The rollout-wide number of the next call (from 0, what the model's client is
        told), the attempt it belongs to, and its turn in that attempt (from 1)."""
        with self.lock:
            number = self._calls
            self._calls += 1
            self._turns += 1
            return number, self.attempt, self._turns

    def relaying(self) -> _InFlight:
        """Count a request as in flight while the gateway relays it (``settle`` waits)."""
        return _InFlight(self)

    def settle(self, timeout_s: float = 5.0) -> bool:
        """Wait until no request of this route is being relayed (its record is then
        written: an agent may exit as soon as its last reply's final bytes arrive,
        before the gateway has finished recording it). False when still busy."""
        with self._idle:
            return self._idle.wait_for(lambda: self._in_flight == 0, timeout_s)

    def stop(
        self,
        reason: StopReason,
        message: str,
        evidence: JsonObject | None = None,
        *,
        failure: Failure | None = None,
    ) -> None:
        """End the agent: the first reason given is kept."""
        with self.lock:
            if self.stop_info is None:
                at = round(time.monotonic() - self.started, 3)
                self.stop_info = RouteStop(reason, message, evidence, at, failure)
        self.stopped.set()

    def record(self, record: CallRecord) -> None:
        """Keep ``record``; its time queued at the server moves the deadline on by as
        much (not the agent's time, as for a built-in rollout)."""
        with self.lock:
            self.records.append(record)
            if record.waited_s > 0:
                self.deadline += record.waited_s

    def watch_deadline(self, done: threading.Event) -> None:
        """Until ``done``: stop the route ("timeout") once its deadline has passed with no
        call in flight. The deadline moves on as calls are credited their queue time
        (``record``), and a call in flight may yet be credited, so it is read again
        (each second, and often while a call past it ends); the agent's process itself
        runs under a hard bound (external.Attempt.bound)."""
        while not done.is_set():
            with self.lock:
                left = self.deadline - time.monotonic()
            if left > 0:
                done.wait(min(left, 1.0))
            elif self._in_flight:
                done.wait(0.05)
            else:
                self.stop("timeout", "the agent's time ran out")
                return

    def records_of(self, attempt: int) -> list[CallRecord]:
        with self.lock:
            return [r for r in self.records if r.attempt == attempt]

    def watch_tools(self, protocol: str, body: Mapping[str, JsonValue]) -> JsonObject | None:
        """Feed the tool calls the agent reports in a request's history (each once, by
        its id) to the tool-call loop watch; the kill evidence when they now loop."""
        calls = history_tool_calls(protocol, body)
        with self.lock:
            watch = self._tool_watch
            if watch is None:
                watch = self._tool_watch = ToolLoopWatch(self.tool_loop)
            for call in calls:
                if call.id in self._tool_ids:
                    continue
                self._tool_ids.add(call.id)
                evidence = watch.add(canonical_call(call), time.monotonic() - self.started)
                if evidence is not None:
                    return evidence
        return None


#: Where each protocol's request says how many output tokens it asks room for.
_ASKED = ("max_tokens", "max_completion_tokens", "max_output_tokens")


def overflow_message(
    where: Mapping[str, JsonValue], body: Mapping[str, JsonValue], exc: ContextOverflow
) -> str:
    """What ends an attempt whose model call the server refused as a context overflow:
    the call (its number in the rollout, its attempt and turn) and the token counts (the
    error's own when the server gave both; else what is known, with the output tokens
    the agent's request asked for when the server did not say)."""
    said: list[str] = []
    if exc.prompt_tokens is None or exc.context_tokens is None:
        said = [
            f"{value} {name} tokens"
            for name, value in (("prompt", exc.prompt_tokens), ("context", exc.context_tokens))
            if value is not None
        ]
    asked = next((v for k in _ASKED if isinstance(v := body.get(k), int)), None)
    if exc.completion_tokens is None and asked is not None:
        said.append(f"{asked} output tokens asked")
    if exc.prompt_tokens is None and exc.context_tokens is None:
        said.append("the server gave no token counts")
    call = (
        f"model call {where.get('call')} (attempt {where.get('attempt')}, turn {where.get('turn')})"
    )
    return f"{call} refused: {exc}" + (f" [{'; '.join(said)}]" if said else "")


class _InFlight:
    """``with route.relaying():`` around one relayed request."""

    def __init__(self, route: Route) -> None:
        self.route = route

    def __enter__(self) -> None:
        with self.route._idle:
            self.route._in_flight += 1

    def __exit__(self, *exc_info: object) -> None:
        with self.route._idle:
            self.route._in_flight -= 1
            self.route._idle.notify_all()


def _arguments(raw: JsonValue) -> tuple[Mapping[str, JsonValue] | None, str]:
    """A tool call's arguments parsed (None when not a JSON object) and as written."""
    if isinstance(raw, dict):
        return raw, json.dumps(raw, sort_keys=True)
    text = raw if isinstance(raw, str) else json.dumps(raw)
    try:
        value = json.loads(text)
    except ValueError:
        return None, text
    return (value, text) if isinstance(value, dict) else (None, text)


def history_tool_calls(protocol: str, body: Mapping[str, JsonValue]) -> list[ToolCall]:
    """The tool calls of the assistant turns in a request's history, in order: Chat
    ``messages[].tool_calls``, Responses ``input[]`` function calls, Anthropic
    ``messages[].content[]`` ``tool_use`` blocks."""
    found: list[ToolCall] = []
    if protocol == "responses":
        items = body.get("input")
        for item in items if isinstance(items, list) else ():
            if not isinstance(item, dict) or item.get("type") not in (
                "function_call",
                "custom_tool_call",
            ):
                continue
            args, raw = _arguments(item.get("arguments", item.get("input", "")))
            ident = item.get("call_id") or item.get("id")
            found.append(ToolCall(str(ident), str(item.get("name")), args, raw))
        return found
    messages = body.get("messages")
    for message in messages if isinstance(messages, list) else ():
        if not isinstance(message, dict) or message.get("role") != "assistant":
            continue
        if protocol == "chat":
            calls = message.get("tool_calls")
            for call in calls if isinstance(calls, list) else ():
                function = call.get("function") if isinstance(call, dict) else None
                if not isinstance(call, dict) or not isinstance(function, dict):
                    continue
                args, raw = _arguments(function.get("arguments", ""))
                found.append(ToolCall(str(call.get("id")), str(function.get("name")), args, raw))
        else:
            content = message.get("content")
            for block in content if isinstance(content, list) else ():
                if isinstance(block, dict) and block.get("type") == "tool_use":
                    args, raw = _arguments(block.get("input", {}))
                    found.append(ToolCall(str(block.get("id")), str(block.get("name")), args, raw))
    return found
