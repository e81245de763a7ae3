"""The CTRF status of every record, at the unit level (artifacts/ctrf.py): each outcome,
each run of a rerun task, each kind of control. The table is written out here, not
derived from the code, so changing one mapping (a harness error reported as ``failed``)
fails a test of its own."""

from __future__ import annotations

from typing import Any

import pytest
from records_support import make_record

from pytest_agentbench.artifacts.ctrf import build_ctrf, ctrf_status, ctrf_test, record_status
from pytest_agentbench.core.task_record import OUTCOMES

#: Our outcome → the CTRF status a CI reader sees. A harness error is not the model's
#: failure: it is "other", never "failed".
STATUS = {
    "passed": "passed",
    "failed": "failed",
    "timeout": "failed",
    "loop_killed": "failed",
    "length_exceeded": "failed",
    "harness_error": "other",
}


def test_the_table_covers_every_outcome() -> None:
    assert set(STATUS) == set(OUTCOMES)


@pytest.mark.parametrize("outcome", sorted(STATUS))
def test_each_outcome_has_its_status_and_keeps_it_as_raw_status(outcome: str) -> None:
    record = make_record(outcome=outcome, message="why")
    assert ctrf_status(outcome) == record_status(record) == STATUS[outcome]
    test = ctrf_test(record)
    assert (test["status"], test["rawStatus"]) == (STATUS[outcome], outcome)
    report: Any = build_ctrf(
        [record], start_ms=1, stop_ms=2, tool_version="0", run_id="r", stream=False
    )
    summary = report["results"]["summary"]
    assert summary[STATUS[outcome]] == summary["tests"] == 1
    assert sum(summary[s] for s in ("passed", "failed", "skipped", "pending", "other")) == 1


def test_the_summary_counts_every_status_of_a_mixed_run() -> None:
    records = [make_record(task_id=o, outcome=o) for o in sorted(STATUS)]
    for stream in (False, True):
        report: Any = build_ctrf(
            records, start_ms=1, stop_ms=2, tool_version="0", run_id="r", stream=stream
        )
        summary = report["results"]["summary"]
        counts = {s: summary[s] for s in ("passed", "failed", "skipped", "pending", "other")}
        assert counts == {"passed": 1, "failed": 4, "skipped": 0, "pending": 0, "other": 1}


def test_each_run_of_a_rerun_task_has_its_own_status() -> None:
    """pytest-rerunfailures: every earlier run is a retry attempt with its outcome's
    status (a run with no outcome is a harness problem: "other"); flaky when the last run
    passed after one that did not."""
    reruns = [
        {"outcome": "harness_error", "duration_ms": 5, "message": "provider 529"},
        {"outcome": "timeout", "duration_ms": 7},
        {"outcome": None, "duration_ms": 1},
        {"outcome": "failed", "duration_ms": 3},
    ]
    passed = ctrf_test(make_record(outcome="passed", reward=1.0, reruns=reruns, duration_ms=9))
    assert passed["retries"] == 4 and passed["flaky"] is True
    attempts = [(a["attempt"], a["status"], a["duration"]) for a in passed["retryAttempts"]]
    assert attempts == [
        (1, "other", 5),
        (2, "failed", 7),
        (3, "other", 1),
        (4, "failed", 3),
        (5, "passed", 9),
    ]
    assert passed["retryAttempts"][0]["message"] == "provider 529"
    again = ctrf_test(make_record(outcome="harness_error", reruns=reruns[:1]))
    assert again["status"] == "other" and again["flaky"] is False
    assert [a["status"] for a in again["retryAttempts"]] == ["other", "other"]
    # a rerun task that passed every time is not flaky
    steady = ctrf_test(make_record(outcome="passed", reruns=[{"outcome": "passed"}]))
    assert steady["status"] == "passed" and steady["flaky"] is False


def _control(expect: str, behaved: bool | None, missing: str | None = None) -> dict[str, Any]:
    return {
        "name": "positive" if expect == "pass" else "empty",
        "expect": expect,
        "source": "the target",
        "canary": False,
        "behaved": behaved,
        "missing": missing,
    }


@pytest.mark.parametrize(
    "outcome, control, status",
    [
        ("passed", _control("pass", True), "passed"),  # a positive control that passed
        ("failed", _control("pass", False), "failed"),  # a positive control that failed
        ("failed", _control("fail", True), "passed"),  # a negative one whose verdict failed
        ("passed", _control("fail", False), "failed"),  # a negative one that passed
        ("timeout", _control("fail", True), "passed"),  # any non-pass behaves for "fail"
        ("failed", _control("pass", None, "no known-good answer"), "skipped"),
        ("harness_error", _control("fail", None), "other"),  # no verdict: not judged
        ("harness_error", _control("pass", None), "other"),
    ],
)
def test_a_control_passes_when_it_behaved(
    outcome: str, control: dict[str, Any], status: str
) -> None:
    record = make_record(outcome=outcome, control=control)
    test = ctrf_test(record)
    assert record_status(record) == test["status"] == status
    assert test["rawStatus"] == outcome  # the rollout's own outcome is kept
    assert test["extra"]["pytest-agentbench.rollout"]["control"] == control
