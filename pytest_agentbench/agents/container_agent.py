"""An agent under test in its task's container: a ``command`` agent on a task that names an
environment (a Harbor task) runs inside the rollout's container, not on the host.

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
from pytest_agentbench.agents.external import Bridged, record_failure
from pytest_agentbench.agents.gateway import Gateway
from pytest_agentbench.agents.route import ClientFor, Route
from pytest_agentbench.core.jsontypes import JsonObject, JsonValue
from pytest_agentbench.core.stream import EventSink
from pytest_agentbench.environments.container import Container, Mount
from pytest_agentbench.environments.gateway import GatewayBridge
from pytest_agentbench.errors import AgentbenchError, ContainerError
from pytest_agentbench.runner.agent import AgentRun
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


class ContainerCommandSession(CommandSession):
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
        self.container: Container = workspace.container
        self.rollout_dir = rollout_dir
        self.bridge = bridge
        self.mounts = tuple(mounts)
        self.copy_problems: list[str] = []

    def template_values(self) -> dict[str, str]:
        """As on the host, but ``{workspace}`` is the container's folder, ``{python}`` the
        image's ``python3`` and ``{base_url}`` the gateway as seen from inside (through
        the bridge in a container without a network)."""
        values = {**super().template_values(), "python": "python3"}
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
        return run

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

    def close(self) -> list[str]:
        """Close the route, copy the logs out, remove the container."""
        try:
            self.gateway.close_route(self.route)
            environment = self.task.environment
            if environment is not None and environment.logs:
                self.copy_problems = copy_logs_out(self.container, self.rollout_dir)
        finally:
            self.container.remove()
        return []


def open_container_session(
    task: Task,
    root: Path,
    gateway: Gateway,
    clients: ClientFor,
    model_label: str,
    place: EnvironmentPlace,
    *,
    kill_policy: KillPolicy,
) -> ContainerCommandSession:
    """The session of ``task``'s agent under test in the task's container (started here;
    its image built or reused). ``root`` is the host folder the rollout's ``workspace``
    would be: kept empty, the files are the container's. Raises AgentbenchError (a
    ContainerError when the engine fails): an agent kind not run in a container, a
    mount not there, an image that does not build; nothing is left running."""
    from pytest_agentbench.agents import netbridge
    from pytest_agentbench.environments.gateway import gateway_bridge

    agent, environment = task.agent, task.environment
    if agent is None or environment is None:
        raise AgentbenchError(f"task {task.id!r} has no agent under test and environment")
    if agent.kind != "command":
        raise AgentbenchError(
            f"task {task.id!r}: an agent of kind {agent.kind!r} does not run in a task's "
            "container yet (only command agents do: docs/environments.md, Agents under test "
            "in a container)"
        )
    options = CommandOptions.parse(agent.options)
    own = environment.agent_timeout_s
    if own is not None:
        mine = options.process.timeout_s
        process = dataclasses.replace(
            options.process, timeout_s=own if mine is None else min(mine, own)
        )
        options = dataclasses.replace(options, process=process)
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
    container = start_container(task, root.parent, place, every)
    try:
        folder = environment.workdir or _image_workdir(container)
        workspace = ContainerWorkspace.seeded(container, folder, task.files, task.files_dir)
        route = gateway.open_route(task.key, model_label, clients, kill_policy=kill_policy)
    except BaseException:
        container.remove()
        raise
    return ContainerCommandSession(
        task, options, workspace, gateway, route, rollout_dir=root.parent, bridge=bridge,
        mounts=mounts,
    )  # fmt: skip


def _image_workdir(container: Container) -> str:
    """The image's own working folder (its ``WORKDIR``, where a Harbor task's agent
    works and its test.sh runs), as an ``exec`` without one starts in; ``/`` when the
    container cannot say."""
    done = container.exec(["pwd"], timeout_s=60.0)
    found = done.stdout.strip()
    return found if done.exit_code == 0 and found.startswith("/") else "/"
