"""Hooks through which pytest-agentbench finds model clients, verifiers, agent tools and
datasets.

Implement them in a ``conftest.py`` or a plugin, with ``@pytest.hookimpl``. The built-in
clients, verifiers and tools are registered through these same hooks (``builtins.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:
    from collections.abc import Iterable
    from pathlib import Path

    import pytest

    from pytest_agentbench.models.base import ModelClient, ModelSpec
    from pytest_agentbench.runner.tools import Tool
    from pytest_agentbench.settings import Settings
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
def pytest_agentbench_dataset(name: str, manifest: Path, config: pytest.Config) -> Path | None:
    """Return the local path of a manifest's dataset ``name`` (its ``suite.dataset``, as
    written), for instance after downloading it, or None to pass: the dataset is then the
    file ``name`` next to ``manifest``. Called once per manifest at collection; the file
    returned is read and checked as any dataset (its extension gives its format). An
    exception is a collection error of the manifest naming it.
    """
