"""A rollout in its container: the image made (or reused), one container started for the
rollout, the built-in agent loop's tools run inside it, and the container removed when
the rollout ends.

The container's log folders (``/logs/agent``, ``/logs/verifier``, ``/logs/artifacts``,
for a Harbor task) live inside it and are copied out when the rollout ends, links as
links: the host folder is never mounted where the agent could plant a link for the
harness to follow. A build failure or timeout is a harness error naming the task, the
step and the build log's last lines, never the agent's failure.
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import field
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_agentbench.core.fastclass import dataclass
from pytest_agentbench.core.jsontypes import JsonValue
from pytest_agentbench.errors import ContainerError, ImageBuildError
from pytest_agentbench.runner.agent import AgentSession
from pytest_agentbench.runner.agent_run import AgentRun
from pytest_agentbench.suites.task import Task

if TYPE_CHECKING:
    from pytest_agentbench.core.stream import EventSink
    from pytest_agentbench.environments.container import Container, Mount
    from pytest_agentbench.environments.engine import Engine
    from pytest_agentbench.models.base import ModelClient
    from pytest_agentbench.runner.loopguard import KillPolicy
    from pytest_agentbench.runner.tools import Tool
    from pytest_agentbench.sandbox.container_workspace import ContainerWorkspace

#: Harbor's log folders, made in the container before the agent starts.
LOG_DIRS = ("/logs/agent", "/logs/verifier", "/logs/artifacts")
#: Where each log folder is copied out to, in the rollout's folder (``verifier`` is the
#: verifier's own work: verifiers/harbor.py).
COPIED_OUT = {"/logs/agent": "agent", "/logs/artifacts": "artifacts"}
SOLUTION_TARGET = "/solution"
_SETUP_S = 120.0


@dataclass(frozen=True)
class EnvironmentPlace:
    """Where a run's containers come from: the engine asked for (None: whichever is
    installed), the image map (``FROM`` name → local image), the image cache folder, the
    run id its containers are labelled with and the xdist worker (``main`` without)."""

    engine: str | None
    run_id: str
    cache_dir: Path
    worker: str = "main"
    image_map: Mapping[str, str] = field(default_factory=dict)


def start_container(
    task: Task,
    rollout_dir: Path,
    place: EnvironmentPlace,
    mounts: Sequence[Mount] = (),
    install: str | None = None,
) -> Container:
    """The started container of ``task``'s rollout, its image built (or reused) first; its
    build log is ``rollout_dir/environment/build.log``; ``mounts``: an agent under test's
    installation and its way to the gateway, ``install``: its install step, run in a
    layer over the task's image (agents/container_agent.py). Raises ContainerError (an
    ImageBuildError's message naming the task, the step and the log's last lines)."""
    from pytest_agentbench.environments.container import Container, ContainerSpec, new_name
    from pytest_agentbench.environments.engine import find_engine
    from pytest_agentbench.environments.images import ImageSource, ensure_image

    wanted = task.environment
    if wanted is None:
        raise ContainerError(f"task {task.id!r} names no environment")
    engine = find_engine(place.engine)
    log_path = rollout_dir / "environment" / "build.log"
    source = ImageSource(wanted.context, wanted.image, wanted.build_timeout_s)
    try:
        image = ensure_image(
            engine, source, image_map=place.image_map, cache_dir=place.cache_dir, log_path=log_path
        )
    except ImageBuildError as exc:
        hint = (
            " (--agentbench-image-map NAME=IMAGE, or the agentbench_image_map ini key)"
            if exc.step == "pull"
            else ""
        )
        raise ImageBuildError(
            f"task {task.id!r}: the environment ({wanted.described}) failed at the {exc.step} "
            f"step{hint} — {exc}",
            step=exc.step,
            log_path=exc.log_path,
            log_tail=exc.log_tail,
        ) from None
    if install:
        image = agent_layer(engine, image, install, place, rollout_dir, wanted.build_timeout_s)
    spec = ContainerSpec(
        image=image,
        name=new_name(place.run_id, place.worker, task.id, task.epoch),
        run_id=place.run_id,
        cpus=wanted.cpus,
        memory_mb=wanted.memory_mb,
        network="host" if wanted.allow_internet else "none",
        env=dict(wanted.env),
        workdir=wanted.workdir,
        mounts=tuple(mounts),
    )
    container = Container.start(engine, spec)
    try:
        if wanted.logs:
            made = container.exec(
                ["sh", "-c", 'mkdir -p "$@" && chmod 777 "$@"', "sh", *LOG_DIRS],
                timeout_s=_SETUP_S,
            )
            if made.exit_code != 0:
                raise ContainerError(f"cannot make the log folders: {made.stderr.strip()}")
        if wanted.solution is not None:
            container.copy_in(wanted.solution, SOLUTION_TARGET)
    except BaseException:
        container.remove()
        raise
    return container


def agent_layer(
    engine: Engine,
    image: str,
    install: str,
    place: EnvironmentPlace,
    rollout_dir: Path,
    build_timeout_s: float,
) -> str:
    """``image`` with an agent's ``install`` step (a shell script) run on top: a layer
    built once per image and step, reused (across tasks, runs and xdist workers) and
    locked as task images are (environments/images.py). Its log is
    ``rollout_dir/environment/agent-install.log``. Raises ImageBuildError naming the
    step."""
    from pytest_agentbench.environments.images import ImageSource, ensure_image

    digest = hashlib.sha256(f"{image}\n{install}".encode()).hexdigest()[:20]
    layers = place.cache_dir / "agent-layers"
    context = layers / digest
    if not (context / "Dockerfile").is_file():
        landing = Path(tempfile.mkdtemp(prefix=f".{digest}-", dir=_made(layers)))
        (landing / "install.sh").write_text(install, encoding="utf-8")
        (landing / "Dockerfile").write_text(
            f"FROM {image}\nCOPY install.sh /tmp/agentbench-install.sh\n"
            "RUN sh /tmp/agentbench-install.sh && rm -f /tmp/agentbench-install.sh\n",
            encoding="utf-8",
        )
        try:
            landing.rename(context)
        except OSError:  # another process put the same folder there first
            shutil.rmtree(landing, ignore_errors=True)
    source = ImageSource(context, None, build_timeout_s)
    log_path = rollout_dir / "environment" / "agent-install.log"
    try:
        return ensure_image(
            engine, source, image_map={}, cache_dir=place.cache_dir, log_path=log_path
        )
    except ImageBuildError as exc:
        raise ImageBuildError(
            f"the agent's install step over {image} failed at the {exc.step} step — {exc}",
            step=exc.step,
            log_path=exc.log_path,
            log_tail=exc.log_tail,
        ) from None


def _made(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def copy_logs_out(container: Container, rollout_dir: Path) -> list[str]:
    """``/logs/agent`` and ``/logs/artifacts`` into the rollout's ``agent/`` and
    ``artifacts/`` (links as links; what was there from an earlier run replaced);
    returns what could not be copied, for the record."""
    problems = []
    for source, name in COPIED_OUT.items():
        target = rollout_dir / name
        if target.is_symlink() or target.is_file():
            target.unlink()
        elif target.exists():
            shutil.rmtree(target)
        try:
            container.copy_out(source, target)
        except ContainerError as exc:
            problems.append(f"{source}: {exc}")
    return problems


def container_of(session: object) -> Container | None:
    """The rollout's container a session works in (its ``container``): the built-in
    loop's ContainerAgentSession, or an agent under test's in a container
    (agents/container_agent.py); None for a session on the host."""
    found = getattr(session, "container", None)
    if found is None:
        return None
    from pytest_agentbench.environments.container import Container

    return found if isinstance(found, Container) else None


class ContainerAgentSession(AgentSession):
    """The built-in agent loop with its tools in the rollout's container. The agent's
    own deadline (``[agent] timeout_sec``) starts when the container is up and bounds
    every attempt within the task's. ``close`` copies the logs out and removes the
    container."""

    def __init__(
        self,
        task: Task,
        client: ModelClient,
        tools: Mapping[str, Tool],
        workspace: ContainerWorkspace,
        rollout_dir: Path,
        *,
        max_tokens: int | None = None,
        stream: bool = True,
        kill_policy: KillPolicy | None = None,
    ) -> None:
        super().__init__(
            task, client, tools, workspace, max_tokens=max_tokens, stream=stream,
            kill_policy=kill_policy,
        )  # fmt: skip
        self.container = workspace.container
        self.rollout_dir = rollout_dir
        agent_s = task.environment.agent_timeout_s if task.environment else None
        self.agent_deadline = None if agent_s is None else time.monotonic() + agent_s
        self.agent_timeout_s = agent_s
        if agent_s is not None:  # in its own container a command may use the agent's time
            self.command_timeout_s = max(self.command_timeout_s, agent_s)
        self.copy_problems: list[str] = []

    @classmethod
    def start(
        cls,
        task: Task,
        client: ModelClient,
        tools: Mapping[str, Tool],
        rollout_dir: Path,
        place: EnvironmentPlace,
        *,
        max_tokens: int | None = None,
        stream: bool = True,
        kill_policy: KillPolicy | None = None,
    ) -> ContainerAgentSession:
        """The session of ``task``'s rollout in a container started for it; raises
        ContainerError (nothing is left running)."""
        from pytest_agentbench.sandbox.container_workspace import ContainerWorkspace

        container = start_container(task, rollout_dir, place)
        try:
            where = container.exec(["pwd"], timeout_s=_SETUP_S)  # the image's WORKDIR
            root = task.environment.workdir if task.environment else None
            workspace = ContainerWorkspace.seeded(
                container, root or where.stdout.strip() or "/", task.files, task.files_dir
            )
            return cls(
                task, client, tools, workspace, rollout_dir, max_tokens=max_tokens,
                stream=stream, kill_policy=kill_policy,
            )  # fmt: skip
        except BaseException:
            container.remove()
            raise

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
        """An attempt bounded by the agent's own deadline too; past it, the attempt is a
        timeout naming ``[agent] timeout_sec``."""
        own = self.agent_deadline
        if own is None or own >= deadline:
            return super().attempt(
                messages, index=index, deadline=deadline, timeout_s=timeout_s,
                on_event=on_event, on_phase=on_phase, phase=phase,
            )  # fmt: skip
        run = super().attempt(
            messages, index=index, deadline=own, timeout_s=timeout_s, on_event=on_event,
            on_phase=on_phase, phase=phase,
        )  # fmt: skip
        if run.stop == "timeout":
            run.error = f"the agent's timeout ({self.agent_timeout_s:g}s, [agent] timeout_sec)"
        return run

    def close(self) -> list[str]:
        """Copy the agent's and the artifacts' logs out, then remove the container;
        returns nothing pruned (the workspace is the container's)."""
        try:
            if self.task.environment is not None and self.task.environment.logs:
                self.copy_problems = copy_logs_out(self.container, self.rollout_dir)
        finally:
            self.container.remove()
        return []
