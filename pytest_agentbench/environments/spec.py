"""What a rollout's container is to be: its image, name, limits, settings and mounts."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field
from pathlib import Path
from types import MappingProxyType
from typing import Literal

from pytest_agentbench.core.fastclass import dataclass


@dataclass(frozen=True)
class Mount:
    """A host path bound into the container at ``target`` (absolute)."""

    host: Path
    target: str
    read_only: bool = False


@dataclass(frozen=True)
class ContainerSpec:
    """What one rollout's container is: its image, its unique ``name`` (:func:`new_name`),
    the ``run_id`` it is labelled with, and its limits and settings."""

    image: str
    name: str
    run_id: str
    cpus: float | None = None
    memory_mb: int | None = None
    network: Literal["host", "none"] = "host"
    env: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    workdir: str | None = None
    mounts: tuple[Mount, ...] = ()
