"""What people read about controls: the reason line of a control that misbehaved, and
the controls block of the terminal summary."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pytest_agentbench.artifacts.controls import control_records, invalid_reason, misbehaved
from pytest_agentbench.core.jsontypes import JsonValue
from pytest_agentbench.core.record_parts import ControlRecord
from pytest_agentbench.core.task_record import TaskRecord
from pytest_agentbench.report.evidence import MAX_FAILURE_LINES, failure_reason

#: How many misbehaving controls the terminal lists before "… and N more".
MAX_CONTROL_LINES = 2 * MAX_FAILURE_LINES


def _control(record: TaskRecord) -> ControlRecord:
    assert record.control is not None  # the callers pick control records
    return record.control


def control_message(record: TaskRecord) -> str:
    """The reason line of a control that misbehaved (without the task name): which
    control, what it means for the suite, and the verifier's evidence."""
    control = _control(record)
    name, source = control.name, control.source
    evidence = failure_reason(record)
    if control.expect == "pass":
        what = f"positive control failed (answer from {source})"
    else:
        what = f"negative control {name} passed ({source})"
    from pytest_agentbench.suites.controls import MEANING

    meaning = MEANING.get(name, "")
    return f"{what}: {meaning} — {evidence}" if meaning else f"{what} — {evidence}"


def control_label(record: TaskRecord) -> str:
    return f"{record.suite}::{record.task_id} [{_control(record).name}]"


def control_lines(records: Sequence[TaskRecord]) -> list[str]:
    """The controls block: counts, one ``✗`` line per control that misbehaved (at most
    MAX_CONTROL_LINES), the tasks with no positive control, and the invalid-run line of a
    canary that passed. Empty when no control ran."""
    controls = control_records(records)
    if not controls:
        return []
    ran = [r for r in controls if not _control(r).missing]
    missing = [r for r in controls if _control(r).missing]
    bad = misbehaved(controls)
    errors = sum(1 for r in ran if _control(r).behaved is None)
    parts = [f"{len(ran) - len(bad) - errors} behaved", f"{len(bad)} misbehaved"]
    if errors:
        parts.append(f"{errors} harness error(s)")
    if missing:
        parts.append(f"{len(missing)} task(s) with no positive control")
    lines = [f"controls: {len(ran)} run — " + ", ".join(parts)]
    for record in bad[:MAX_CONTROL_LINES]:
        lines.append(f"✗ {control_label(record)}: {record.message or control_message(record)}")
    if len(bad) > MAX_CONTROL_LINES:
        lines.append(f"… and {len(bad) - MAX_CONTROL_LINES} more")
    for record in missing[:MAX_FAILURE_LINES]:
        lines.append(f"? {record.suite}::{record.task_id}: {_control(record).missing}")
    if len(missing) > MAX_FAILURE_LINES:
        lines.append(f"… and {len(missing) - MAX_FAILURE_LINES} more without a positive control")
    reason = invalid_reason(controls)
    if reason:
        lines.append(f"RESULT INVALID: {reason}")
    return lines


def judge_block(judge: JsonValue | None) -> list[str]:
    """The judge block of the terminal and Markdown summaries (report/judges.py); empty,
    with the judge's modules not even imported, when no judge ran."""
    if not isinstance(judge, Mapping):
        return []
    from pytest_agentbench.report.judges import judge_lines

    return judge_lines(judge)


def standing_mark(standing: JsonValue | None, *, short: bool = False) -> str:
    """The mark a judged score carries (report/judges.py's ``standing_text``); empty, with
    the judge's modules not even imported, when no judge graded it."""
    if not isinstance(standing, Mapping):
        return ""
    from pytest_agentbench.report.judges import standing_text

    return standing_text(standing, short=short)
