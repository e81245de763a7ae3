"""The ``command`` agent: a program we did not write, run with the task's prompt in the
task's workspace, reaching its model through the run's gateway.

Each attempt runs the command line once (a repair round runs ``resume_argv`` with the
verifier's feedback as the prompt, continuing the agent's own session). The agent gets
its task's gateway endpoint in the environment variables the common SDKs and CLIs read
(``AgentEndpoint.environment``), never the real key. It runs in the task's sandbox
(``auto`` / ``basic``: sharing the host's network, which the containment record says;
``strict``: a network namespace whose only way out is the gateway, through
agents/netbridge.py). Its attempt ends when it exits, when the task's deadline passes, or
when the gateway stops its route (a loop, the circuit breaker): its whole process group
is killed then.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from pytest_agentbench.agents.endpoint import AgentEndpoint
from pytest_agentbench.agents.gateway import Gateway
from pytest_agentbench.agents.route import CallRecord, ClientFor, Route, RouteStop
from pytest_agentbench.core.jsontypes import JsonObject, JsonValue
from pytest_agentbench.core.records import Failure
from pytest_agentbench.core.stream import EventSink
from pytest_agentbench.errors import AgentbenchError, SandboxError
from pytest_agentbench.models.usage import (
    normalise_anthropic_usage,
    normalise_chat_usage,
    normalise_responses_usage,
)
from pytest_agentbench.runner.agent import AgentRun
from pytest_agentbench.runner.loopguard import KillPolicy
from pytest_agentbench.sandbox import KEEP_BYTES, CommandResult, Limits, Workspace
from pytest_agentbench.suites.task import Task

#: The port of the gateway bridge on a strict sandbox's own loopback (agents/netbridge.py).
BRIDGE_PORT = 41000
#: What is kept of the agent's stdout and of its stderr (each), by default.
OUTPUT_BYTES = 65536
#: No address-space limit by default (JavaScript runtimes reserve far more than they use).
MEMORY_MB = 1 << 20
PROCESSES = 512


@dataclass(frozen=True)
class CommandOptions:
    """A ``command`` agent's options (suite ``agent`` table, checked by the suite schema)."""

    argv: tuple[str, ...]
    resume_argv: tuple[str, ...] | None = None
    prompt: str = "argv"
    env: Mapping[str, str] | None = None
    timeout_s: float | None = None
    final_message: str = "gateway"
    output_bytes: int = OUTPUT_BYTES
    memory_mb: int = MEMORY_MB
    processes: int = PROCESSES

    @classmethod
    def parse(cls, options: Mapping[str, JsonValue]) -> CommandOptions:
        def strings(value: JsonValue) -> tuple[str, ...]:
            return tuple(str(v) for v in value) if isinstance(value, list) else ()

        argv = strings(options.get("argv"))
        if not argv:
            raise AgentbenchError("a command agent needs argv, a non-empty list of strings")
        resume = options.get("resume_argv")
        prompt = options.get("prompt")
        if not isinstance(prompt, str):
            prompt = "argv" if any("{prompt}" in arg for arg in argv) else "stdin"
        env = options.get("env")
        timeout = options.get("timeout_s")
        output, memory, processes = (
            options.get(k) for k in ("output_bytes", "memory_mb", "processes")
        )
        return cls(
            argv=argv,
            resume_argv=strings(resume) or None if resume is not None else None,
            prompt=prompt,
            env={str(k): str(v) for k, v in env.items()} if isinstance(env, dict) else None,
            timeout_s=float(timeout) if isinstance(timeout, int | float) else None,
            final_message=str(options.get("final_message") or "gateway"),
            output_bytes=output if isinstance(output, int) else OUTPUT_BYTES,
            memory_mb=memory if isinstance(memory, int) else MEMORY_MB,
            processes=processes if isinstance(processes, int) else PROCESSES,
        )


def fill_template(template: Sequence[str], values: Mapping[str, str]) -> list[str]:
    """Each argument with its ``{name}`` placeholders replaced (an unknown one is left as
    written; no other brace is touched)."""
    filled = []
    for arg in template:
        for name, value in values.items():
            arg = arg.replace("{" + name + "}", value)
        filled.append(arg)
    return filled


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:200] if lines else ""


def reported_usage(stdout: str) -> JsonObject | None:
    """The usage an agent reports of itself in its output: the last JSON object line of
    stdout (or the whole of it) holding a ``usage`` object (Claude Code's
    ``--output-format json``, and agents like it), with ``total_cost_usd`` when given."""
    candidates = [stdout.strip()] + [line.strip() for line in reversed(stdout.splitlines())]
    for text in candidates:
        if not (text.startswith("{") and text.endswith("}")):
            continue
        try:
            data = json.loads(text)
        except ValueError:
            continue
        if isinstance(data, dict) and isinstance(data.get("usage"), dict):
            found: JsonObject = {"usage": data["usage"]}
            cost = data.get("total_cost_usd", data.get("cost_usd"))
            if isinstance(cost, int | float):
                found["cost_usd"] = cost
            return found
    return None


def usage_disagreement(
    reported: Mapping[str, JsonValue], counted: Sequence[Mapping[str, JsonValue]]
) -> JsonObject | None:
    """Where the agent's own count differs from the gateway's: input (cache included) and
    output tokens, each side normalised with its provider's arithmetic (the shape says
    which); None when they agree or either side does not know."""
    if "prompt_tokens" in reported:
        own = normalise_chat_usage(reported)
    elif "input_tokens_details" in reported or "output_tokens_details" in reported:
        own = normalise_responses_usage(reported)
    else:
        own = normalise_anthropic_usage(reported)

    def whole_input(input_: object, read: object, write: object) -> int | None:
        if not isinstance(input_, int):
            return None
        return input_ + sum(v for v in (read, write) if isinstance(v, int))

    theirs = {
        "input": whole_input(own.input, own.cache_read, own.cache_write),
        "output": own.output,
    }
    ours: dict[str, int | None] = {"input": 0, "output": 0}
    for usage in counted:
        whole = whole_input(usage.get("input"), usage.get("cache_read"), usage.get("cache_write"))
        out = usage.get("output")
        for name, value in (("input", whole), ("output", out)):
            current = ours[name]
            ours[name] = current + value if current is not None and isinstance(value, int) else None
    differ: JsonObject = {}
    for name in ("input", "output"):
        a, b = theirs[name], ours[name]
        if a is not None and b is not None and a != b:
            differ[name] = {"agent": a, "gateway": b}
    return differ or None


class AgentWorkspace(Workspace):
    """An agent under test's workspace: its containment says that the agent shares the
    host's network (it must reach its gateway on 127.0.0.1), or, in a strict sandbox,
    that it reaches its gateway and nothing else."""

    def containment(self) -> JsonObject:
        found = super().containment()
        if self.isolation == "strict":
            detail = str(found.get("detail", ""))
            note = "the agent under test reaches its gateway alone (a bridge to its socket)"
            return {**found, "network": False, "detail": f"{detail}; {note}"}
        if not found.get("network"):
            detail = str(found.get("detail", ""))
            note = "the agent under test shares the host's network to reach its gateway"
            found = {**found, "network": True, "detail": f"{detail}; {note}"}
        return found


class CommandSession:
    """The agent-under-test counterpart of runner/agent.py's AgentSession: what
    run_rollout asks of a session (``attempt``, ``close``, ``workspace``, ``calls``)."""

    def __init__(
        self,
        task: Task,
        options: CommandOptions,
        workspace: Workspace,
        gateway: Gateway,
        route: Route,
        *,
        strict_network: bool = False,
    ) -> None:
        self.task = task
        self.options = options
        self.workspace: Workspace | None = workspace
        self._workspace = workspace
        self.gateway = gateway
        self.route = route
        self.strict_network = strict_network

    @property
    def calls(self) -> int:
        return self.route.calls

    def close(self) -> list[str]:
        self.gateway.close_route(self.route)
        return self._workspace.prune(KEEP_BYTES)

    def _argv(self, index: int, prompt: str) -> list[str]:
        template = self.options.argv if index == 0 else self.options.resume_argv
        if template is None:  # refused at collection; a plugin's task could still get here
            raise AgentbenchError(
                f"task {self.task.id!r}: a repair round needs the command agent's resume_argv"
            )
        values = {
            "workspace": str(self._workspace.path),
            "python": sys.executable,
            "suite_dir": str(Path(self.task.path).parent),
            "task_id": self.task.id,
            "base_url": self.route.endpoint.base_url,
        }
        if self.options.prompt == "argv":
            values["prompt"] = prompt
        return fill_template(template, values)

    def _stdin(self, index: int, prompt: str) -> str | None:
        """What the agent reads on stdin in attempt ``index`` (None: nothing)."""
        return prompt if self.options.prompt == "stdin" else None

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
        """Run the agent once (attempt ``index``; a repair round's prompt is the last user
        turn of ``messages``, the verifier's feedback) and read what it did from the
        gateway's record of its calls."""
        start = time.monotonic()
        run = AgentRun(messages=[dict(m) for m in messages])
        prompt = self.task.prompt
        if index and messages and isinstance(messages[-1].get("content"), str):
            prompt = str(messages[-1]["content"])
        if self.options.timeout_s is not None:
            deadline = min(deadline, start + self.options.timeout_s)
            timeout_s = min(timeout_s, self.options.timeout_s)
        route = self.route
        route.begin_attempt(index, deadline, on_event)
        if on_phase is not None:
            on_phase(phase if index == 0 else f"{phase}: agent resumed")
        argv = self._argv(index, prompt)
        limit = max(deadline - time.monotonic(), 0.01)
        limits = Limits(
            timeout_s=limit,
            cpu_s=limit,
            memory_mb=self.options.memory_mb,
            processes=self.options.processes,
            output_bytes=self.options.output_bytes,
        )
        endpoint = route.endpoint
        command = argv
        writable: list[Path] = []
        if self.strict_network:
            # no network but the sandbox's own loopback, where the bridge leads to the
            # gateway's Unix socket and nowhere else
            socket_path = self.gateway.unix_socket()
            endpoint = AgentEndpoint(f"http://127.0.0.1:{BRIDGE_PORT}/agent/{route.id}", route.key)
            bridge = str(Path(__file__).with_name("netbridge.py"))
            command = [sys.executable, bridge, socket_path, str(BRIDGE_PORT), "--", *argv]
            writable.append(Path(socket_path).parent)
        try:
            result = self._workspace.run(
                command,
                limits=limits,
                stdin=self._stdin(index, prompt),
                env=self.options.env,
                stand_ins=endpoint.environment(),
                stop=route.stopped,
                network=not self.strict_network,
                read_only=[Path(self.task.path).parent],
                writable=writable,
            )
        except SandboxError as exc:
            run.stop, run.error = "harness_error", f"agent could not start: {exc}"
            run.failure, run.failure_detail = "harness", Failure.of("harness", run.error)
            run.elapsed_s = time.monotonic() - start
            return run
        route.settle()  # a relay still finishing its record (the agent is gone)
        self._read(run, index, argv, result, timeout_s)
        run.elapsed_s = time.monotonic() - start
        return run

    def _read(
        self, run: AgentRun, index: int, argv: list[str], result: CommandResult, timeout_s: float
    ) -> None:
        """Fill ``run`` from the gateway's records of this attempt and the command's end."""
        route = self.route
        records = route.records_of(index)
        calls = len(records)
        run.turns = calls
        run.usages = [r.usage for r in records if r.usage is not None]
        run.guards = [r.guard for r in records if r.guard is not None]
        run.trajectory = [r.entry for r in records]
        answered = [r for r in records if r.ok]
        final = _final_text(answered)
        run.text = result.stdout.strip() if self.options.final_message == "stdout" else final
        run.finish_reason = _finish(answered)
        stop = route.stop_info
        every = route.calls
        if stop is not None:
            stopped_by_route(run, stop, timeout_s, every)
        elif result.killed_by == "timeout":
            timed_out(run, timeout_s, every)
        elif result.exit_code != 0:
            run.stop = "agent_failed"
            if result.exit_code is None:
                run.error = f"agent killed by {result.killed_by or 'a signal'}"
            else:
                run.error = f"agent exited {result.exit_code}"
            last = _last_line(result.stderr)
            if last:
                run.error += f": {last}"
        elif calls == 0:
            run.stop = "agent_failed"
            run.error = "agent made no model call"
        record_failure(run)
        agent: JsonObject = {
            "kind": "command",
            "argv": list(argv),
            "exit_code": result.exit_code,
            "killed_by": result.killed_by,
            "stopped": stop.reason if stop is not None else None,
            "elapsed_s": round(result.elapsed_s, 3),
            "model_calls": calls,
            "stdout": result.stdout,
            "stderr": result.stderr,
            "output_truncated": result.truncated,
            "network": "gateway only" if self.strict_network else "shared with the host",
        }
        reported = reported_usage(result.stdout)
        if reported is not None:
            agent["reported"] = reported
            own = reported.get("usage")
            if isinstance(own, dict):
                agent["usage_disagreement"] = usage_disagreement(own, run.usages)
        run.trajectory.append({"attempt": index + 1, "agent": agent})


def timed_out(run: AgentRun, timeout_s: float, calls: int) -> None:
    run.stop = "timeout"
    run.error = f"agent timed out after {timeout_s:g} s ({calls} model calls)"


def stopped_by_route(run: AgentRun, stop: RouteStop, timeout_s: float, calls: int) -> None:
    """An attempt its route ended: a loop (with the evidence), the deadline, or the
    harness (the circuit breaker, a rate-limit slot never free)."""
    if stop.reason == "loop_killed":
        run.stop, run.killed = "loop_killed", stop.evidence
        run.error = f"agent killed: {stop.message}"
    elif stop.reason == "timeout":
        timed_out(run, timeout_s, calls)
    else:
        run.stop, run.error = "harness_error", f"agent stopped: {stop.message}"


def record_failure(run: AgentRun) -> None:
    """The structured failure of an attempt a loop, the deadline or the harness ended."""
    if run.stop == "loop_killed":
        run.failure = "loop_killed"
        run.failure_detail = Failure.of("loop_killed", run.error or "")
    elif run.stop == "timeout":
        run.failure = "model_timeout"
        run.failure_detail = Failure(
            kind="model_timeout", stage="deadline", message=run.error or ""
        )
    elif run.stop == "harness_error":
        run.failure = "harness"
        run.failure_detail = Failure.of("harness", run.error or "")


def _final_text(records: Sequence[CallRecord]) -> str:
    """The last assistant message the gateway relayed: the last reply without tool calls
    (else the last reply)."""
    for record in reversed(records):
        if record.tool_calls == 0:
            return record.text
    return records[-1].text if records else ""


def _finish(records: Sequence[CallRecord]) -> str | None:
    if not records:
        return None
    response = records[-1].entry.get("response")
    if isinstance(response, dict):
        reason = response.get("finish_reason") or response.get("stop_reason")
        if reason in ("length", "max_tokens"):
            return "length"
    return "stop"


def open_workspace(task: Task, root: Path, isolation: str) -> Workspace:
    """A fresh agent workspace at ``root`` seeded from the task's files."""
    import shutil

    if root.is_symlink() or root.is_file():
        root.unlink()
    elif root.exists():
        shutil.rmtree(root)
    return AgentWorkspace.create(root, task.files, task.files_dir, isolation=isolation)


def open_command_session(
    task: Task,
    root: Path,
    gateway: Gateway,
    clients: ClientFor,
    model_label: str,
    *,
    isolation: str,
    kill_policy: KillPolicy,
) -> CommandSession:
    """A command agent's session for ``task``: a fresh workspace at ``root`` seeded from
    the task's files, and a route on ``gateway`` to the task's model. Raises
    AgentbenchError (SandboxError) when either cannot be had."""
    if task.agent is None or task.agent.kind != "command":
        raise AgentbenchError(f"task {task.id!r} has no command agent")
    options = CommandOptions.parse(task.agent.options)
    workspace = open_workspace(task, root, isolation)
    route = gateway.open_route(task.key, model_label, clients, kill_policy=kill_policy)
    strict = isolation == "strict"
    return CommandSession(task, options, workspace, gateway, route, strict_network=strict)
