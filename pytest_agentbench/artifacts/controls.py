"""Control records in the run reports: which records are controls, whether each behaved,
and the ``controls`` section of summary.json.

A control record is a task record with a ``control`` table (``name``, ``expect``
``pass``/``fail``, ``source``, ``canary``, ``behaved``, ``missing``). Controls are never
scored: a score is over task records only. ``behaved`` is True when the verdict is the
one expected, False when it is not (the control *misbehaved*), None when no verdict was
reached (a harness error) or no control ran (``missing``: no positive control).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from pytest_agentbench.core.jsontypes import JsonObject, JsonValue
from pytest_agentbench.core.record_parts import ControlRecord
from pytest_agentbench.core.task_record import TaskRecord
from pytest_agentbench.suites.task import ControlExpect


def task_records(records: Iterable[TaskRecord]) -> list[TaskRecord]:
    """The records that are scored: every record but the controls'."""
    return [record for record in records if record.control is None]


def control_records(records: Iterable[TaskRecord]) -> list[TaskRecord]:
    """The controls' records (calibration items of a judge are not controls)."""
    return [r for r in records if r.control is not None and not r.control.calibration]


def calibration_records(records: Iterable[TaskRecord]) -> list[TaskRecord]:
    """The records of labelled answers judged to calibrate a judge."""
    return [r for r in records if r.control is not None and r.control.calibration]


def _control(record: TaskRecord) -> ControlRecord:
    """A control record's table (its caller picked control records only)."""
    assert record.control is not None
    return record.control


def behaved(expect: ControlExpect, outcome: str) -> bool | None:
    """Whether a control with ``expect`` behaved given its rollout's outcome; None for a
    harness error (no verdict to judge)."""
    if outcome == "harness_error":
        return None
    return (outcome == "passed") == (expect == "pass")


def control_fields(
    *,
    name: str,
    expect: ControlExpect,
    source: str,
    canary: bool,
    outcome: str | None,
    missing: str = "",
    label: JsonValue = None,
) -> ControlRecord:
    """The ``control`` table of a control's record (of a calibration item: ``behaved``
    says whether the judge agreed with the person's ``label``)."""
    return ControlRecord(
        name=name,
        expect=expect,
        source=source,
        canary=canary,
        behaved=None if outcome is None else behaved(expect, outcome),
        missing=missing or None,
        label=label,
    )


def misbehaved(records: Iterable[TaskRecord]) -> list[TaskRecord]:
    """The control records whose verdict was not the expected one."""
    return [r for r in control_records(records) if _control(r).behaved is False]


def invalid_reason(records: Sequence[TaskRecord]) -> str | None:
    """Why the run's result is invalid: a canary (a negative control in a model run)
    passed, so the verifier would have passed a wrong answer; None when none did."""
    passed = [r for r in misbehaved(records) if _control(r).canary]
    if not passed:
        return None
    shown = ", ".join(f"{r.suite}::{r.task_id} [{_control(r).name}]" for r in passed)
    return f"{len(passed)} canary control(s) passed ({shown}): the verifier accepts wrong answers"


def controls_summary(records: Sequence[TaskRecord]) -> JsonObject | None:
    """summary.json's ``controls``: counts, and per task the controls that misbehaved (with
    the reason line) and the tasks without a positive control; None when no control ran."""
    controls = control_records(records)
    if not controls:
        return None
    per_task: dict[str, JsonObject] = {}
    named: dict[str, list[JsonValue]] = {}
    for record in misbehaved(controls):
        key = f"{record.suite}::{record.task_id}"
        listed = named.setdefault(key, [])
        per_task.setdefault(
            key, {"suite": record.suite, "task_id": record.task_id, "controls": listed}
        )
        listed.append(
            {"name": _control(record).name, "nodeid": record.nodeid, "reason": record.message}
        )
    missing: list[JsonValue] = [
        {"suite": r.suite, "task_id": r.task_id, "reason": _control(r).missing}
        for r in controls
        if _control(r).missing
    ]
    ran = [r for r in controls if not _control(r).missing]
    return {
        "run": len(ran),
        "behaved": sum(1 for r in ran if _control(r).behaved is True),
        "misbehaved": sum(1 for r in ran if _control(r).behaved is False),
        "errors": sum(1 for r in ran if _control(r).behaved is None),
        "canary": sum(1 for r in ran if _control(r).canary),
        "no_positive_control": len(missing),
        "misbehaving_tasks": list(per_task.values()),
        "without_positive_control": missing,
        "invalid": invalid_reason(controls),
    }
