"""What every agent under test run as a process shares (the ``command``, ``python`` and
``acp`` kinds): its session's parts (the task, its options, the workspace, the gateway
and the task's route on it), the attempt's start (the prompt, the deadline, the
sandbox's limits, the bridge of a strict sandbox), and reading an attempt's end from the
gateway's record of its model calls.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from pytest_agentbench.agents.endpoint import AgentEndpoint
from pytest_agentbench.agents.gateway import Gateway
from pytest_agentbench.agents.route import CallRecord, Route, RouteStop
from pytest_agentbench.core.fastclass import dataclass
from pytest_agentbench.core.jsontypes import JsonObject, JsonValue
from pytest_agentbench.core.records import Failure
from pytest_agentbench.core.stream import EventSink
from pytest_agentbench.errors import AgentbenchError
from pytest_agentbench.models.queue import wait_limit_s
from pytest_agentbench.runner.agent_run import AgentRun
from pytest_agentbench.sandbox import KEEP_BYTES, Limits, Workspace
from pytest_agentbench.sandbox.process import RUNAWAY_FACTOR
from pytest_agentbench.suites.task import Task

#: The port of the gateway bridge on a strict sandbox's own loopback (agents/netbridge.py).
BRIDGE_PORT = 41000
#: What is kept of the agent's stdout and of its stderr (each), by default.
OUTPUT_BYTES = 65536
#: No address-space limit by default (JavaScript runtimes reserve far more than they use).
MEMORY_MB = 1 << 20
PROCESSES = 512


@dataclass(frozen=True)
class ProcessOptions:
    """The options every agent process has (suite ``agent`` table): its environment, its
    own time limit and the sandbox's limits."""

    env: Mapping[str, str] | None = None
    timeout_s: float | None = None
    output_bytes: int = OUTPUT_BYTES
    memory_mb: int = MEMORY_MB
    processes: int = PROCESSES

    @classmethod
    def parse(cls, options: Mapping[str, JsonValue]) -> ProcessOptions:
        env = options.get("env")
        timeout = options.get("timeout_s")
        output, memory, processes = (
            options.get(k) for k in ("output_bytes", "memory_mb", "processes")
        )
        return cls(
            env={str(k): str(v) for k, v in env.items()} if isinstance(env, dict) else None,
            timeout_s=float(timeout) if isinstance(timeout, int | float) else None,
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


def installation(executable: str) -> list[Path]:
    """The folders an agent's executable needs to run, to be kept visible read-only in
    the sandbox (whose private ``/tmp`` would hide an agent installed with ``npm install
    --prefix "$(mktemp -d)"``): for the path as named and as resolved (a
    ``node_modules/.bin`` link leads into its package), the folder holding
    ``node_modules`` (the npm prefix, every dependency with it), else the prefix of a
    ``bin`` folder (a virtualenv, ``make install``), else the executable's own folder —
    or the file alone where that folder would be ``/tmp`` or ``/`` itself. A bare name is
    looked up on ``PATH``; [] when it is not found."""
    named = executable if os.sep in executable else shutil.which(executable)
    if named is None:
        return []
    found: list[Path] = []
    for path in dict.fromkeys((os.path.abspath(named), os.path.realpath(named))):
        parts = Path(path).parts
        if "node_modules" in parts:
            root = Path(*parts[: parts.index("node_modules")])
        elif Path(path).parent.name == "bin":
            root = Path(path).parent.parent
        else:
            root = Path(path).parent
        if str(root) in ("/", "/tmp"):
            root = Path(path)
        if root not in found:
            found.append(root)
    return found


def last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:200] if lines else ""


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
        if not found.get("network"):  # the sandbox's own words say "no network": not so here
            detail = str(found.get("detail", "")).replace("no network, ", "", 1)
            note = "the agent under test shares the host's network to reach its gateway"
            found = {**found, "network": True, "detail": f"{detail}; {note}"}
        return found


def open_workspace(task: Task, root: Path, isolation: str) -> Workspace:
    """A fresh agent workspace at ``root`` seeded from the task's files."""
    if root.is_symlink() or root.is_file():
        root.unlink()
    elif root.exists():
        shutil.rmtree(root)
    return AgentWorkspace.create(root, task.files, task.files_dir, isolation=isolation)


@dataclass
class Attempt:
    """An attempt as it starts: its record so far, its prompt and its bounds (the
    agent's own ``timeout_s`` applied)."""

    run: AgentRun
    prompt: str
    started: float
    deadline: float
    timeout_s: float
    #: The hard bound of the agent's process: the deadline may move on by the time its
    #: calls wait in a one-at-a-time server's queue, at most by the queue's own bound
    #: (models/queue.wait_limit_s); the route stops the agent at the deadline as it
    #: stands (``Route.watch_deadline``, run by ``watching``).
    bound: float = float("inf")


@dataclass(frozen=True)
class Bridged:
    """How the agent's process is started: the endpoint it is given, the command line
    (behind the bridge in a strict sandbox) and the folders it may write besides its
    workspace."""

    endpoint: AgentEndpoint
    command: list[str]
    writable: list[Path]


class ExternalSession:
    """What run_rollout asks of a session (``attempt``, ``close``, ``workspace``,
    ``calls``): the parts a command agent's and an ACP agent's share."""

    #: What a repair round's phase says the agent does.
    again = "agent resumed"

    def __init__(
        self,
        task: Task,
        process: ProcessOptions,
        workspace: Workspace,
        gateway: Gateway,
        route: Route,
        *,
        strict_network: bool = False,
    ) -> None:
        self.task = task
        self.process = process
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

    def template_values(self) -> dict[str, str]:
        """The ``{name}`` placeholders of the agent's command line."""
        return {
            "workspace": str(self._workspace.path),
            "python": sys.executable,
            "suite_dir": str(Path(self.task.path).parent),
            "task_id": self.task.id,
            "base_url": self.route.endpoint.base_url,
        }

    def begin(
        self,
        messages: Sequence[Mapping[str, JsonValue]],
        index: int,
        deadline: float,
        timeout_s: float,
        events: tuple[EventSink | None, Callable[[str], None] | None, str],
    ) -> Attempt:
        """Attempt ``index`` starts: its prompt is the task's, or in a repair round the
        last user turn of ``messages`` (the verifier's feedback); the route records its
        calls under ``index`` from now on. ``events``: the stream's sink, the phase
        callback and the phase a repair round shows (``"{phase}: agent resumed"``)."""
        started = time.monotonic()
        run = AgentRun(messages=[dict(m) for m in messages])
        prompt = self.task.prompt
        if index and messages and isinstance(messages[-1].get("content"), str):
            prompt = str(messages[-1]["content"])
        if self.process.timeout_s is not None:
            deadline = min(deadline, started + self.process.timeout_s)
            timeout_s = min(timeout_s, self.process.timeout_s)
        on_event, on_phase, phase = events
        self.route.begin_attempt(index, deadline, on_event)
        if on_phase is not None:
            on_phase(phase if index == 0 else f"{phase}: {self.again}")
        bound = deadline + wait_limit_s(max(deadline - started, 0.0))
        return Attempt(run, prompt, started, deadline, timeout_s, bound)

    @contextlib.contextmanager
    def watching(self) -> Iterator[None]:
        """While the agent runs, its route stops it at the deadline as it stands
        (``Route.watch_deadline``)."""
        done = threading.Event()
        watcher = threading.Thread(
            target=self.route.watch_deadline, args=(done,), name="agentbench-agent-deadline"
        )
        watcher.daemon = True
        watcher.start()
        try:
            yield
        finally:
            done.set()

    def limits(self, seconds: float) -> Limits:
        """The sandbox's limits of a process that may run ``seconds``."""
        return Limits(
            timeout_s=seconds,
            cpu_s=seconds,
            memory_mb=self.process.memory_mb,
            processes=self.process.processes,
            output_bytes=self.process.output_bytes,
        )

    def visible(self, command: Sequence[str]) -> list[Path]:
        """What the agent's process sees read-only besides the host's usual folders: the
        suite's folder (its program may live there) and its executable's installation."""
        return [Path(self.task.path).parent, *(installation(command[0]) if command else [])]

    def flooded(self) -> str:
        """What ends an attempt whose agent the sandbox killed for flooding its output."""
        return (
            f"agent killed for flooding its output: more than "
            f"{self.limits(1).runaway_bytes} bytes on stdout or on stderr "
            f"({RUNAWAY_FACTOR} × output_bytes)"
        )

    def bridged(self, command: list[str]) -> Bridged:
        """``command`` as started: in a strict sandbox, with no network but its own
        loopback, behind the bridge to the gateway's Unix socket (and nowhere else)."""
        route = self.route
        if not self.strict_network:
            return Bridged(route.endpoint, command, [])
        socket_path = self.gateway.unix_socket()
        endpoint = AgentEndpoint(f"http://127.0.0.1:{BRIDGE_PORT}/agent/{route.id}", route.key)
        bridge = str(Path(__file__).with_name("netbridge.py"))
        argv = [sys.executable, bridge, socket_path, str(BRIDGE_PORT), "--", *command]
        return Bridged(endpoint, argv, [Path(socket_path).parent])

    @staticmethod
    def could_not_start(attempt: Attempt, exc: AgentbenchError) -> AgentRun:
        """The attempt of an agent the sandbox could not start: a harness error."""
        run = attempt.run
        run.stop, run.error = "harness_error", f"agent could not start: {exc}"
        run.failure, run.failure_detail = "harness", Failure.of("harness", run.error)
        run.elapsed_s = time.monotonic() - attempt.started
        return run

    def read_calls(self, run: AgentRun, index: int) -> list[CallRecord]:
        """Fill ``run`` from the gateway's records of attempt ``index`` (turns, usages,
        guards, trajectory, finish reason); returns the answered calls."""
        records = self.route.records_of(index)
        run.turns = len(records)
        run.waited_s = sum(r.waited_s for r in records)  # credited: the task's deadline moves
        run.usages = [r.usage for r in records if r.usage is not None]
        run.guards = [r.guard for r in records if r.guard is not None]
        run.trajectory = [r.entry for r in records]
        answered = [r for r in records if r.ok]
        run.finish_reason = finish_of(answered)
        return answered

    def network_note(self) -> str:
        return "gateway only" if self.strict_network else "shared with the host"


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
    if stop.failure is not None:  # a context overflow: its own kind, the call's status
        run.failure = stop.failure.kind
        run.failure_detail = replace(stop.failure, message=run.error or stop.message)


def record_failure(run: AgentRun) -> None:
    """The structured failure of an attempt a loop, the deadline or the harness ended
    (kept when the route's stop gave one)."""
    if run.failure_detail is not None:
        return
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


def final_text(records: Sequence[CallRecord]) -> str:
    """The last assistant message the gateway relayed: the last reply without tool calls
    (else the last reply)."""
    for record in reversed(records):
        if record.tool_calls == 0:
            return record.text
    return records[-1].text if records else ""


def finish_of(records: Sequence[CallRecord]) -> str | None:
    if not records:
        return None
    response = records[-1].entry.get("response")
    if isinstance(response, dict):
        reason = response.get("finish_reason") or response.get("stop_reason")
        if reason in ("length", "max_tokens"):
            return "length"
    return "stop"
