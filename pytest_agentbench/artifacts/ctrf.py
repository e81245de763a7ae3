"""Build the run's CTRF report (spec 0.0.0) from task records.

Statuses: passed / failed / other (harness errors) / skipped; our own outcome goes in
``rawStatus`` and our data under the namespaced ``extra`` key ``pytest-agentbench.rollout``.
"""

from __future__ import annotations

import platform
import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pytest_agentbench.artifacts.jsonio import Streamed
from pytest_agentbench.core.records import CTRF_STATUSES, CtrfStatus

SPEC_VERSION = "0.0.0"
EXTRA_KEY = "pytest-agentbench.rollout"


def ctrf_status(outcome: str) -> CtrfStatus:
    """The CTRF status of one of our outcomes."""
    if outcome == "passed":
        return "passed"
    if outcome == "harness_error":
        return "other"
    if outcome == "skipped":
        return "skipped"
    return "failed"


def record_status(record: Mapping[str, Any]) -> CtrfStatus:
    """The CTRF status of a record: its outcome's, except that a control passes when it
    behaved (a negative control's failed verdict is a pass), fails when it misbehaved and
    is skipped when it could not run (no positive control)."""
    status = ctrf_status(str(record.get("outcome") or "harness_error"))
    control = record.get("control")
    if not isinstance(control, Mapping) or status == "other":
        return status
    behaved = control.get("behaved")
    return "skipped" if behaved is None else "passed" if behaved else "failed"


def ctrf_test(record: Mapping[str, Any]) -> dict[str, Any]:
    """One ``results.tests[]`` entry."""
    start = int(record.get("start_ms") or 0)
    duration = max(0, int(record.get("duration_ms") or 0))
    outcome = str(record.get("outcome") or "harness_error")
    control = record.get("control")
    status = record_status(record)
    test: dict[str, Any] = {
        "name": record["nodeid"],
        "status": status,
        "duration": duration,
        "rawStatus": outcome,
        "suite": [str(record.get("suite") or "agentbench")],
        "filePath": str(record.get("file") or ""),
        "type": "benchmark",
    }
    if start > 0:
        test["start"] = start
        test["stop"] = start + duration
    if (status != "passed" or outcome != "passed") and record.get("message"):
        test["message"] = str(record["message"])
    if record.get("trace"):
        test["trace"] = str(record["trace"])
    if record.get("resumed"):
        test["tags"] = ["resumed"]
    reruns = record.get("reruns")
    if isinstance(reruns, list) and reruns:
        test.update(_retries(reruns, test))
    test["extra"] = {
        EXTRA_KEY: {
            "schema_version": record.get("schema_version"),
            "reward": record.get("reward"),
            "first_attempt_reward": record.get("first_attempt_reward"),
            "outcome": outcome,
            "model": record.get("model"),
            "epoch": record.get("epoch"),
            "attempts": record.get("attempts"),
            "repaired": record.get("repaired"),
            "repair": record.get("repair"),
            "sampling": record.get("sampling"),
            "max_tokens": record.get("max_tokens"),
            "reruns": record.get("reruns"),
            "usage": record.get("usage"),
            "loop": record.get("loop"),
            "rollout_dir": record.get("rollout_dir"),
            "failure": record.get("failure"),
            "control": dict(control) if isinstance(control, Mapping) else None,
        }
    }
    return test


def _retries(reruns: Sequence[Any], test: Mapping[str, Any]) -> dict[str, Any]:
    """CTRF's view of a rerun task (pytest-rerunfailures): ``retries``, every run as a
    ``retryAttempts`` entry (1 = the first run, the last = the run reported), ``flaky``
    when the reported run passed after a run that did not."""
    runs = [run for run in reruns if isinstance(run, Mapping)]
    attempts = []
    for number, run in enumerate(runs, start=1):
        attempt: dict[str, Any] = {
            "attempt": number,
            "status": ctrf_status(str(run.get("outcome") or "harness_error")),
            "duration": max(0, int(run.get("duration_ms") or 0)),
        }
        if run.get("message"):
            attempt["message"] = str(run["message"])
        attempts.append(attempt)
    final = {"attempt": len(runs) + 1, "status": test["status"], "duration": test["duration"]}
    flaky = test["status"] == "passed" and any(a["status"] != "passed" for a in attempts)
    return {"retries": len(runs), "retryAttempts": [*attempts, final], "flaky": flaky}


def build_ctrf(
    records: Iterable[Mapping[str, Any]],
    *,
    start_ms: int,
    stop_ms: int,
    tool_version: str,
    run_id: str,
    extra: Mapping[str, Any] | None = None,
    stream: bool = False,
) -> dict[str, Any]:
    """The whole report. Counts are derived from the tests' statuses, so they always
    agree. With ``stream`` the tests are a :class:`Streamed` array, each made as it is
    written (records must then be a sequence, read twice)."""
    counts = dict.fromkeys(CTRF_STATUSES, 0)
    if stream:
        records = records if isinstance(records, Sequence) else list(records)
        for record in records:
            counts[record_status(record)] += 1
        total = len(records)
        tests: Any = Streamed(ctrf_test(r) for r in records)
    else:
        tests = [ctrf_test(r) for r in records]
        for test in tests:
            counts[test["status"]] += 1
        total = len(tests)
    stop_ms = max(stop_ms, start_ms)
    return {
        "reportFormat": "CTRF",
        "specVersion": SPEC_VERSION,
        "generatedBy": "pytest-agentbench",
        "results": {
            "tool": {"name": "pytest-agentbench", "version": tool_version},
            "summary": {"tests": total, **counts, "start": start_ms, "stop": stop_ms},
            "tests": tests,
            "environment": {
                "reportName": f"agentbench run {run_id}",
                "osPlatform": sys.platform,
                "osRelease": platform.release(),
                "extra": {"pytest-agentbench.run": {"run_id": run_id, **(extra or {})}},
            },
        },
    }
