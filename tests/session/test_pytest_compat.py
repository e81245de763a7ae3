"""The internals pytest_agentbench/session/pytest_compat.py relies on, checked against the
installed pytest, pytest-xdist and pytest-timeout. An upgrade that moves or renames one
fails here, with a message naming what changed and which compat function needs it."""

from __future__ import annotations

import importlib
import inspect
import io
import textwrap

import pytest

from pytest_agentbench.session import pytest_compat


def _params(func: object, where: str, expected: list[str]) -> None:
    assert callable(func), f"{where} is not callable any more"
    found = list(inspect.signature(func).parameters)
    assert found == expected, f"{where} now takes {found}, pytest_compat expects {expected}"


def test_terminal_writer_keeps_its_stream(pytester: pytest.Pytester) -> None:
    """terminal_stream: Config.get_terminal_writer() and TerminalWriter._file."""
    from _pytest._io import TerminalWriter

    stream = io.StringIO()
    writer = TerminalWriter(file=stream)
    assert getattr(writer, "_file", None) is stream, (
        "pytest's TerminalWriter no longer keeps its stream as _file: "
        "pytest_compat.terminal_stream (the live status line) needs it"
    )
    for name in ("fullwidth", "width_of_current_line"):
        assert hasattr(writer, name), f"pytest's TerminalWriter has no {name} any more"
    config = pytester.parseconfigure()
    found = pytest_compat.terminal_stream(config)
    assert found is not None, "pytest_compat.terminal_stream found no stream under pytest"
    assert found[0] is config.get_terminal_writer()
    assert hasattr(found[1], "write") and hasattr(found[1], "flush")


def test_capture_manager_suspends(pytester: pytest.Pytester) -> None:
    """uncaptured: CaptureManager.global_and_fixture_disabled() as a context manager."""
    from _pytest.capture import CaptureManager

    _params(
        CaptureManager.global_and_fixture_disabled,
        "CaptureManager.global_and_fixture_disabled",
        ["self"],
    )
    found = pytest_compat.uncaptured(pytester.parseconfigure())
    assert found is not None, "pytest's capturemanager plugin has no global_and_fixture_disabled"
    with found():
        pass


@pytest.mark.slow
def test_worker_interactor_queue(pytester: pytest.Pytester) -> None:
    """find_interactor and worker_queue in a real xdist worker: the interactor is found
    and the queue it reads holds the items sent after the current one."""
    from xdist.remote import TestQueue, WorkerInteractor

    source = inspect.getsource(WorkerInteractor)
    for name in ("torun", "nextitem_index", "session"):
        assert f"self.{name} = " in source, (
            f"xdist's WorkerInteractor sets no {name} any more: "
            "pytest_compat.worker_queue (look-ahead on a worker) reads it"
        )
    _params(TestQueue.lock, "xdist.remote.TestQueue.lock", ["self"])
    pytester.makeconftest(
        """
        from pytest_agentbench.session import pytest_compat

        def pytest_runtest_call(item):
            interactor = pytest_compat.find_interactor(item.config)
            assert interactor is not None, "no WorkerInteractor among the plugins"
            queue = pytest_compat.worker_queue(item.config, interactor, item, 3)
            if item.name == "test_0":
                names = [other.name for other in queue]
                assert names == ["test_0", "test_1", "test_2"], names
        """
    )
    # 40 items: xdist's load scheduler sends a quarter of them at first, so the worker's
    # queue holds more than the two after test_0 when it runs
    tests = "".join(f"def test_{i}():\n    pass\n" for i in range(40))
    pytester.makepyfile(test_queue=tests)
    result = pytester.runpytest_subprocess("-n", "1", "--dist", "load", "-p", "no:randomly")
    result.assert_outcomes(passed=40)


def test_load_scheduling_internals(pytester: pytest.Pytester) -> None:
    """deep_load_scheduler: LoadScheduling's node2pending, pending, _send_tests,
    schedule, check_schedule, and WorkerController.shutting_down."""
    from xdist.scheduler import LoadScheduling
    from xdist.workermanage import WorkerController

    _params(LoadScheduling._send_tests, "LoadScheduling._send_tests", ["self", "node", "num"])
    _params(LoadScheduling.schedule, "LoadScheduling.schedule", ["self"])
    _params(
        LoadScheduling.check_schedule,
        "LoadScheduling.check_schedule",
        ["self", "node", "duration"],
    )
    assert isinstance(inspect.getattr_static(WorkerController, "shutting_down"), property), (
        "xdist's WorkerController.shutting_down is no longer a property"
    )
    config = pytester.parseconfig("--tx", "2*popen")
    scheduler = pytest_compat.deep_load_scheduler(config, None, depth=3)
    assert isinstance(scheduler, LoadScheduling), "xdist has no LoadScheduling to extend"
    assert isinstance(scheduler.node2pending, dict), "LoadScheduling.node2pending changed"
    assert isinstance(scheduler.pending, list), "LoadScheduling.pending changed"


def test_xdist_crash_report() -> None:
    """is_crash_report and report_worker: the text xdist gives a dead worker's item, and
    the ``node`` it puts on the controller's reports."""
    from xdist.dsession import DSession

    source = inspect.getsource(DSession)
    assert pytest_compat.XDIST_CRASH_TEXT in source, (
        f"xdist's crash report no longer says {pytest_compat.XDIST_CRASH_TEXT!r}: "
        "pytest_compat.is_crash_report (crash records) looks for it"
    )
    assert "rep.node = " in source, (
        "xdist no longer sets report.node on the controller: pytest_compat.report_worker "
        "(which worker a crash came from) reads it"
    )


def test_xdist_hooks_we_implement() -> None:
    """The public xdist hooks plugin.py implements keep the arguments it takes."""
    from xdist import newhooks

    expected = {
        "pytest_configure_node": ["node"],
        "pytest_testnodedown": ["node", "error"],
        "pytest_xdist_node_collection_finished": ["node", "ids"],
        "pytest_xdist_make_scheduler": ["config", "log"],
        "pytest_handlecrashitem": ["crashitem", "report", "sched"],
        "pytest_xdist_setupnodes": ["config", "specs"],
    }
    for name, params in expected.items():
        _params(getattr(newhooks, name, None), f"xdist hook {name}", params)


def test_xdist_keeps_a_spec_with_its_env() -> None:
    """give_workers_env: execnet's XSpec.env, and xdist's NodeManager.setup_node making a
    new spec from the string form of one whose execmodel is not main_thread_only."""
    import execnet
    from xdist.workermanage import NodeManager

    spec = execnet.XSpec("popen")
    pytest_compat.give_workers_env([spec], {"AGENTBENCH_X": "1"})
    assert spec.env == {"AGENTBENCH_X": "1"} and str(spec) == "popen"
    source = inspect.getsource(NodeManager.setup_node)
    assert '!= "main_thread_only"' in source and "XSpec(" in source, (
        "xdist's NodeManager.setup_node no longer remakes a spec only when its execmodel "
        "is not main_thread_only: pytest_compat.give_workers_env (keys for workers) needs "
        "a look"
    )
    _params(NodeManager.setup_node, "xdist NodeManager.setup_node", ["self", "spec", "putevent"])


def test_pytest_timeout_internals() -> None:
    """set_timeout_timer: pytest_timeout.pytest_timeout_set_timer(item, settings) and its
    Settings namedtuple with a ``timeout`` field."""
    import pytest_timeout

    _params(
        pytest_timeout.pytest_timeout_set_timer,
        "pytest_timeout.pytest_timeout_set_timer",
        ["item", "settings"],
    )
    fields = getattr(pytest_timeout.Settings, "_fields", ())
    assert "timeout" in fields, "pytest_timeout.Settings has no timeout field any more"
    settings = pytest_timeout.Settings(*[None] * len(fields))
    assert settings._replace(timeout=5.0).timeout == 5.0


def test_inner_ctrf_watched_internals_exist() -> None:
    """The python_tests verifier's tamper watch (verifiers/inner_ctrf.py) compares pytest
    internals before and after collection: a name that no longer resolves would be
    watched as None, and a solution replacing it would go unseen."""
    from pytest_agentbench.verifiers.inner_ctrf import WATCHED_INTERNALS

    missing = []
    for module_name, dotted in WATCHED_INTERNALS:
        target: object = importlib.import_module(module_name)
        for part in dotted.split("."):
            target = getattr(target, part, None)
        if target is None:
            missing.append(f"{module_name}.{dotted}")
    assert not missing, textwrap.shorten(
        f"pytest internals inner_ctrf.py watches are gone: {missing}", 500
    )
