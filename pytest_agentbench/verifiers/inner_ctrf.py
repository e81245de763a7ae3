"""The CTRF writer inside a ``python_tests`` run: a pytest plugin of the inner pytest.

The harness loads this file by its path (it is never imported as part of the package, and
needs nothing but pytest and the standard library) before any test or solution code is
imported, and arms it with the run's nonce and a file descriptor of an unlinked file the
harness opened. After every test, and at the end of the session, it rewrites that file
with a CTRF 0.0.0 report of what pytest recorded, stamped with the nonce, ``complete``
once the session finished, ``tampered`` naming every pytest internal or hook list
that changed since collection began, and ``orphaned`` once the run's parent (the
sandbox's shim) is gone: something killed it, so the run is no longer supervised. The
harness trusts nothing else: not the exit status, not the output, not any file the code
under test could write. Loaded alone, it can import nothing of ours: the report writing it
shares with ``inner_checks.py`` (the report's shape, ``_flush``) is repeated there on
purpose.
"""

from __future__ import annotations

import os
import sys
import time
from json import dumps
from typing import TypedDict

import pytest

EXTRA_KEY = "pytest-agentbench.inner"
MESSAGE_LIMIT = 1000
TRACE_LIMIT = 4000
#: pytest internals a solution could replace to make failing tests pass.
WATCHED_INTERNALS = (
    ("_pytest.python", "Function.runtest"),
    ("_pytest.python", "Function.setup"),
    ("_pytest.python", "pytest_pyfunc_call"),
    ("_pytest.runner", "runtestprotocol"),
    ("_pytest.runner", "call_and_report"),
    ("_pytest.runner", "CallInfo.from_call"),
    ("_pytest.runner", "pytest_runtest_call"),
    ("_pytest.runner", "pytest_runtest_makereport"),
    ("_pytest.reports", "TestReport.from_item_and_call"),
    ("_pytest.reports", "BaseReport.passed"),
    ("_pytest.reports", "BaseReport.failed"),
    ("_pytest.reports", "BaseReport.skipped"),
    ("_pytest.main", "Session.perform_collect"),
)
#: Hooks whose implementations decide or record outcomes; nobody may join them late.
WATCHED_HOOKS = (
    "pytest_runtest_protocol",
    "pytest_runtest_setup",
    "pytest_runtest_call",
    "pytest_runtest_teardown",
    "pytest_runtest_makereport",
    "pytest_runtest_logreport",
    "pytest_pyfunc_call",
    "pytest_report_teststatus",
    "pytest_collection_modifyitems",
    "pytest_collectreport",
    "pytest_sessionfinish",
)

_write, _lseek, _ftruncate, _clock, _getppid = (
    os.write,
    os.lseek,
    os.ftruncate,
    time.time,
    os.getppid,
)


class _Test(TypedDict, total=False):
    """One test of the report, in CTRF's words."""

    name: str
    status: str
    duration: int
    filePath: str
    rawStatus: str
    message: str
    trace: str


class _Armed(TypedDict, total=False):
    """The run's state once armed (``arm``); empty before, and then nothing is recorded."""

    nonce: str
    fd: int
    start: int
    tests: dict[str, _Test]
    order: list[str]
    collection_errors: list[dict[str, str]]
    snapshot: dict[str, tuple[object, ...]] | None
    tampered: list[str]
    config: pytest.Config | None
    ppid: int
    module: str
    phase: str


_armed: _Armed = {}


def arm(nonce: str, fd: int, module: str = "") -> None:
    """Called by the harness's bootstrap before pytest starts; ``module`` is the answer's
    module name (its import during collection is reported as the ``importing`` phase, so
    a run that ends there is said to have exited during that import)."""
    _armed.update(
        {
            "nonce": nonce,
            "fd": fd,
            "start": int(_clock() * 1000),
            "tests": {},
            "order": [],
            "collection_errors": [],
            "snapshot": None,
            "tampered": [],
            "config": None,
            "ppid": _getppid(),
            "module": module,
            "phase": "starting",
        }
    )
    if module:
        sys.addaudithook(_audit_import)


def _audit_import(event: str, args: tuple[object, ...]) -> None:
    """Notes (once, flushed) that the answer's module started importing during collection."""
    if (
        event == "import"
        and _armed.get("phase") == "collecting"
        and args
        and args[0] == _armed["module"]
    ):
        _armed["phase"] = "importing"
        _flush()


def _resolve(module: str, dotted: str) -> object:
    target: object = sys.modules.get(module)
    for part in dotted.split("."):
        if target is None:
            return None
        members = vars(target) if isinstance(target, type) else None
        target = members.get(part) if members is not None else getattr(target, part, None)
    return target


def _snapshot(config: pytest.Config) -> dict[str, tuple[object, ...]]:
    found: dict[str, tuple[object, ...]] = {}
    for module, dotted in WATCHED_INTERNALS:
        found[f"{module}.{dotted}"] = (_resolve(module, dotted),)
    for name in WATCHED_HOOKS:
        caller = getattr(config.hook, name, None)
        impls = caller.get_hookimpls() if caller is not None else []
        found[f"hook {name}"] = tuple(impl.function for impl in impls)
    return found


def _check_tampering() -> None:
    before, config = _armed.get("snapshot"), _armed.get("config")
    if before is None or config is None:
        return
    after = _snapshot(config)
    for key, objects in before.items():
        now = after.get(key, ())
        same = len(now) == len(objects) and all(a is b for a, b in zip(now, objects, strict=True))
        if not same and key not in _armed["tampered"]:
            _armed["tampered"].append(key)


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _message(report: pytest.TestReport | pytest.CollectReport) -> str:
    crash = getattr(report.longrepr, "reprcrash", None)
    message = getattr(crash, "message", None)
    if isinstance(message, str) and message.strip():
        return _cut(message.strip(), MESSAGE_LIMIT)
    text = report.longreprtext.strip()
    return _cut(text.splitlines()[-1] if text else "", MESSAGE_LIMIT)


def _report(complete: bool, exitstatus: int | None) -> dict[str, object]:
    tests = [_armed["tests"][nodeid] for nodeid in _armed["order"]]
    counts = {status: 0 for status in ("passed", "failed", "skipped", "pending", "other")}
    for test in tests:
        counts[test["status"]] += 1
    return {
        "reportFormat": "CTRF",
        "specVersion": "0.0.0",
        "results": {
            "tool": {"name": "pytest", "version": pytest.__version__},
            "summary": {
                "tests": len(tests),
                **counts,
                "start": _armed["start"],
                "stop": int(_clock() * 1000),
            },
            "tests": tests,
            "extra": {
                EXTRA_KEY: {
                    "nonce": _armed["nonce"],
                    "complete": complete,
                    "exitstatus": exitstatus,
                    "phase": _armed["phase"],
                    "tampered": list(_armed["tampered"]),
                    "orphaned": _getppid() != _armed["ppid"],
                    "collection_errors": list(_armed["collection_errors"]),
                }
            },
        },
    }


def _flush(complete: bool = False, exitstatus: int | None = None) -> None:
    if not _armed:
        return
    _check_tampering()
    data = dumps(_report(complete, exitstatus), ensure_ascii=False).encode("utf-8")
    fd = _armed["fd"]
    _lseek(fd, 0, os.SEEK_SET)
    _ftruncate(fd, 0)
    view = memoryview(data)
    while view:
        view = view[_write(fd, view) :]


@pytest.hookimpl(tryfirst=True)
def pytest_collection(session: pytest.Session) -> None:
    if _armed:
        _armed["config"] = session.config
        _armed["snapshot"] = _snapshot(session.config)
        _armed["phase"] = "collecting"


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session: pytest.Session) -> None:
    """Collection is over (pytest_collection_finish runs even when a SystemExit ends it)."""
    if _armed:
        _armed["phase"] = "running"
        _flush()  # a run that ends from here on did not end in the answer's import


def pytest_collectreport(report: pytest.CollectReport) -> None:
    if _armed and report.failed:
        error = {"nodeid": report.nodeid, "message": _message(report)}
        _armed["collection_errors"].append(error)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if not _armed:
        return
    tests = _armed["tests"]
    test = tests.get(report.nodeid)
    if test is None:
        path, _, _ = report.nodeid.partition("::")
        test = {"name": report.nodeid, "status": "other", "duration": 0, "filePath": path}
        tests[report.nodeid] = test
        _armed["order"].append(report.nodeid)
    test["duration"] += max(0, int(report.duration * 1000))
    failed_before = test["status"] == "failed"
    if report.failed:
        test["status"] = "failed"
        test["rawStatus"] = "failed" if report.when == "call" else f"{report.when}_failed"
        if not failed_before:
            test["message"] = _message(report)
            test["trace"] = _cut(report.longreprtext, TRACE_LIMIT)
    elif report.skipped and not failed_before:
        test["status"], test["rawStatus"] = "skipped", "skipped"
        test["message"] = _message(report)
    elif report.when == "call" and report.passed and not failed_before:
        test["status"], test["rawStatus"] = "passed", "passed"
    if report.when == "teardown":
        _flush()


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    _flush(complete=True, exitstatus=int(exitstatus))
