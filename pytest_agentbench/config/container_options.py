"""The run's container settings (docs/environments.md): which engine runs the task
environments, and the image map that lets an air-gapped machine build every task
(a Dockerfile's ``FROM`` name, or a prebuilt image, → an image present locally)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest

from pytest_agentbench.errors import AgentbenchError

ENGINES = ("podman", "docker")
OptionReader = Callable[[str], object]


@dataclass(frozen=True)
class ContainerSettings:
    """``engine``: the engine asked for (None: Podman if it answers, else Docker);
    ``image_map``: (image name, local image) pairs (a tuple: settings are hashed)."""

    engine: str | None = None
    image_map: tuple[tuple[str, str], ...] = ()


def add_container_options(group: pytest.OptionGroup, parser: pytest.Parser) -> None:
    group.addoption(
        "--agentbench-engine",
        choices=ENGINES,
        help="the container engine of tasks with an environment (Harbor tasks): podman or "
        "docker (default: podman if it answers, else docker; CONTAINER_HOST / DOCKER_HOST "
        "reach a remote one)",
    )
    group.addoption(
        "--agentbench-image-map",
        action="append",
        metavar="NAME=IMAGE",
        help="build with IMAGE wherever a task's Dockerfile says FROM NAME (or its "
        "docker_image names NAME): how an air-gapped machine builds every task; repeatable",
    )
    group.addoption(
        "--agentbench-agent",
        metavar="FILE",
        help="the agent under test of every agent-mode task naming none of its own "
        "(Harbor tasks included): a TOML file holding one agent table, as a suite's "
        "agent (docs/agents-external.md)",
    )
    parser.addini("agentbench_agent", "a TOML file holding the run-wide agent under test")
    parser.addini("agentbench_engine", "podman or docker (tasks with an environment)")
    parser.addini(
        "agentbench_image_map", "NAME = IMAGE lines: FROM names mapped to local images",
        type="linelist",
    )  # fmt: skip


def container_settings(option: OptionReader, ini: OptionReader) -> ContainerSettings:
    """The container settings from the command line, else the ini file; raises
    AgentbenchError naming a bad value."""
    engine = option("agentbench_engine") or ini("agentbench_engine") or None
    if engine is not None and engine not in ENGINES:
        raise AgentbenchError(f"agentbench_engine: expected podman or docker; got {engine!r}")
    lines = option("agentbench_image_map") or ini("agentbench_image_map") or []
    image_map: dict[str, str] = {}
    for line in lines if isinstance(lines, list) else []:
        name, sep, image = str(line).partition("=")
        if not sep or not name.strip() or not image.strip():
            raise AgentbenchError(
                f"agentbench image map: expected NAME=IMAGE (a FROM name and a local image); "
                f"got {line!r}"
            )
        image_map[name.strip()] = image.strip()
    return ContainerSettings(None if engine is None else str(engine), tuple(image_map.items()))
