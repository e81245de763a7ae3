"""Hooks through which pytest-agentbench finds model clients, verifiers and agent tools.

Implement them in a ``conftest.py`` or a plugin, with ``@pytest.hookimpl``. The built-in
clients, verifiers and tools are registered through these same hooks (``builtins.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:
    import random
    from collections.abc import Iterable

    from pytest_agentbench.models.base import ModelClient, ModelSpec
    from pytest_agentbench.runner.tools import Tool
    from pytest_agentbench.settings import Settings
    from pytest_agentbench.suites.task import Task
    from pytest_agentbench.verifiers.base import Verifier

hookspec = pluggy.HookspecMarker("pytest")


@hookspec(firstresult=True)
def pytest_agentbench_model_client(spec: ModelSpec, settings: Settings) -> ModelClient | None:
    """Return a client for ``spec`` (a parsed ``provider/model``), or None to pass.

    Called once per process when the first task runs; the first non-None answer wins, and
    the built-in clients answer last, so a plugin may override any provider.
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
