"""An agent under test in its task's container: a ``command`` agent (or an ``acp`` one:
agents/container_acp.py) on a task that names an environment (a Harbor task) runs inside
the rollout's container, not on the host.

The agent is not installed in the image: the host's installation is mounted read-only at
the same paths (the agent table's ``mounts``: e.g. the npm prefix Claude Code and Codex
live under, and ``/usr/bin/node``), so the command line reads the same inside and out.
It reaches the run's gateway from inside: with the container on the host's network
(``allow_internet`` true) directly at ``127.0.0.1``; without a network only through the
gateway bridge (environments/gateway.py: the gateway's Unix socket mounted, the relay
started in front of the agent). Either way each call is its task's route's: attributed
to the task, holding the task's stand-in key only, watched for loops.

The attempt runs through ``Container.exec``: the deadline (the task's, the agent
table's ``timeout_s`` and ``[agent] timeout_sec``, the earliest) and a loop kill end
every process of the exec inside the container; then every process the attempt left
behind in the container is ended too (one that shed the exec's mark, a daemon it
forked), so nothing of the agent runs on into the verification or writes after its
deadline. ``close`` copies the logs out and removes the container.
"""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from pytest_agentbench.agents.command import CommandOptions, CommandSession
from pytest_agentbench.agents.endpoint import AgentEndpoint
from pytest_agentbench.agents.external import (
    Bridged,
    ProcessOptions,
    record_failure,
)
from pytest_agentbench.agents.gateway import Gateway
from pytest_agentbench.agents.route import ClientFor, Route
from pytest_agentbench.core.fastclass import dataclass
from pytest_agentbench.core.jsontypes import JsonObject, JsonValue
from pytest_agentbench.core.stream import EventSink
from pytest_agentbench.environments.container import Container, Mount
from pytest_agentbench.environments.gateway import GatewayBridge
from pytest_agentbench.errors import AgentbenchError, ContainerError
from pytest_agentbench.runner.agent_run import AgentRun
from pytest_agentbench.runner.container_session import (
    EnvironmentPlace,
    copy_logs_out,
    start_container,
)
from pytest_agentbench.runner.loopguard import KillPolicy
from pytest_agentbench.sandbox.container_workspace import ContainerWorkspace
from pytest_agentbench.suites.task import Task

#: What of the agent table the container cannot apply: the sandbox's per-process limits
#: (the container's own ``cpus`` / ``memory_mb`` bound the agent instead).
NOT_APPLIED = (
    "the agent table's memory_mb and processes (per-process limits of the host sandbox) "
    "are not applied in a container: the container's cpus and memory_mb bound the agent"
)


def agent_mounts(task: Task) -> tuple[Mount, ...]:
    """The agent table's ``mounts``: host paths (``~`` expanded) mounted read-only at the
    same paths in the container. Raises AgentbenchError naming the task and the path for
    one that is not a list of strings, not absolute or not there."""
    agent = task.agent
    raw = agent.options.get("mounts", []) if agent is not None else []
    where = f"task {task.id!r}: the agent's mounts"
    if not isinstance(raw, list) or not all(isinstance(item, str) for item in raw):
        raise AgentbenchError(f"{where} must be a list of host paths; got {raw!r}")
    found = []
    for item in raw:
        path = Path(str(item)).expanduser()
        if not path.is_absolute():
            raise AgentbenchError(f"{where}: {item!r} is not an absolute path")
        if not path.exists():
            raise AgentbenchError(
                f"{where}: {item!r} does not exist on this machine (install the agent, "
                "or correct the path)"
            )
        found.append(Mount(path, str(path), read_only=True))
    return tuple(found)


class InContainer:
    """What an agent's session in its task's container adds to its kind's (a command's,
    an ACP agent's): the gateway as seen from inside, the end of every process with the
    attempt, the record of where the agent ran, the logs copied out at the close."""

    task: Task
    route: Route
    gateway: Gateway
    process: ProcessOptions
    container: Container
    rollout_dir: Path
    bridge: GatewayBridge | None
    mounts: tuple[Mount, ...]
    copy_problems: list[str]

    def inside_values(self, values: dict[str, str]) -> dict[str, str]:
        """The host's template ``values`` as the container sees them: ``{python}`` is the
        image's ``python3`` and ``{base_url}`` the gateway from inside (through the bridge
        in a container without a network); ``{workspace}`` is the container's folder."""
        values = {**values, "python": "python3"}
        if self.bridge is not None:
            values["base_url"] = self.bridge.base_url(f"/agent/{self.route.id}")
        return values

    def bridged(self, command: list[str]) -> Bridged:
        """``command`` as started in the container: with the host's network, as given
        (the gateway at 127.0.0.1); without one, behind the bridge to its socket."""
        route = self.route
        if self.bridge is None:
            return Bridged(route.endpoint, command, [])
        endpoint = AgentEndpoint(self.bridge.base_url(f"/agent/{route.id}"), route.key)
        return Bridged(endpoint, self.bridge.argv(command), [])

    def network_note(self) -> str:
        if self.bridge is None:
            return "the container's: the host's network (the gateway at 127.0.0.1)"
        return "the container's: none; the gateway only, through the bridge to its socket"

    def settle(self, run: AgentRun, timeout_s: float) -> None:
        """After an attempt: a timeout that was ``[agent] timeout_sec``'s says so, every
        process left in the container is ended (past its deadline, after a loop kill, a
        daemon it left), and the trajectory says where the agent ran."""
        own = self.task.environment.agent_timeout_s if self.task.environment else None
        agents_own = own is not None and own <= timeout_s and self.process.timeout_s == own
        if run.stop == "timeout" and run.error and agents_own:
            run.error += " ([agent] timeout_sec)"
            record_failure(run)
        try:
            self.container.kill_processes()
        except ContainerError as exc:
            run.stop, run.error = "harness_error", f"cannot end the agent's processes: {exc}"
            record_failure(run)
        for entry in run.trajectory:
            agent = entry.get("agent")
            if isinstance(agent, dict):
                agent["container"] = self.record()

    def record(self) -> JsonObject:
        """Where the agent ran, for its trajectory entry: the engine, the image, the
        network, what was mounted and what the engine could not enforce."""
        spec = self.container.spec
        return {
            "engine": self.container.engine.name,
            "remote": self.container.engine.remote,
            "name": self.container.name,
            "image": spec.image,
            "network": "none (gateway bridge)" if self.bridge is not None else spec.network,
            "mounts": [m.target for m in self.mounts],
            "not_enforced": [*self.container.notes, NOT_APPLIED],
        }

    def close_container(self) -> list[str]:
        """Close the route, copy the logs out, remove the container."""
        try:
            self.gateway.close_route(self.route)
            environment = self.task.environment
            if environment is not None and environment.logs:
                self.copy_problems = copy_logs_out(self.container, self.rollout_dir)
        finally:
            self.container.remove()
        return []


class ContainerCommandSession(InContainer, CommandSession):
    """A command agent's session whose every attempt runs in the rollout's ``container``
    (its workspace is the container's workdir). ``bridge`` is the way to the gateway of a
    container without a network (None: the container shares the host's)."""

    def __init__(
        self,
        task: Task,
        options: CommandOptions,
        workspace: ContainerWorkspace,
        gateway: Gateway,
        route: Route,
        *,
        rollout_dir: Path,
        bridge: GatewayBridge | None,
        mounts: Sequence[Mount],
    ) -> None:
        super().__init__(task, options, workspace, gateway, route, strict_network=False)
        self.container = workspace.container
        self.rollout_dir = rollout_dir
        self.bridge = bridge
        self.mounts = tuple(mounts)
        self.copy_problems = []

    def template_values(self) -> dict[str, str]:
        return self.inside_values(super().template_values())

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
        """The attempt in the container; whatever of the agent still runs there after it
        (past its deadline, after a loop kill, a daemon it left) is ended before the
        attempt returns."""
        run = super().attempt(
            messages, index=index, deadline=deadline, timeout_s=timeout_s,
            on_event=on_event, on_phase=on_phase, phase=phase,
        )  # fmt: skip
        self.settle(run, timeout_s)
        return run

    def close(self) -> list[str]:
        return self.close_container()


@dataclass(frozen=True)
class ContainerPlace:
    """What an agent's session in its container is opened with: the started container,
    its workspace (the task's files seeded), the task's route on the gateway, the bridge
    to it (None on the host's network) and the agent's mounts."""

    workspace: ContainerWorkspace
    route: Route
    bridge: GatewayBridge | None
    mounts: tuple[Mount, ...]
    rollout_dir: Path


def own_timeout(process: ProcessOptions, task: Task) -> ProcessOptions:
    """The agent's process options with ``[agent] timeout_sec`` applied (the earliest)."""
    own = task.environment.agent_timeout_s if task.environment is not None else None
    if own is None:
        return process
    mine = process.timeout_s
    return dataclasses.replace(process, timeout_s=own if mine is None else min(mine, own))


def start_in_container(
    task: Task,
    root: Path,
    gateway: Gateway,
    clients: ClientFor,
    model_label: str,
    place: EnvironmentPlace,
    kill_policy: KillPolicy,
) -> ContainerPlace:
    """The container of ``task``'s agent started (its mounts and bridge in place), its
    workspace seeded, its route opened; nothing is left running when it fails."""
    from pytest_agentbench.agents import netbridge
    from pytest_agentbench.environments.gateway import gateway_bridge

    environment = task.environment
    if environment is None:
        raise AgentbenchError(f"task {task.id!r} names no environment")
    mounts = agent_mounts(task)
    bridge = None
    if not environment.allow_internet:
        bridge = gateway_bridge(gateway.unix_socket(), Path(netbridge.__file__))
    if root.is_symlink() or root.is_file():
        root.unlink()
    elif root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    every = (*mounts, *(bridge.mounts if bridge is not None else ()))
    install = task.agent.options.get("install") if task.agent is not None else None
    container = start_container(
        task, root.parent, place, every, install if isinstance(install, str) else None
    )
    try:
        folder = environment.workdir or _image_workdir(container)
        workspace = ContainerWorkspace.seeded(container, folder, task.files, task.files_dir)
        route = gateway.open_route(task.key, model_label, clients, kill_policy=kill_policy)
    except BaseException:
        container.remove()
        raise
    return ContainerPlace(workspace, route, bridge, mounts, root.parent)


def _image_workdir(container: Container) -> str:
    """The image's own working folder (its ``WORKDIR``, where a Harbor task's agent
    works and its test.sh runs), as an ``exec`` without one starts in; ``/`` when the
    container cannot say."""
    done = container.exec(["pwd"], timeout_s=60.0)
    found = done.stdout.strip()
    return found if done.exit_code == 0 and found.startswith("/") else "/"
