"""The pytest entry point of pytest-agentbench (``pytest11``): the options, the hook specs
plugins implement, the ``agentbench_model`` fixture, and under ``--agentbench`` the start
of a run, which registers the run's session plugin (session/plugin.py) with the hooks
that do the work.

Inert without ``--agentbench``: nothing is collected, started or written, and nothing of
ours is imported beyond this module, the options and the hook specs
(tests/package/test_lazy_imports.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pytest_agentbench.session.model_fixture import BenchModel


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    from pytest_agentbench.hooks import hookspecs

    pluginmanager.add_hookspecs(hookspecs)


def pytest_addoption(parser: pytest.Parser) -> None:
    from pytest_agentbench.config.options import add_options

    add_options(parser)


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
