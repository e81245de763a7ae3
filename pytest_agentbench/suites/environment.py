"""The environment a task runs in: a container built from a Dockerfile folder or named
by an image (DESIGN.md, "environment"). A record of what the task asks for; building and
running it is the ``environments`` layer's work, which this layer never imports."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field
from pathlib import Path

from pytest_agentbench.core.fastclass import dataclass
from pytest_agentbench.core.jsontypes import JsonValue

#: Harbor's own defaults, used when a task.toml leaves a value out.
DEFAULT_BUILD_TIMEOUT_S = 600.0
DEFAULT_AGENT_TIMEOUT_S = 600.0
DEFAULT_VERIFIER_TIMEOUT_S = 600.0


@dataclass(frozen=True)
class TaskEnvironment:
    """What one rollout's container is made from and started with.

    Exactly one of ``context`` (a folder holding a Dockerfile) and ``image`` (a prebuilt
    image name) is set. ``cpus`` and ``memory_mb`` limit the container (None: the
    engine's default); ``storage_mb`` is recorded, not enforced. ``allow_internet``
    False starts it without a network. ``env`` and ``workdir`` are the container's
    environment and working directory (None: the image's). ``logs`` mounts Harbor's
    ``/logs/agent``, ``/logs/verifier`` and ``/logs/artifacts`` from the rollout's
    folder. ``agent_timeout_s`` is the agent's own deadline inside the task's.
    """

    context: Path | None = None
    image: str | None = None
    build_timeout_s: float = DEFAULT_BUILD_TIMEOUT_S
    cpus: float | None = None
    memory_mb: int | None = None
    storage_mb: int | None = None
    allow_internet: bool = True
    env: Mapping[str, str] = field(default_factory=dict)
    workdir: str | None = None
    logs: bool = False
    agent_timeout_s: float | None = None
    #: A folder copied to ``/solution`` before the agent starts: set on the copy a Harbor
    #: task's oracle control runs (its ``solution/``), never on an agent's run.
    solution: Path | None = None

    @property
    def described(self) -> str:
        """Where the image comes from, for a message: the folder or the image name."""
        return str(self.context) if self.context is not None else str(self.image)


#: The verifiers that judge code on the host's sandbox, not in a task's container.
HOST_ONLY_VERIFIERS = ("python_tests", "python_checks")


def read_environment(value: JsonValue, suite_dir: Path) -> tuple[TaskEnvironment | None, str]:
    """A suite's or task's ``environment`` (the schema checked its shape): an image name,
    or a table with ``dockerfile`` (a folder beside the suite file) or ``image``. Returns
    the environment, or None and why it cannot be one ("" when unset)."""
    if value is None:
        return None, ""
    if isinstance(value, str):
        return TaskEnvironment(image=value), ""
    if not isinstance(value, dict):
        return None, ""
    folder, image = value.get("dockerfile"), value.get("image")
    if (folder is None) == (image is None):
        return None, "needs one of dockerfile (a folder holding a Dockerfile) and image"
    context = None
    if isinstance(folder, str):
        context = suite_dir / folder
        if not (context / "Dockerfile").is_file():
            return None, f"dockerfile: {folder} holds no Dockerfile (looked in {context})"
    build, cpus, memory = (value.get(k) for k in ("build_timeout_s", "cpus", "memory_mb"))
    env, workdir = value.get("env"), value.get("workdir")
    return TaskEnvironment(
        context=context,
        image=image if isinstance(image, str) else None,
        build_timeout_s=float(build) if isinstance(build, int | float) else DEFAULT_BUILD_TIMEOUT_S,
        cpus=float(cpus) if isinstance(cpus, int | float) else None,
        memory_mb=memory if isinstance(memory, int) else None,
        allow_internet=value.get("allow_internet", True) is not False,
        env={k: v for k, v in env.items() if isinstance(v, str)} if isinstance(env, dict) else {},
        workdir=workdir if isinstance(workdir, str) else None,
    ), ""


def environment_problem(environment: TaskEnvironment, mode: str, agent: bool, kind: str) -> str:
    """Why a task cannot run in its environment, or "": the built-in agent loop, a command
    and an acp agent work in a container (``agent``: the task names another kind), and a
    host-only code verifier cannot judge it there."""
    if mode != "agent":
        return (
            'needs mode = "agent": the agent works in the container, the verifier judges it there'
        )
    if agent:
        return (
            "a python agent under test does not run in a container (command and acp "
            "agents do): leave out agent or environment"
        )
    if kind in HOST_ONLY_VERIFIERS:
        return f"the {kind} verifier judges on the host: use the command verifier in a container"
    return ""
