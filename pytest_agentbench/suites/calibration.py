"""Calibrating a judge: answers people labelled, judged like any answer.

A labels file is JSONL (one object a line: ``task`` (or ``task_id``), ``answer``,
``label``, optionally ``suite``) or CSV with those columns in a header row. Each row
naming a judged task of a suite file becomes a calibration item of that file: a copy of
the task whose scripted reply is the labelled answer (played by the scripted provider,
no model under test), judged by the run's judge. The person's label says what the judge
should have found: ``pass``/``fail`` (also ``true``/``false``, ``1``/``0``) on a
pass/fail scale, an integer 1–N on a 1–N scale (passing when it maps to at least the
task's pass threshold).
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from pathlib import Path

from pytest_agentbench.core.fastclass import dataclass
from pytest_agentbench.core.jsontypes import JsonValue
from pytest_agentbench.errors import SuiteError
from pytest_agentbench.suites.controls import Planned, control_run
from pytest_agentbench.suites.task import CALIBRATION_PREFIX, Control, ControlExpect, Task

#: The largest labels file read.
MAX_LABELS_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class Label:
    """One labelled answer: where it was written, which task, the answer and the label."""

    path: Path
    line: int
    task: str
    answer: str
    label: JsonValue
    suite: str | None = None


def load_labels(path: Path) -> list[Label]:
    """The rows of a labels file; SuiteError naming the file and line of each bad row."""
    try:
        if path.stat().st_size > MAX_LABELS_BYTES:
            raise SuiteError(str(path), [f"larger than {MAX_LABELS_BYTES} bytes"])
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SuiteError(str(path), [f"cannot read the labels file: {exc}"]) from None
    except UnicodeDecodeError as exc:
        raise SuiteError(str(path), [f"not UTF-8 text: {exc}"]) from None
    rows: list[tuple[int, dict[str, JsonValue]]] = []
    problems: list[str] = []
    if path.suffix.lower() == ".csv":
        reader = csv.DictReader(io.StringIO(text))
        for number, row in enumerate(reader, start=2):
            rows.append((number, {k.strip(): v for k, v in row.items() if k is not None}))
    else:
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                data: JsonValue = json.loads(line)
            except json.JSONDecodeError as exc:
                problems.append(f"line {number}: not JSON ({exc.msg})")
                continue
            if not isinstance(data, dict):
                problems.append(f"line {number}: expected a JSON object")
                continue
            rows.append((number, data))
    labels: list[Label] = []
    for number, row in rows:
        task = row.get("task", row.get("task_id"))
        answer, label, suite = row.get("answer"), row.get("label"), row.get("suite")
        if not isinstance(task, str) or not task:
            problems.append(f"line {number}: 'task' (the task id) must be a non-empty string")
        elif not isinstance(answer, str):
            problems.append(f"line {number}: 'answer' must be a string")
        elif label is None or label == "":
            problems.append(f"line {number}: 'label' is missing")
        else:
            named = suite if isinstance(suite, str) and suite else None
            labels.append(Label(path, number, task, answer, label, named))
    if problems:
        raise SuiteError(str(path), problems)
    return labels


def scale_of(task: Task) -> int | None:
    """N of the judge task's 1–N scale; None for pass/fail."""
    scale = task.verifier.options.get("scale")
    return scale if isinstance(scale, int) and not isinstance(scale, bool) else None


def label_value(task: Task, raw: JsonValue) -> str | int:
    """A label read on the task's scale (``pass``/``fail``, or 1–N); ValueError saying
    what was expected."""
    points = scale_of(task)
    if points is None:
        text = str(raw).strip().lower()
        if text in ("pass", "true", "1", "yes"):
            return "pass"
        if text in ("fail", "false", "0", "no"):
            return "fail"
        raise ValueError(f"label {raw!r} is not pass or fail")
    try:
        value = int(str(raw).strip()) if not isinstance(raw, bool) else -1
    except ValueError:
        value = -1
    if not 1 <= value <= points:
        raise ValueError(f"label {raw!r} is not an integer from 1 to {points}")
    return value


def label_passes(task: Task, value: str | int) -> bool:
    """Whether a label means the answer should pass the task."""
    points = scale_of(task)
    if points is None:
        return value == "pass"
    return (int(value) - 1) / (points - 1) >= task.pass_threshold


def plan_calibration(tasks: Sequence[Task], labels: Sequence[Label]) -> list[Planned]:
    """The calibration items of one suite file: one per row naming one of its judged
    tasks (by id, and by suite name when the row gives one)."""
    by_id = {task.id: task for task in tasks if task.verifier.kind == "judge"}
    planned: list[Planned] = []
    problems: list[str] = []
    for row in labels:
        task = by_id.get(row.task)
        if task is None or (row.suite is not None and row.suite != task.suite):
            continue
        try:
            value = label_value(task, row.label)
        except ValueError as exc:
            problems.append(f"line {row.line} (task {row.task!r}): {exc}")
            continue
        expect: ControlExpect = "pass" if label_passes(task, value) else "fail"
        control = Control(
            f"{CALIBRATION_PREFIX}{row.line}",
            expect,
            f"{row.path.name}:{row.line}",
            label=value,
        )
        planned.append(Planned(task, control, control_run(task, control, (row.answer,))))
    if problems and labels:
        raise SuiteError(str(labels[0].path), problems)
    return planned
