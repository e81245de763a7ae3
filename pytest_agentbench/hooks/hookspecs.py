"""Hooks through which pytest-agentbench finds model clients, verifiers, agent tools and
suite formats and datasets, and tells plugins what happens in a run.

Implement them in a ``conftest.py``, or in an installed package registered under the
``pytest_agentbench`` entry-point group (or pytest's own ``pytest11``), with
``@pytest.hookimpl``. The built-ins are registered through these same hooks
(``builtins.py``). Observers receive the typed records of ``core/`` (``TaskRecord``,
``RunSummary``, ``RolloutEvent``), never the run's internal state; an observer that raises
is reported once, with its plugin's name, and the run and its results carry on.
See docs/plugins.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:
    import random
    from collections.abc import Iterable, Mapping
    from pathlib import Path

    import pytest

    from pytest_agentbench.config.settings import Settings
    from pytest_agentbench.core.stream import RolloutEvent
    from pytest_agentbench.core.task_record import RunSummary, TaskRecord
    from pytest_agentbench.models.base import ModelClient, ModelSpec
    from pytest_agentbench.runner.tools import Tool
    from pytest_agentbench.suites.task import Task
    from pytest_agentbench.verifiers.base import Verifier

hookspec = pluggy.HookspecMarker("pytest")


@hookspec(firstresult=True)
def pytest_agentbench_model_client(spec: ModelSpec, settings: Settings) -> ModelClient | None:
    """Return a client for ``spec`` (a parsed ``provider/model``), or None to pass.

    The first non-None answer wins, and the built-in clients answer last, so a plugin may
    override any provider or claim a new one (``--agentbench-model myprovider/m``). A
    provider no built-in knows is asked for at start-up, and unclaimed it is a usage error.
    """


@hookspec
def pytest_agentbench_verifiers() -> Iterable[Verifier] | None:
    """Return verifiers to add, each with a ``kind`` name, an ``options_schema`` and a
    ``verify(check) -> Verdict`` method. Called once per process before suites load; a
    plugin's verifier with the same kind as a built-in replaces it.
    """


@hookspec
def pytest_agentbench_tools() -> Iterable[Tool] | None:
    """Return tools agent tasks may be offered, each a ``Tool(spec, function)`` where
    ``function(workspace, arguments) -> str`` runs it. Called once per process before
    suites load; a plugin's tool with the same name as a built-in replaces it.
    """


@hookspec(firstresult=True)
def pytest_agentbench_paraphrase(task: Task, rng: random.Random) -> str | None:
    """Return ``task.input`` reworded, for ``--agentbench-perturb paraphrase``, or None
    to leave this task without a paraphrased copy. ``rng`` is seeded from the run's
    ``--agentbench-seed`` and the task: draw every random choice from it, so the same
    seed gives the same paraphrase. Called once per task at collection.
    """


@hookspec(firstresult=True)
def pytest_agentbench_load_suite(path: Path) -> Mapping[str, object] | None:
    """Read the suite file at ``path`` (a ``bench_*`` file of a format no built-in reads)
    into a suite document (``{"suite": {...}, "task": [...]}``, as a JSON suite holds), or
    return None to pass; the document is validated like any suite file.
    """


@hookspec
def pytest_agentbench_rollout_event(event: RolloutEvent) -> None:
    """Observe one streamed piece of a task's rollout (in the process that runs it)."""


@hookspec
def pytest_agentbench_task_finished(record: TaskRecord) -> None:
    """Observe a task's record as it reaches the run (the serial process or the xdist
    controller); a rerun of the task calls it again with the new record."""


@hookspec(firstresult=True)
def pytest_agentbench_failure_reason(record: TaskRecord) -> str | None:
    """Return the one-line reason of a task that did not pass, or None to keep ours."""


@hookspec
def pytest_agentbench_run_finished(summary: RunSummary, run_dir: Path) -> None:
    """Observe the run's summary once its reports are written in ``run_dir`` (write
    another report format there)."""


@hookspec(firstresult=True)
def pytest_agentbench_dataset(name: str, manifest: Path, config: pytest.Config) -> Path | None:
    """Return the local path of a manifest's dataset ``name`` (its ``suite.dataset``, as
    written), for instance after downloading it, or None to pass: the dataset is then the
    file ``name`` next to ``manifest``. Called once per manifest at collection; the file
    returned is read and checked as any dataset (its extension gives its format). An
    exception is a collection error of the manifest naming it.
    """
