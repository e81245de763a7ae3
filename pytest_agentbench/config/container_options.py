"""The run's container settings (docs/environments.md): which engine runs the task
environments, and the image map that lets an air-gapped machine build every task
(a Dockerfile's ``FROM`` name, or a prebuilt image, → an image present locally)."""

from __future__ import annotations

from collections.abc import Callable

from pytest_agentbench.config.settings import ContainerSettings
from pytest_agentbench.errors import AgentbenchError

#: The engines a run may name (``--agentbench-engine``, defined in config/feature_options.py).
ENGINES = ("podman", "docker")
OptionReader = Callable[[str], object]


def container_settings(option: OptionReader, ini: OptionReader) -> ContainerSettings:
    """The container settings from the command line, else the ini file; raises
    AgentbenchError naming a bad value. (config/resolve.py calls it only when one of them
    is given: a run without containers never imports this module.)"""
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
