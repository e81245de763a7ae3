"""Build the run's CTRF report (spec 0.0.0) from task records.

Statuses: passed / failed / other (harness errors) / skipped; our own outcome goes in
``rawStatus`` and our data under the namespaced ``extra`` key ``pytest-agentbench.rollout``.
"""

from __future__ import annotations

import platform
import sys
from collections.abc import Iterable, Mapping, Sequence

from pytest_agentbench.artifacts.jsonio import Streamed
from pytest_agentbench.core.jsontypes import JsonObject, JsonValue
from pytest_agentbench.core.record_parts import Rerun
from pytest_agentbench.core.records import CTRF_STATUSES, CtrfStatus
from pytest_agentbench.core.task_record import TaskRecord

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


def record_status(record: TaskRecord) -> CtrfStatus:
    """The CTRF status of a record: its outcome's, except that a control passes when it
    behaved (a negative control's failed verdict is a pass), fails when it misbehaved and
    is skipped when it could not run (no positive control)."""
    status = ctrf_status(record.outcome)
    control = record.control
    if control is None or status == "other":
        return status
    if control.calibration:  # a measurement of the judge: agreeing or not, it ran
        return "passed"
    behaved = control.behaved
    return "skipped" if behaved is None else "passed" if behaved else "failed"


def ctrf_test(record: TaskRecord) -> JsonObject:
    """One ``results.tests[]`` entry."""
    start = record.start_ms
    duration = max(0, record.duration_ms)
    outcome = record.outcome
    control = record.control
    status = record_status(record)
    test: JsonObject = {
        "name": record.nodeid,
        "status": status,
        "duration": duration,
        "rawStatus": outcome,
        "suite": [record.suite or "agentbench"],
        "filePath": record.file,
        "type": "benchmark",
    }
    if start > 0:
        test["start"] = start
        test["stop"] = start + duration
    if (status != "passed" or outcome != "passed") and record.message:
        test["message"] = record.message
    if record.trace:
        test["trace"] = record.trace
    if record.resumed:
        test["tags"] = ["resumed"]
    reruns = record.reruns
    if reruns:
        test.update(_retries(reruns, status, duration))
    loop, failure = record.loop, record.failure
    test["extra"] = {
        EXTRA_KEY: {
            "schema_version": record.schema_version,
            "reward": record.reward,
            "first_attempt_reward": record.first_attempt_reward,
            "outcome": outcome,
            "model": record.model,
            "epoch": record.epoch,
            "attempts": record.attempts,
            "repaired": record.repaired,
            "repair": record.repair.to_json(),
            "sampling": record.sampling,
            "max_tokens": record.max_tokens,
            "reruns": None if reruns is None else [run.to_json() for run in reruns],
            "usage": record.usage.to_json(),
            "loop": None if loop is None else loop.to_json(),
            "rollout_dir": record.rollout_dir,
            "failure": None if failure is None else failure.to_json(),
            "control": None if control is None else control.to_json(),
            "cost": None if record.cost is None else record.cost.to_json(),
            "cached": record.cached,
            "batch": record.batch,
            "judge": record.judge,
        }
    }
    return test


def _retries(reruns: Sequence[Rerun], status: CtrfStatus, duration: int) -> JsonObject:
    """CTRF's view of a rerun task (pytest-rerunfailures): ``retries``, every run as a
    ``retryAttempts`` entry (1 = the first run, the last = the run reported), ``flaky``
    when the reported run passed after a run that did not."""
    attempts: list[JsonValue] = []
    flaky = False
    for number, run in enumerate(reruns, start=1):
        run_status = ctrf_status(run.outcome or "harness_error")
        flaky = flaky or run_status != "passed"
        attempt: JsonObject = {
            "attempt": number,
            "status": run_status,
            "duration": max(0, run.duration_ms or 0),
        }
        if run.message:
            attempt["message"] = run.message
        attempts.append(attempt)
    final: JsonObject = {"attempt": len(reruns) + 1, "status": status, "duration": duration}
    return {
        "retries": len(reruns),
        "retryAttempts": [*attempts, final],
        "flaky": status == "passed" and flaky,
    }


def build_ctrf(
    records: Iterable[TaskRecord],
    *,
    start_ms: int,
    stop_ms: int,
    tool_version: str,
    run_id: str,
    extra: Mapping[str, JsonValue] | None = None,
    stream: bool = False,
) -> dict[str, object]:
    """The whole report. Counts are derived from the tests' statuses, so they always
    agree. With ``stream`` the tests are a :class:`Streamed` array, each made as it is
    written (records must then be a sequence, read twice)."""
    counts: dict[str, int] = dict.fromkeys(CTRF_STATUSES, 0)
    if stream:
        records = records if isinstance(records, Sequence) else list(records)
        for record in records:
            counts[record_status(record)] += 1
        total = len(records)
        tests: Streamed | list[JsonObject] = Streamed(ctrf_test(r) for r in records)
    else:
        made = []
        for record in records:
            counts[record_status(record)] += 1
            made.append(ctrf_test(record))
        tests, total = made, len(made)
    stop_ms = max(stop_ms, start_ms)
    summary: dict[str, int] = {"tests": total, **counts, "start": start_ms, "stop": stop_ms}
    return {
        "reportFormat": "CTRF",
        "specVersion": SPEC_VERSION,
        "generatedBy": "pytest-agentbench",
        "results": {
            "tool": {"name": "pytest-agentbench", "version": tool_version},
            "summary": summary,
            "tests": tests,
            "environment": {
                "reportName": f"agentbench run {run_id}",
                "osPlatform": sys.platform,
                "osRelease": platform.release(),
                "extra": {"pytest-agentbench.run": {"run_id": run_id, **(extra or {})}},
            },
        },
    }
