"""The pytest entry point of pytest-agentbench (``pytest11``): the options, the hook specs
plugins implement, the ``agentbench_model`` fixture, and under ``--agentbench`` the start
of a run, which registers the run's session plugin (session/plugin.py) with the hooks
that do the work.

Inert without ``--agentbench``: nothing is collected, started or written, and nothing of
ours is imported beyond this module, the options and the hook specs
(tests/package/test_lazy_imports.py).
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pathlib import Path

    from pytest_agentbench.session.model_fixture import BenchModel


def _import_without_rewriting() -> None:
    """Our modules are loaded by Python's own import, not pytest's assertion rewriting.

    pytest marks every module of a plugin's distribution for rewriting and then loads each
    from a rewritten copy of its bytecode, read with ``marshal.load`` from a file object:
    for an installed (not editable) copy of this package that cost a one-task run 0.08 s
    CPU, a quarter of pytest's own start-up (docs/scale.md, "The fourth pass"). Our code
    asserts nothing a user would read a rewritten message of. Only this module is loaded
    before it runs. pytest keeps the marks in its import hook; a pytest without them
    (or under ``--assert=plain``) changes nothing here."""
    for finder in sys.meta_path:
        marked = getattr(finder, "_must_rewrite", None)
        if isinstance(marked, set) and __package__ in marked:
            marked.discard(__package__)
            cache = getattr(finder, "_marked_for_rewrite_cache", None)
            if isinstance(cache, dict):
                cache.clear()


_import_without_rewriting()


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    from pytest_agentbench.hooks import hookspecs

    pluginmanager.add_hookspecs(hookspecs)


def pytest_addoption(parser: pytest.Parser) -> None:
    from pytest_agentbench.config.options import add_options

    add_options(parser)


#: artifacts/paths.RUN_MARKER (this module imports nothing of ours without --agentbench;
#: tests/session/test_run_folder_collect.py keeps the two equal)
RUN_MARKER = ".agentbench-run"


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """pytest never collects below a run folder, with or without ``--agentbench``: its
    rollout workspaces hold the model's ``solution.py`` and ``test_*.py``, which are no
    tests of the project's (a second ``pytest`` in the same folder would collect, and
    fail on, every one of them). A run folder holds the marker file; one written before
    the marker existed is known by its ``summary.json`` beside a ``tasks`` folder."""
    path = os.fspath(collection_path)
    if os.path.isfile(os.path.join(path, RUN_MARKER)):
        return True
    if os.path.isfile(os.path.join(path, "summary.json")) and os.path.isdir(
        os.path.join(path, "tasks")
    ):
        return os.path.isfile(os.path.join(path, "ctrf.json")) or None
    return None


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "agentbench_scripted(*replies): the scripted model's replies to a test using the "
        "agentbench_model fixture, one per call (the last repeats)",
    )
    if not config.getoption("agentbench"):
        return
    if config.getoption("agentbench_dry_run") and config.getoption("dist", "no") != "no":
        # the forecast reads the collected tasks in this process, and sends nothing: no
        # workers (xdist's own configure, trylast, then registers none)
        config.option.dist, config.option.numprocesses = "no", None
    import atexit
    import gc

    # pytest_collection_finish freezes what collection made out of the garbage
    # collector. Undone when the session ends, so a process that runs pytest again
    # in-process (pytester, pytest.main in a loop) gets its collector back; frozen
    # again at interpreter exit, whose final collection need not scan a heap that is
    # about to go anyway (docs/scale.md, start-up).
    config.add_cleanup(gc.unfreeze)
    atexit.unregister(gc.freeze)  # once, however many sessions this process runs
    atexit.register(gc.freeze)
    from pytest_agentbench.session.start import start_run

    start_run(config)


@pytest.fixture
def agentbench_model(request: pytest.FixtureRequest) -> BenchModel:
    """The run's model for an ordinary test: ``agentbench_model.generate(prompt)`` (see
    session/model_fixture.py). The test then counts as a task of the run. Skipped without
    ``--agentbench``."""
    if not request.config.getoption("agentbench"):
        pytest.skip("the agentbench_model fixture needs --agentbench")
    from pytest_agentbench.session.model_fixture import BenchModel
    from pytest_agentbench.session.stash import STATE_KEY

    model = BenchModel(request.config.stash[STATE_KEY], request.node)
    request.node.agentbench_model = model
    return model
