"""The run's containers: where they come from (engine, image map, image cache, run id,
worker) and, before the first starts, the removal of those an earlier run left."""

from __future__ import annotations

import pytest

from pytest_agentbench.runner.container_session import EnvironmentPlace
from pytest_agentbench.session.run import RunState


def environment_place(state: RunState) -> EnvironmentPlace:
    """Where this run's containers come from: its engine and image map, the image cache
    beside the run folders (shared by every worker and run), its run id and worker."""

    run = state.run
    containers = state.settings.containers
    return EnvironmentPlace(
        engine=containers.engine,
        run_id=run.run_id,
        cache_dir=run.run_dir.parent / ".environments",
        worker=run.worker_id or "main",
        image_map=dict(containers.image_map),
    )


def reap_earlier_containers(state: RunState) -> None:
    """Before the first container of this run starts: remove the containers an earlier
    run (a killed pytest, a crashed worker) left, said as a warning. Without an engine,
    nothing: the tasks say so when they run."""
    import warnings

    from pytest_agentbench.environments.container import reap
    from pytest_agentbench.environments.engine import engine_or_reason
    from pytest_agentbench.errors import ContainerError

    engine = engine_or_reason(state.settings.containers.engine)
    if isinstance(engine, str):
        return
    try:
        removed = reap(engine)
    except ContainerError as exc:
        warnings.warn(pytest.PytestWarning(f"agentbench: the reaper failed: {exc}"), stacklevel=1)
        return
    if removed:
        shown = ", ".join(removed[:5]) + (
            f" and {len(removed) - 5} more" if len(removed) > 5 else ""
        )
        warnings.warn(
            pytest.PytestWarning(
                f"agentbench: removed {len(removed)} container(s) an earlier run left: {shown}"
            ),
            stacklevel=1,
        )


def engine_missing(state: RunState) -> str | None:
    """Why this run's tasks with an environment cannot run here (no engine answers: what
    to install or set), or None. Asked once per process (the engine probe is cached)."""
    from pytest_agentbench.environments.engine import engine_or_reason

    found = engine_or_reason(state.settings.containers.engine)
    if isinstance(found, str):
        return f"no container engine for this task's environment: {found}"
    return None
