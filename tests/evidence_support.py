"""Verifier artifacts the failure-reason tests write (CTRF reports, reward.json, a real
pytest stdout) and the small task record the reasons are mined from."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from records_support import make_record

from pytest_agentbench.core.task_record import TaskRecord


def ctrf_test(name: str, status: str, **fields: Any) -> dict[str, Any]:
    """One test entry shaped (keys and their order) like pytest-json-ctrf 0.6.1 writes it."""
    test: dict[str, Any] = {"name": f"test_sample.py::{name}", "status": status}
    if "rawStatus" in fields:
        test["rawStatus"] = fields.pop("rawStatus")
    test.update(
        {
            "duration": 11,
            "start": 1796015181736,
            "stop": 1796015181747,
            "suite": ["test_sample.py"],
            "retries": 0,
            "filePath": "test_sample.py",
        }
    )
    test.update(fields)
    return test


# The tests of /work/shared/ctrf/samples/pytest-json-ctrf-0.6.1.serial.json, in its order.
SAMPLE_TESTS = [
    ctrf_test("test_pass", "passed"),
    ctrf_test(
        "test_fail",
        "failed",
        rawStatus="call_failed",
        trace='def test_fail():\n>       assert 1 == 2, "one is not two"\nE       AssertionError:'
        " one is not two\nE       assert 1 == 2\n\ntest_sample.py:10: AssertionError",
        message="AssertionError: one is not two\nassert 1 == 2",
    ),
    ctrf_test("test_skip", "skipped", message="not today"),
    ctrf_test("test_xfail", "skipped", rawStatus="xfailed", tags=["xfail::reason_known bug"]),
    ctrf_test("test_xpass", "passed", tags=["xfail::reason_should fail but passes"]),
    ctrf_test(
        "test_setup_error",
        "failed",
        rawStatus="setup_failed",
        trace='@pytest.fixture\n    def broken():\n>       raise RuntimeError("setup exploded")',
        message="RuntimeError: setup exploded",
    ),
    ctrf_test("test_param[1]", "passed", parameters={"n": 1}),
    ctrf_test("test_param[2]", "passed", parameters={"n": 2}),
    ctrf_test("TestGroup::test_in_class", "passed", tags=["slow"]),
]


def ctrf_report(tests: list[dict[str, Any]]) -> dict[str, Any]:
    counts = {s: sum(t["status"] == s for t in tests) for s in ("passed", "failed", "skipped")}
    return {
        "reportFormat": "CTRF",
        "specVersion": "1.0.0",
        "reportId": "9e1c5469-8eae-41de-b479-346fda6a7fbf",
        "timestamp": "2026-11-30T05:06:21.827529+00:00",
        "generatedBy": "pytest",
        "results": {
            "tool": {"name": "pytest", "version": "9.2.0"},
            "summary": {
                "tests": len(tests),
                **counts,
                "pending": 0,
                "other": 0,
                "flaky": 0,
                "suites": 1,
                "start": 1796015181698,
                "stop": 1796015181827,
                "duration": 129,
            },
            "environment": {"osPlatform": "linux"},
            "tests": tests,
        },
    }


def write_ctrf(vdir: Path, tests: list[dict[str, Any]]) -> Path:
    vdir.mkdir(parents=True, exist_ok=True)
    path = vdir / "ctrf.json"
    path.write_text(json.dumps(ctrf_report(tests), indent=4), encoding="utf-8")
    return path


def write_reward(vdir: Path, data: Any) -> None:
    vdir.mkdir(parents=True, exist_ok=True)
    (vdir / "reward.json").write_text(json.dumps(data, indent=2), encoding="utf-8")


def pytest_stdout(pytester: pytest.Pytester, *args: str) -> str:
    """What a real pytest run printed (run in-process on the files already made)."""
    result = pytester.runpytest("-p", "no:cacheprovider", "-p", "no:agentbench", *args)
    return "\n".join(result.outlines) + "\n"


INNER_TESTS = """
import pytest

@pytest.fixture
def broken():
    raise RuntimeError("setup exploded")

def test_ok():
    pass

def test_fail():
    assert 1 == 2, "one is not two"

def test_err(broken):
    pass
"""


def record(vdir: Path | None = None, **fields: Any) -> TaskRecord:
    """A record as artifacts/record.py writes it for a failed task with a plain verdict."""
    base: dict[str, Any] = {
        "suite": "s",
        "task_id": "t",
        "outcome": "failed",
        "reward": 0.0,
        "attempts": 1,
        "last_feedback": None,
        "error": None,
        "verdict": {"reward": 0.0, "metrics": {}, "error": None},
        "max_tokens": 256,
        "verifier_dir": None if vdir is None else str(vdir),
    }
    base.update(fields)
    return make_record(**base)
