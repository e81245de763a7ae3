"""What people read about controls: the reason line of a control that misbehaved, and
the controls block of the terminal summary."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pytest_agentbench.artifacts.controls import control_records, invalid_reason, misbehaved
from pytest_agentbench.report.evidence import MAX_FAILURE_LINES, failure_reason
from pytest_agentbench.suites.controls import MEANING

#: How many misbehaving controls the terminal lists before "… and N more".
MAX_CONTROL_LINES = 2 * MAX_FAILURE_LINES


def control_message(record: Mapping[str, Any]) -> str:
    """The reason line of a control that misbehaved (without the task name): which
    control, what it means for the suite, and the verifier's evidence."""
    control = record["control"]
    name, source = control.get("name"), control.get("source")
    evidence = failure_reason(record)
    if control.get("expect") == "pass":
        what = f"positive control failed (answer from {source})"
    else:
        what = f"negative control {name} passed ({source})"
    meaning = MEANING.get(str(name), "")
    return f"{what}: {meaning} — {evidence}" if meaning else f"{what} — {evidence}"


def control_label(record: Mapping[str, Any]) -> str:
    return f"{record.get('suite')}::{record.get('task_id')} [{record['control'].get('name')}]"


def control_lines(records: Sequence[Mapping[str, Any]]) -> list[str]:
    """The controls block: counts, one ``✗`` line per control that misbehaved (at most
    MAX_CONTROL_LINES), the tasks with no positive control, and the invalid-run line of a
    canary that passed. Empty when no control ran."""
    controls = control_records(records)
    if not controls:
        return []
    ran = [r for r in controls if not r["control"].get("missing")]
    missing = [r for r in controls if r["control"].get("missing")]
    bad = misbehaved(controls)
    errors = sum(1 for r in ran if r["control"].get("behaved") is None)
    parts = [f"{len(ran) - len(bad) - errors} behaved", f"{len(bad)} misbehaved"]
    if errors:
        parts.append(f"{errors} harness error(s)")
    if missing:
        parts.append(f"{len(missing)} task(s) with no positive control")
    lines = [f"controls: {len(ran)} run — " + ", ".join(parts)]
    for record in bad[:MAX_CONTROL_LINES]:
        lines.append(
            f"✗ {control_label(record)}: {record.get('message') or control_message(record)}"
        )
    if len(bad) > MAX_CONTROL_LINES:
        lines.append(f"… and {len(bad) - MAX_CONTROL_LINES} more")
    for record in missing[:MAX_FAILURE_LINES]:
        lines.append(
            f"? {record.get('suite')}::{record.get('task_id')}: {record['control']['missing']}"
        )
    if len(missing) > MAX_FAILURE_LINES:
        lines.append(f"… and {len(missing) - MAX_FAILURE_LINES} more without a positive control")
    reason = invalid_reason(controls)
    if reason:
        lines.append(f"RESULT INVALID: {reason}")
    return lines
