"""The environment a task runs in: a container built from a Dockerfile folder or named
by an image (DESIGN.md, "environment"). A record of what the task asks for; building and
running it is the ``environments`` layer's work, which this layer never imports."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

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
