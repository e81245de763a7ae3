"""The agent loop: a model that acts through tools in a workspace, turn after turn.

It is the one generation path of a rollout: a plain answer task is this loop with no
tools, no workspace and one turn (``AgentSession.plain``), so the loop watch, the
deadline, usage summation and the attempt records live here only.

An attempt in agent mode is a loop: send the conversation with the tools offered, run
every tool call the reply makes against the rollout's workspace, append the results, and
ask again, until the model answers without a tool call or a limit hits — max turns (model
calls per attempt), the wall clock (the task's timeout), a text loop in a generation
(``LoopGuard``), or a tool-call loop (``ToolLoopWatch``). The workspace and the model-call
counter belong to the rollout, so repair rounds continue where the last attempt left off.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol

from pytest_agentbench.core.jsontypes import JsonObject, JsonValue
from pytest_agentbench.core.records import Attempt, Failure, FailureKind, failure_kind
from pytest_agentbench.core.stream import EventSink
from pytest_agentbench.core.usage import sum_usage
from pytest_agentbench.errors import AgentbenchError, CircuitOpen, ModelError, ModelTimeout
from pytest_agentbench.models.base import (
    REQUEST_CALL,
    REQUEST_EPOCH,
    REQUEST_TASK,
    Generation,
    ModelClient,
    ModelRequest,
    ToolCall,
    ToolSpec,
)
from pytest_agentbench.models.usage import recovered_usage
from pytest_agentbench.runner.loopguard import (
    ChannelPeak,
    GuardSummary,
    KillPolicy,
    LoopGuard,
    LoopKilled,
)
from pytest_agentbench.suites.task import Task

if TYPE_CHECKING:  # the tools and their sandbox: imported by sessions that run tools only
    from pytest_agentbench.runner.tools import Tool, ToolResult
    from pytest_agentbench.sandbox.workspace import Workspace

#: How an attempt's loop ended: the model answered, or a limit or a failure stopped it.
AgentStop = Literal[
    "answered", "turn_limit", "loop_killed", "timeout", "harness_error", "agent_failed"
]
#: What ``result.json`` keeps of a call's arguments (the trajectory has them whole).
ARGUMENTS_PREVIEW = 300
_EXCERPT = 300
#: A command's own output cap: a few times what the model may be shown, so the cap that
#: adds the truncation marker is the agent's, not the sandbox's.
_COMMAND_OUTPUT_FACTOR = 4


@dataclass(frozen=True)
class ToolLoopPolicy:
    """When repeated tool calls are a loop: the same call (name and arguments) ``same_call``
    times in a row, or a cycle of 2 to ``max_period`` calls repeated ``cycles`` times."""

    same_call: int = 4
    max_period: int = 4
    cycles: int = 3


class ToolLoopWatch:
    """The calls of one attempt, in order; ``add`` says when they have become a loop."""

    def __init__(self, policy: ToolLoopPolicy) -> None:
        self.policy = policy
        self.calls: list[str] = []

    def add(self, signature: str, at_s: float) -> JsonObject | None:
        """Record one call (``canonical_call``); the kill evidence when the calls now end
        in a loop, else None. Shorter periods are tried first, so a cycle of identical
        calls is reported as period 1."""
        calls = self.calls
        calls.append(signature)
        for period in range(1, self.policy.max_period + 1):
            needed = self.policy.same_call if period == 1 else self.policy.cycles
            block = calls[-period:]
            if len(calls) < period * needed or (period > 1 and len(set(block)) == 1):
                continue
            repetitions = 1
            while calls[-(repetitions + 1) * period : len(calls) - repetitions * period] == block:
                repetitions += 1
            if repetitions >= needed:
                excerpt = " → ".join(block)
                if len(excerpt) > _EXCERPT:
                    excerpt = excerpt[: _EXCERPT - 1] + "…"
                return {
                    "channel": "tools",
                    "period": period,
                    "repetitions": repetitions,
                    "rule": "same call" if period == 1 else "cycle",
                    "numeric": False,
                    "score": 1.0,
                    "detected_s": round(at_s, 3),
                    "killed_s": round(at_s, 3),
                    "held_s": 0.0,
                    "calls": len(calls),
                    "excerpt": excerpt,
                }
        return None


@dataclass
class AgentRun:
    """What one attempt's loop produced. ``messages`` is the conversation up to the final
    answer (which is ``text``, not yet appended); ``error`` says why it stopped short.
    ``plain`` when it was a plain answer (one generation, no tools): its records keep
    the answer shape (no turn numbers, no tool calls, the native usage kept)."""

    messages: list[JsonObject]
    plain: bool = False
    stop: AgentStop = "answered"
    error: str | None = None
    failure: FailureKind | None = None
    failure_detail: Failure | None = None
    text: str = ""
    thinking: str = ""
    finish_reason: str | None = None
    turns: int = 0
    usages: list[JsonObject] = field(default_factory=list)
    #: the usage of the calls replayed from the response cache
    cached_usages: list[JsonObject] = field(default_factory=list)
    #: the usage of the calls the batch API answered, and why a planned one went live
    batch_usages: list[JsonObject] = field(default_factory=list)
    batch_live: str | None = None
    usage_native: JsonObject | None = None
    tool_calls: list[JsonObject] = field(default_factory=list)
    guards: list[GuardSummary] = field(default_factory=list)
    killed: JsonObject | None = None
    trajectory: list[JsonObject] = field(default_factory=list)
    elapsed_s: float = 0.0
    #: of ``elapsed_s``, the seconds its requests waited in the server's queue before
    #: their own time began (models/queue.py): the deadline moves on by as much
    waited_s: float = 0.0
    #: which limit cut the last reply when it ended with ``length`` (``length_limit``)
    length_limit: str | None = None

    def fill(self, attempt: Attempt) -> None:
        """Copy this run onto its attempt record (result.json)."""
        attempt.answer = self.text
        attempt.thinking = self.thinking
        attempt.finish_reason = self.finish_reason
        attempt.usage = sum_usage(self.usages) if self.usages else {}
        if self.cached_usages:
            attempt.cached = len(self.cached_usages)
            attempt.cached_usage = sum_usage(self.cached_usages)
        if self.batch_usages:
            attempt.batch = len(self.batch_usages)
            attempt.batch_usage = sum_usage(self.batch_usages)
        attempt.batch_live = self.batch_live
        attempt.elapsed_s = self.elapsed_s
        attempt.waited_s = round(self.waited_s, 3)
        attempt.length_limit = self.length_limit
        attempt.error = self.error
        attempt.loop = self.loop_record()
        if self.plain:
            attempt.usage_native = self.usage_native
        else:
            attempt.turns = self.turns
            attempt.tool_calls = self.tool_calls

    def loop_record(self) -> JsonObject | None:
        """The attempt's loop record in the shape of one generation's (``LoopGuard``):
        the kill (text or tools), whether thinking recovered, and per channel the highest
        verdict over all turns. None when no generation was watched (the first call
        failed)."""
        if not self.guards:
            return None
        channels: dict[str, ChannelPeak] = {}
        for summary in self.guards:
            for name, peak in summary.channels.items():
                best = channels.get(name)
                if best is None or peak.rank > best.rank:
                    channels[name] = peak
        recovered = any(summary.recovered for summary in self.guards) and self.killed is None
        return GuardSummary(self.killed, recovered, channels).as_dict()


#: Which limit cut a reply that ended with finish reason ``length``.
OUTPUT_TOKENS = "output_tokens"
CONTEXT_WINDOW = "context_window"


def length_limit(generation: Generation, max_tokens: int | None) -> str | None:
    """Which limit cut ``generation`` when it ended with ``length`` (None otherwise): the
    output-token limit the request set, or the model's context window. A server stops at
    its context window too (prompt plus answer filling it) and reports ``length`` alike;
    it was not the output-token limit when the reported output is below that limit, or
    when the request set none. Counts recovered from the text (no usage reported) cannot
    tell: the output-token limit is assumed."""
    if generation.finish_reason != "length":
        return None
    if max_tokens is None:
        return CONTEXT_WINDOW
    usage = generation.usage
    if usage.output is not None and not usage.recovered and usage.output < max_tokens:
        return CONTEXT_WINDOW
    return OUTPUT_TOKENS


class Session(Protocol):
    """What a rollout asks of the generator of its attempts: ``AgentSession`` (the
    built-in loop) or an agent under test's session (agents/: ``stop`` may then also be
    ``agent_failed``, the agent's own failure: the attempt fails, unverified)."""

    @property
    def workspace(self) -> Workspace | None: ...

    @property
    def calls(self) -> int: ...

    def attempt(
        self,
        messages: Sequence[Mapping[str, JsonValue]],
        *,
        index: int,
        deadline: float,
        timeout_s: float,
        on_event: EventSink | None = None,
        on_phase: Callable[[str], None] | None = None,
        phase: str = "waiting",
    ) -> AgentRun: ...

    def close(self) -> list[str]: ...


#: Opens the session of a task naming an agent under test, with its workspace at the
#: given folder (the session glue passes one in; the runner knows no agent kind).
OpenAgent = Callable[[Task, Path], Session]


def first_messages(task: Task) -> list[JsonObject]:
    """The conversation of a rollout's first request: the task's prompt."""
    return [{"role": "user", "content": task.prompt}]


def turn_request(
    task: Task,
    messages: Sequence[Mapping[str, JsonValue]],
    *,
    tools: tuple[ToolSpec, ...] = (),
    max_tokens: int | None,
    stream: bool,
    call: int,
    timeout_s: float | None = None,
) -> ModelRequest:
    """The request of one model call of ``task``'s rollout: ``call`` is its number in the
    rollout (0 for the first). The one place a rollout's requests are built, so a request
    built ahead of the rollout (the batch of first-round requests, session/batch.py) is
    the one the rollout sends, body and cache key alike."""
    return ModelRequest(
        messages=tuple(messages),
        system=task.system,
        sampling=task.sampling,
        tools=tools,
        max_tokens=max_tokens,
        timeout_s=timeout_s,
        stream=stream,
        metadata={
            REQUEST_TASK: task.key,
            REQUEST_CALL: str(call),
            REQUEST_EPOCH: str(task.epoch or 0),
        },
    )


def first_request(
    task: Task, *, max_tokens: int | None, stream: bool, tools: Mapping[str, Tool] | None = None
) -> ModelRequest:
    """The first request of a rollout of ``task``, as ``AgentSession.attempt`` sends it
    (without its deadline): no tools for a plain answer; in agent mode the task's tools
    out of ``tools`` (all the run's tools by name), in the task's order."""
    specs = tool_specs(task, tools) if task.mode == "agent" and tools is not None else ()
    return turn_request(
        task, first_messages(task), tools=specs, max_tokens=max_tokens, stream=stream, call=0
    )


def tool_specs(task: Task, tools: Mapping[str, Tool]) -> tuple[ToolSpec, ...]:
    """The specs of the tools an agent-mode ``task`` is offered, in its order."""
    return tuple(tools[name].spec for name in task.tools)


def _call_part(call: ToolCall) -> JsonObject:
    """The neutral assistant tool-call part; malformed arguments are sent back as the
    model wrote them."""
    arguments: JsonValue = call.raw_arguments if call.arguments is None else dict(call.arguments)
    return {"id": call.id, "name": call.name, "arguments": arguments}


def _preview(call: ToolCall) -> str:
    from pytest_agentbench.runner.tools import canonical_call

    text = canonical_call(call).partition(" ")[2]
    return text if len(text) <= ARGUMENTS_PREVIEW else text[: ARGUMENTS_PREVIEW - 1] + "…"


def _error_entry(exc: ModelError) -> JsonObject:
    partial = getattr(exc, "partial", None)
    if isinstance(partial, Generation):
        return dict(partial.exchange)
    return {
        "error": str(exc),
        "status": exc.status,
        "endpoint": exc.endpoint,
        "sent": not isinstance(exc, CircuitOpen),
        "retries": list(getattr(exc, "retries", None) or []),
    }


class AgentSession:
    """The generations of one rollout: the workspace and the tools the model is offered
    (none for a plain answer), its turn limit per attempt, and the count of model calls
    so far (``REQUEST_CALL`` of the next request, rollout-wide)."""

    def __init__(
        self,
        task: Task,
        client: ModelClient,
        tools: Mapping[str, Tool],
        workspace: Workspace | None,
        *,
        max_tokens: int | None = None,
        stream: bool = True,
        kill_policy: KillPolicy | None = None,
        tool_loop: ToolLoopPolicy | None = None,
    ) -> None:
        wanted = task.tools if workspace is not None else ()
        missing = [name for name in wanted if name not in tools]
        if missing:
            raise AgentbenchError(
                f"task {task.id!r} asks for tool(s) {', '.join(missing)} that no plugin "
                f"provides; available: {', '.join(tools) or '(none)'}"
            )
        self.task = task
        self.client = client
        self.tools = {name: tools[name] for name in wanted}
        self.workspace = workspace
        #: model calls per attempt: one for a plain answer
        self.max_turns = task.max_turns if workspace is not None else 1
        self.max_tokens = max_tokens
        self.stream = stream
        self.kill_policy = kill_policy or KillPolicy()
        self.tool_loop = tool_loop or ToolLoopPolicy()
        self.calls = 0
        #: how long one ``bash`` call may run at most (within the task's deadline); a
        #: plain answer runs none (and imports neither the tools nor the sandbox)
        self.command_timeout_s = 0.0
        if workspace is not None:
            from pytest_agentbench.runner.tools import BASH_TIMEOUT_S

            self.command_timeout_s = BASH_TIMEOUT_S

    @classmethod
    def plain(
        cls,
        task: Task,
        client: ModelClient,
        *,
        max_tokens: int | None = None,
        stream: bool = True,
        kill_policy: KillPolicy | None = None,
        tool_loop: ToolLoopPolicy | None = None,
    ) -> AgentSession:
        """A session for plain answers: no tools, no workspace, one model call per
        attempt, whose reply is the answer (tool calls in it are not run)."""
        return cls(
            task,
            client,
            {},
            None,
            max_tokens=max_tokens,
            stream=stream,
            kill_policy=kill_policy,
            tool_loop=tool_loop,
        )

    @classmethod
    def open(
        cls,
        task: Task,
        client: ModelClient,
        tools: Mapping[str, Tool],
        root: Path,
        *,
        isolation: str = "auto",
        max_tokens: int | None = None,
        stream: bool = True,
        kill_policy: KillPolicy | None = None,
        tool_loop: ToolLoopPolicy | None = None,
    ) -> AgentSession:
        """A session with a fresh workspace at ``root`` seeded from the task's files
        (what an earlier run left there is removed). Raises SandboxError or
        AgentbenchError when the workspace or the tools cannot be had."""
        if root.is_symlink() or root.is_file():
            root.unlink()
        elif root.exists():
            shutil.rmtree(root)
        from pytest_agentbench.sandbox.workspace import Workspace

        workspace = Workspace.create(root, task.files, task.files_dir, isolation=isolation)
        return cls(
            task,
            client,
            tools,
            workspace,
            max_tokens=max_tokens,
            stream=stream,
            kill_policy=kill_policy,
            tool_loop=tool_loop,
        )

    def close(self) -> list[str]:
        """Prune the kept workspace to KEEP_BYTES; returns the files removed (none without
        a workspace)."""
        if self.workspace is None:
            return []
        from pytest_agentbench.sandbox.workspace import KEEP_BYTES

        return self.workspace.prune(KEEP_BYTES)

    def attempt(
        self,
        messages: Sequence[Mapping[str, JsonValue]],
        *,
        index: int,
        deadline: float,
        timeout_s: float,
        on_event: EventSink | None = None,
        on_phase: Callable[[str], None] | None = None,
        phase: str = "waiting",
    ) -> AgentRun:
        """Run the loop for attempt ``index`` from ``messages`` until the model answers
        or a limit hits (``deadline`` is a ``time.monotonic`` instant, moved on by the
        time its requests wait in the server's queue, ``AgentRun.waited_s``; ``timeout_s``
        only names it in the error). Never raises for model failures: they end the run."""
        start = time.monotonic()
        run = AgentRun(messages=[dict(m) for m in messages], plain=self.workspace is None)
        watch = ToolLoopWatch(self.tool_loop)
        specs = tool_specs(self.task, self.tools) if self.workspace is not None else ()
        for turn in range(1, self.max_turns + 1):
            remaining = deadline + run.waited_s - time.monotonic()
            if remaining <= 0:
                run.stop, run.error = "timeout", f"timeout after {timeout_s:g}s"
                break
            if on_phase is not None:
                on_phase(phase if turn == 1 else f"{phase}, turn {turn}")
            run.turns = turn
            if not self._turn(run, turn, index, specs, watch, deadline, on_event, start):
                break
        else:
            run.stop = "turn_limit"
            run.error = f"turn limit ({self.max_turns}) reached"
        run.elapsed_s = time.monotonic() - start
        return run

    def _turn(
        self,
        run: AgentRun,
        turn: int,
        index: int,
        specs: tuple[ToolSpec, ...],
        watch: ToolLoopWatch,
        deadline: float,
        on_event: EventSink | None,
        start: float,
    ) -> bool:
        """One model call and its tool calls; False when the loop must stop."""
        request = turn_request(
            self.task,
            run.messages,
            tools=specs,
            max_tokens=self.max_tokens,
            stream=self.stream,
            call=self.calls,
            timeout_s=deadline + run.waited_s - time.monotonic(),
        )
        self.calls += 1
        # a plain answer's trajectory entries are the exchanges as they are
        where = {} if run.plain else {"attempt": index + 1, "turn": turn, "call": self.calls}
        guard = LoopGuard(self.kill_policy)
        t0 = time.monotonic()
        try:
            generation = guard.check(self.client.generate(request, guard.chain(on_event)))
        except LoopKilled as exc:
            whole = exc.whole
            if whole is not None:  # it arrived whole: its own text and usage
                run.waited_s += whole.waited_s
                self._took(run, whole)
            else:
                run.text, run.thinking = guard.answer, guard.thinking
                run.usages.append(recovered_usage(guard.answer, guard.thinking).as_dict())
            run.guards.append(guard.summary())
            run.killed = exc.evidence
            run.stop, run.error = "loop_killed", str(exc)
            run.failure_detail = Failure.of("loop_killed", run.error)
            exchange = dict(whole.exchange) if whole is not None else {}
            run.trajectory.append(
                {**where, **exchange, "killed": exc.evidence, "answer_chars": len(run.text)}
            )
            return False
        except ModelError as exc:
            run.waited_s += exc.waited_s
            partial = getattr(exc, "partial", None)
            if isinstance(partial, Generation):
                self._took(run, partial)
            run.stop = "timeout" if isinstance(exc, ModelTimeout) else "harness_error"
            run.error, run.failure = str(exc), failure_kind(exc)
            run.failure_detail = Failure.from_error(exc)
            run.trajectory.append({**where, **_error_entry(exc)})
            return False
        elapsed = time.monotonic() - t0
        run.waited_s += generation.waited_s
        run.guards.append(guard.summary())
        self._took(run, generation)
        if run.plain:
            run.trajectory.append(dict(generation.exchange))
            return False  # the reply is the answer: no tools were offered, none are run
        tool_results: list[JsonValue] = []
        entry: JsonObject = {
            **where,
            **generation.exchange,
            "usage": run.usages[-1],
            "model_s": round(elapsed, 3),
            "tool_results": tool_results,
        }
        run.trajectory.append(entry)
        if not generation.tool_calls:
            return False
        assistant: JsonObject = {
            "role": "assistant",
            "content": generation.text,
            "tool_calls": [_call_part(call) for call in generation.tool_calls],
        }
        if generation.reasoning_blocks:
            # the provider requires them back unchanged (signatures included) with the tool
            # results (Anthropic thinking with tools); other protocols ignore the key
            assistant["reasoning_blocks"] = [dict(b) for b in generation.reasoning_blocks]
        run.messages.append(assistant)
        return self._run_tools(
            run, generation.tool_calls, turn, entry, tool_results, watch, deadline, start
        )

    def _took(self, run: AgentRun, generation: Generation) -> None:
        """Keep what a generation (or a failed one's partial reply) produced."""
        run.text, run.thinking = generation.text, generation.thinking
        run.finish_reason = generation.finish_reason
        run.length_limit = length_limit(generation, self.max_tokens)
        run.usages.append(generation.usage.as_dict())
        reply = generation.exchange.get("response")
        if isinstance(reply, dict) and reply.get("cached") is True:
            run.cached_usages.append(run.usages[-1])
        if isinstance(reply, dict) and reply.get("batch") is True:
            run.batch_usages.append(run.usages[-1])
        if isinstance(reply, dict) and isinstance(reply.get("batch_live"), str):
            run.batch_live = str(reply["batch_live"])
        native = generation.usage_native
        run.usage_native = dict(native) if native else None

    def _run_tools(
        self,
        run: AgentRun,
        calls: Sequence[ToolCall],
        turn: int,
        entry: JsonObject,
        tool_results: list[JsonValue],
        watch: ToolLoopWatch,
        deadline: float,
        start: float,
    ) -> bool:
        from pytest_agentbench.runner.tools import call_tool, canonical_call, command_limits
        from pytest_agentbench.sandbox.process import Limits

        max_output = self.task.max_tool_output
        workspace = self.workspace
        assert workspace is not None  # a plain answer offers no tools and runs none
        for call in calls:
            evidence = watch.add(canonical_call(call), time.monotonic() - start)
            if evidence is not None:
                run.killed = evidence
                run.stop, run.error = "loop_killed", str(LoopKilled(evidence))
                entry["killed"] = evidence
                return False
            remaining = max(0.1, deadline + run.waited_s - time.monotonic())
            bash_s = min(self.command_timeout_s, remaining)
            limits = Limits(
                timeout_s=bash_s,
                cpu_s=bash_s,
                output_bytes=max(65536, max_output * _COMMAND_OUTPUT_FACTOR),
            )
            with command_limits(limits):
                result = call_tool(self.tools, workspace, call, max_output)
            run.messages.append(result.as_message())
            run.tool_calls.append(_call_record(call, result, turn))
            tool_results.append(
                {
                    "id": result.call_id,
                    "name": result.name,
                    "output": result.output,
                    "is_error": result.is_error,
                    "truncated": result.truncated,
                    "output_chars": result.output_chars,
                    "elapsed_s": result.elapsed_s,
                }
            )
        return True


def _call_record(call: ToolCall, result: ToolResult, turn: int) -> JsonObject:
    """One tool call as ``result.json`` keeps it (arguments cut, no output)."""
    return {
        "turn": turn,
        "id": call.id,
        "name": call.name,
        "arguments": _preview(call),
        "is_error": result.is_error,
        "output_chars": result.output_chars,
        "truncated": result.truncated,
        "elapsed_s": result.elapsed_s,
    }
