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

Here are the session, its turns and the tool calls they run; what an attempt produced
and the protocol every generator of attempts satisfies are in runner/agent_run.py, the
requests it sends in runner/turn_requests.py, the tool-loop watch in runner/tool_loop.py.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_agentbench.core.jsontypes import JsonObject, JsonValue
from pytest_agentbench.core.records import Failure, failure_kind
from pytest_agentbench.core.stream import EventSink
from pytest_agentbench.errors import AgentbenchError, CircuitOpen, ModelError, ModelTimeout
from pytest_agentbench.models.base import Generation, ModelClient, ToolCall, ToolSpec
from pytest_agentbench.models.usage import recovered_usage
from pytest_agentbench.runner.agent_run import AgentRun, length_limit
from pytest_agentbench.runner.loopguard import KillPolicy, LoopGuard, LoopKilled
from pytest_agentbench.runner.tool_loop import ToolLoopPolicy, ToolLoopWatch
from pytest_agentbench.runner.turn_requests import tool_specs, turn_request
from pytest_agentbench.suites.task import Task

if TYPE_CHECKING:  # the tools and their sandbox: imported by sessions that run tools only
    from pytest_agentbench.runner.tools import Tool, ToolResult
    from pytest_agentbench.sandbox.workspace import Workspace

#: What ``result.json`` keeps of a call's arguments (the trajectory has them whole).
ARGUMENTS_PREVIEW = 300
#: A command's own output cap: a few times what the model may be shown, so the cap that
#: adds the truncation marker is the agent's, not the sandbox's.
_COMMAND_OUTPUT_FACTOR = 4


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
