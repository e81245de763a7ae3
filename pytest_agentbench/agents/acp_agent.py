"""The ``acp`` agent: an Agent Client Protocol agent under test (agents/acp.py speaks the
protocol), run in the task's sandbox and reaching its model through the run's gateway.

The agent process lives for the whole rollout: the first attempt starts it, opens a
session in the workspace and sends the task's prompt; a repair round sends the verifier's
feedback as a second ``session/prompt`` in the same session. The attempt's record is the
gateway's record of the model calls (as for a command agent) plus the ACP events the
agent sent (messages, tool calls, plans, permissions, file requests). A loop in the
model's stream, the breaker or the deadline stop the route: the turn is cancelled
(``session/cancel``), and after a short grace the agent's process group is killed.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from pytest_agentbench.agents.acp import (
    CANCEL_GRACE_S,
    PERMISSION_POLICIES,
    AcpAgent,
    AcpError,
    PromptResult,
)
from pytest_agentbench.agents.command import (
    BRIDGE_PORT,
    MEMORY_MB,
    OUTPUT_BYTES,
    PROCESSES,
    _final_text,
    _finish,
    _last_line,
    fill_template,
    open_workspace,
    record_failure,
    stopped_by_route,
    timed_out,
    usage_disagreement,
)
from pytest_agentbench.agents.endpoint import AgentEndpoint
from pytest_agentbench.agents.gateway import Gateway
from pytest_agentbench.agents.route import ClientFor, Route
from pytest_agentbench.core.jsontypes import JsonObject, JsonValue
from pytest_agentbench.core.records import Failure
from pytest_agentbench.core.stream import EventSink
from pytest_agentbench.errors import AgentbenchError, SandboxError
from pytest_agentbench.runner.agent import AgentRun
from pytest_agentbench.runner.loopguard import KillPolicy
from pytest_agentbench.sandbox import KEEP_BYTES, Limits, Workspace
from pytest_agentbench.sandbox.isolation import plan_for
from pytest_agentbench.sandbox.process import sandbox_env
from pytest_agentbench.suites.task import Task

#: ACP events kept in one attempt's trajectory entry (the rest are counted).
EVENTS_KEPT = 500


@dataclass(frozen=True)
class AcpOptions:
    """An ``acp`` agent's options (suite ``agent`` table, checked by the suite schema)."""

    argv: tuple[str, ...]
    env: Mapping[str, str] | None = None
    permissions: str = "allow"
    timeout_s: float | None = None
    output_bytes: int = OUTPUT_BYTES
    memory_mb: int = MEMORY_MB
    processes: int = PROCESSES

    @classmethod
    def parse(cls, options: Mapping[str, JsonValue]) -> AcpOptions:
        raw = options.get("argv")
        argv = tuple(str(v) for v in raw) if isinstance(raw, list) else ()
        if not argv:
            raise AgentbenchError("an acp agent needs argv, a non-empty list of strings")
        permissions = options.get("permissions", "allow")
        if permissions not in PERMISSION_POLICIES:
            raise AgentbenchError(
                f"acp agent permissions must be one of {', '.join(PERMISSION_POLICIES)}; "
                f"got {permissions!r}"
            )
        env = options.get("env")
        timeout = options.get("timeout_s")
        output, memory, processes = (
            options.get(k) for k in ("output_bytes", "memory_mb", "processes")
        )
        return cls(
            argv=argv,
            env={str(k): str(v) for k, v in env.items()} if isinstance(env, dict) else None,
            permissions=str(permissions),
            timeout_s=float(timeout) if isinstance(timeout, int | float) else None,
            output_bytes=output if isinstance(output, int) else OUTPUT_BYTES,
            memory_mb=memory if isinstance(memory, int) else MEMORY_MB,
            processes=processes if isinstance(processes, int) else PROCESSES,
        )


class AcpSession:
    """What run_rollout asks of a session (``attempt``, ``close``, ``workspace``,
    ``calls``), for an ACP agent."""

    def __init__(
        self,
        task: Task,
        options: AcpOptions,
        workspace: Workspace,
        gateway: Gateway,
        route: Route,
        *,
        strict_network: bool = False,
    ) -> None:
        self.task = task
        self.strict_network = strict_network
        self.options = options
        self.workspace: Workspace | None = workspace
        self._workspace = workspace
        self.gateway = gateway
        self.route = route
        self.agent: AcpAgent | None = None
        self._events_seen = 0

    @property
    def calls(self) -> int:
        return self.route.calls

    def _argv(self) -> list[str]:
        values = {
            "workspace": str(self._workspace.path),
            "python": sys.executable,
            "suite_dir": str(Path(self.task.path).parent),
            "task_id": self.task.id,
            "base_url": self.route.endpoint.base_url,
        }
        return fill_template(self.options.argv, values)

    def _start(self, deadline: float, on_phase: Callable[[str], None] | None) -> AcpAgent:
        # the process's own wall clock: past the deadline by the cancel grace, so a turn
        # is cancelled (session/cancel) before the group is killed
        limit = max(deadline - time.monotonic(), 0.01) + CANCEL_GRACE_S + 2
        limits = Limits(
            timeout_s=limit,
            cpu_s=limit,
            memory_mb=self.options.memory_mb,
            processes=self.options.processes,
            output_bytes=self.options.output_bytes,
        )
        ws = self._workspace
        route = self.route
        endpoint = route.endpoint
        command = self._argv()
        writable: list[Path] = []
        if self.strict_network:  # the bridge to the gateway's Unix socket, as for commands
            socket_path = self.gateway.unix_socket()
            endpoint = AgentEndpoint(f"http://127.0.0.1:{BRIDGE_PORT}/agent/{route.id}", route.key)
            bridge = str(Path(__file__).with_name("netbridge.py"))
            command = [sys.executable, bridge, socket_path, str(BRIDGE_PORT), "--", *command]
            writable.append(Path(socket_path).parent)
        env = {**sandbox_env(ws.path, self.options.env), **endpoint.environment()}
        agent = AcpAgent(
            command,
            workspace=ws.path,
            env=env,
            limits=limits,
            plan=plan_for(ws.isolation),
            policy=self.options.permissions,
            network=not self.strict_network,
            read_only=[Path(self.task.path).parent],
            writable=writable,
        )
        self.agent = agent
        agent.start(deadline)
        return agent

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
        """One prompt turn: the task's prompt first, the verifier's feedback after."""
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
            on_phase(phase if index == 0 else f"{phase}: agent prompted again")
        outcome: PromptResult | None = None
        error: str | None = None
        watcher_done = threading.Event()
        try:
            agent = self.agent if self.agent is not None else self._start(deadline, on_phase)
            watcher = threading.Thread(
                target=self._watch_route, args=(agent, watcher_done), daemon=True
            )
            watcher.start()
            outcome = agent.prompt(prompt, deadline)
        except SandboxError as exc:
            run.stop, run.error = "harness_error", f"agent could not start: {exc}"
            run.failure, run.failure_detail = "harness", Failure.of("harness", run.error)
            run.elapsed_s = time.monotonic() - start
            return run
        except AcpError as exc:
            error = str(exc)
        finally:
            watcher_done.set()
        self._read(run, index, outcome, error, timeout_s)
        run.elapsed_s = time.monotonic() - start
        return run

    def _watch_route(self, agent: AcpAgent, done: threading.Event) -> None:
        """While a turn runs: when the route stops (a loop, the breaker, the deadline),
        cancel the turn and end the agent's process group."""
        while not done.is_set():
            if self.route.stopped.wait(0.05):
                reason = self.route.stop_info.reason if self.route.stop_info else "stopped"
                agent.stop("timeout" if reason == "timeout" else "stopped", grace_s=1.0)
                return

    def _read(
        self,
        run: AgentRun,
        index: int,
        outcome: PromptResult | None,
        error: str | None,
        timeout_s: float,
    ) -> None:
        route = self.route
        records = route.records_of(index)
        run.turns = len(records)
        run.usages = [r.usage for r in records if r.usage is not None]
        run.guards = [r.guard for r in records if r.guard is not None]
        run.trajectory = [r.entry for r in records]
        answered = [r for r in records if r.ok]
        run.text = (
            outcome.text.strip() if outcome and outcome.text.strip() else _final_text(answered)
        )
        run.finish_reason = _finish(answered)
        agent = self.agent
        command = agent.command if agent is not None else None
        stderr = command.err.text() if command is not None else ""
        exited = command is not None and command.proc.poll() is not None
        stop = route.stop_info
        every = route.calls
        if stop is not None:
            stopped_by_route(run, stop, timeout_s, every)
        elif outcome is not None and outcome.timed_out:
            timed_out(run, timeout_s, every)
        elif outcome is None:
            killed = command.reason if command is not None else None
            if killed == "timeout" or (error is not None and "before the deadline" in error):
                timed_out(run, timeout_s, every)
            else:
                run.stop = "agent_failed"
                code = command.proc.returncode if exited and command is not None else None
                run.error = f"agent exited {code}" if code is not None else "agent failed"
                run.error += f": {_last_line(stderr) or error}"
        elif outcome.stop_reason not in ("end_turn", "max_tokens", "max_turn_requests"):
            run.stop = "agent_failed"
            run.error = f"agent ended its turn: {outcome.stop_reason}"
        elif not records:
            run.stop = "agent_failed"
            run.error = "agent made no model call"
        record_failure(run)
        client = agent.client if agent is not None else None
        events = client.events[self._events_seen :] if client is not None else []
        self._events_seen += len(events)
        argv: list[JsonValue] = list(agent.argv if agent is not None else self._argv())
        entry: JsonObject = {
            "kind": "acp",
            "argv": argv,
            "agent_info": dict(client.agent_info) if client is not None else {},
            "session_id": client.session_id if client is not None else None,
            "stop_reason": outcome.stop_reason if outcome is not None else None,
            "error": error,
            "stopped": stop.reason if stop is not None else None,
            "model_calls": len(records),
            "events": [dict(event) for event in events[:EVENTS_KEPT]],
            "events_left_out": max(0, len(events) - EVENTS_KEPT),
            "stderr": stderr,
            "exited": exited,
            "network": "gateway only" if self.strict_network else "shared with the host",
        }
        if outcome is not None and outcome.agent_usage is not None:
            entry["reported"] = {"usage": outcome.agent_usage}
            entry["usage_disagreement"] = usage_disagreement(
                _acp_usage(outcome.agent_usage), run.usages
            )
        run.trajectory.append({"attempt": index + 1, "agent": entry})

    def close(self) -> list[str]:
        if self.agent is not None and self.agent.command is not None:
            self.agent.stop()
        self.gateway.close_route(self.route)
        return self._workspace.prune(KEEP_BYTES)


def _acp_usage(usage: Mapping[str, JsonValue]) -> JsonObject:
    """An ACP prompt's own usage (``inputTokens``, ``outputTokens``, ``cachedReadTokens``,
    ``cachedWriteTokens``) in Anthropic's shape, which usage_disagreement reads: ACP's
    input count is the whole prompt, so the cached parts come off it."""
    whole = usage.get("inputTokens")
    read = usage.get("cachedReadTokens")
    write = usage.get("cachedWriteTokens")
    found: JsonObject = {}
    if isinstance(whole, int):
        cached = sum(v for v in (read, write) if isinstance(v, int))
        found["input_tokens"] = max(0, whole - cached)
    if isinstance(read, int):
        found["cache_read_input_tokens"] = read
    if isinstance(write, int):
        found["cache_creation_input_tokens"] = write
    output = usage.get("outputTokens")
    if isinstance(output, int):
        found["output_tokens"] = output
    return found


def open_acp_session(
    task: Task,
    root: Path,
    gateway: Gateway,
    clients: ClientFor,
    model_label: str,
    *,
    isolation: str,
    kill_policy: KillPolicy,
) -> AcpSession:
    """An ACP agent's session for ``task`` (see open_command_session)."""
    if task.agent is None or task.agent.kind != "acp":
        raise AgentbenchError(f"task {task.id!r} has no acp agent")
    options = AcpOptions.parse(task.agent.options)
    workspace = open_workspace(task, root, isolation)
    route = gateway.open_route(task.key, model_label, clients, kill_policy=kill_policy)
    strict = isolation == "strict"
    return AcpSession(task, options, workspace, gateway, route, strict_network=strict)
