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

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import field
from pathlib import Path

from pytest_agentbench.agents.acp import CANCEL_GRACE_S, PERMISSION_POLICIES, PromptResult
from pytest_agentbench.agents.acp_process import AcpAgent
from pytest_agentbench.agents.acp_rpc import AcpError
from pytest_agentbench.agents.command import usage_disagreement
from pytest_agentbench.agents.external import (
    Bridged,
    ExternalSession,
    ProcessOptions,
    fill_template,
    final_text,
    last_line,
    open_workspace,
    record_failure,
    stopped_by_route,
    timed_out,
)
from pytest_agentbench.agents.gateway import Gateway
from pytest_agentbench.agents.route import ClientFor, Route
from pytest_agentbench.core.fastclass import dataclass
from pytest_agentbench.core.jsontypes import JsonObject, JsonValue
from pytest_agentbench.core.stream import EventSink
from pytest_agentbench.errors import AgentbenchError, ContainerError, SandboxError
from pytest_agentbench.runner.agent_run import AgentRun
from pytest_agentbench.runner.loopguard import KillPolicy
from pytest_agentbench.sandbox import Workspace
from pytest_agentbench.sandbox.isolation import plan_for
from pytest_agentbench.sandbox.process import sandbox_env
from pytest_agentbench.suites.task import Task

#: ACP events kept in one attempt's trajectory entry (the rest are counted).
EVENTS_KEPT = 500


@dataclass(frozen=True)
class AcpOptions:
    """An ``acp`` agent's options (suite ``agent`` table, checked by the suite schema)."""

    argv: tuple[str, ...]
    permissions: str = "allow"
    process: ProcessOptions = field(default_factory=ProcessOptions)

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
        return cls(argv=argv, permissions=str(permissions), process=ProcessOptions.parse(options))


class AcpSession(ExternalSession):
    """What run_rollout asks of a session (``attempt``, ``close``, ``workspace``,
    ``calls``), for an ACP agent."""

    again = "agent prompted again"

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
        super().__init__(
            task, options.process, workspace, gateway, route, strict_network=strict_network
        )
        self.options = options
        self.agent: AcpAgent | None = None
        self._events_seen = 0

    def _argv(self) -> list[str]:
        return fill_template(self.options.argv, self.template_values())

    def _start(self, deadline: float, on_phase: Callable[[str], None] | None) -> AcpAgent:
        # the process's own wall clock: past the deadline by the cancel grace, so a turn
        # is cancelled (session/cancel) before the group is killed
        limit = max(deadline - time.monotonic(), 0.01) + CANCEL_GRACE_S + 2
        argv = self._argv()
        agent = self.make_agent(argv, self.bridged(argv), limit, deadline)
        self.agent = agent
        self._events_seen = 0
        agent.start(deadline)
        return agent

    def make_agent(
        self, argv: list[str], started: Bridged, limit: float, deadline: float
    ) -> AcpAgent:
        """The agent's process as it will be started: in the task's sandbox, with
        ``limit`` seconds of wall clock (``deadline``: the attempt's bound)."""
        ws = self._workspace
        env = {**sandbox_env(ws.path, self.process.env), **started.endpoint.environment()}
        return AcpAgent(
            started.command,
            workspace=ws.path,
            env=env,
            limits=self.limits(limit),
            plan=plan_for(ws.isolation),
            policy=self.options.permissions,
            network=not self.strict_network,
            read_only=self.visible(argv),
            writable=started.writable,
        )

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
        attempt = self.begin(messages, index, deadline, timeout_s, (on_event, on_phase, phase))
        run, prompt, bound = attempt.run, attempt.prompt, attempt.bound
        if index and self.agent is None:  # a fresh agent (in a container): the task again
            prompt = f"{self.task.prompt}\n\n{prompt}"
        outcome: PromptResult | None = None
        error: str | None = None
        watcher_done = threading.Event()
        try:
            agent = self.agent if self.agent is not None else self._start(bound, on_phase)
            watcher = threading.Thread(
                target=self._watch_route, args=(agent, watcher_done), daemon=True
            )
            watcher.start()
            with self.watching():  # the deadline as it stands stops the route
                outcome = agent.prompt(prompt, bound)
        except (SandboxError, ContainerError) as exc:
            return self.could_not_start(attempt, exc)
        except AcpError as exc:
            error = str(exc)
        finally:
            watcher_done.set()
        self._read(run, index, outcome, error, attempt.timeout_s)
        run.elapsed_s = time.monotonic() - attempt.started
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
        answered = self.read_calls(run, index)
        calls = run.turns
        run.text = (
            outcome.text.strip() if outcome and outcome.text.strip() else final_text(answered)
        )
        agent = self.agent
        command = agent.command if agent is not None else None
        stderr = command.stderr_text() if command is not None else ""
        code = command.exit_code() if command is not None else None
        exited = code is not None
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
            elif killed == "output":
                run.stop, run.error = "agent_failed", self.flooded()
            else:
                run.stop = "agent_failed"
                run.error = f"agent exited {code}" if code is not None else "agent failed"
                run.error += f": {last_line(stderr) or error}"
        elif outcome.stop_reason not in ("end_turn", "max_tokens", "max_turn_requests"):
            run.stop = "agent_failed"
            run.error = f"agent ended its turn: {outcome.stop_reason}"
        elif not calls:
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
            "model_calls": calls,
            **({"waited_s": round(run.waited_s, 3)} if run.waited_s >= 0.0005 else {}),
            "events": [dict(event) for event in events[:EVENTS_KEPT]],
            "events_left_out": max(0, len(events) - EVENTS_KEPT),
            "stderr": stderr,
            "exited": exited,
            "network": self.network_note(),
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
        return super().close()


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
