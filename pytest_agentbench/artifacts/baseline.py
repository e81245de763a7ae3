"""Read an earlier run folder as a baseline: its run id and its task records.

A run folder holds ``summary.json`` (with every task record) and ``tasks/<suite>/<task>/
result.json`` (each with its ``record``). The summary is read when there is one; a run
that ended before writing it (killed, out of disk) is read from its result.json files.
"""

from __future__ import annotations

import json
from pathlib import Path

from pytest_agentbench.core.fastclass import dataclass
from pytest_agentbench.core.jsontypes import JsonValue
from pytest_agentbench.core.task_record import TaskRecord
from pytest_agentbench.errors import AgentbenchError

MAX_BASELINE_BYTES = 256 * 1024 * 1024


@dataclass(frozen=True)
class BaselineRun:
    """An earlier run: where it is, its id, and its task records."""

    path: Path
    run_id: str
    records: tuple[TaskRecord, ...]


def _read_json(path: Path, what: str) -> JsonValue:
    try:
        if path.stat().st_size > MAX_BASELINE_BYTES:
            raise AgentbenchError(
                f"--agentbench-baseline: {path}: larger than {MAX_BASELINE_BYTES} bytes"
            )
        data: JsonValue = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise AgentbenchError(f"--agentbench-baseline: cannot read {what} {path}: {exc}") from None
    return data


def _record(data: object, where: str) -> TaskRecord:
    try:
        return TaskRecord.from_json(data)
    except ValueError as exc:
        raise AgentbenchError(
            f"--agentbench-baseline: {where}: not a pytest-agentbench task record ({exc})"
        ) from None


def load_baseline(path: Path) -> BaselineRun:
    """The run folder at ``path`` (or the summary.json file itself) as a baseline.
    AgentbenchError naming the path and what was expected when it is not one."""
    if path.is_file() and path.name == "summary.json":
        path = path.parent
    if not path.is_dir():
        what = "does not exist" if not path.exists() else "is not a folder"
        raise AgentbenchError(
            f"--agentbench-baseline: {path} {what}; expected an earlier run folder "
            "(one holding summary.json, e.g. agentbench-results/<run-id>)"
        )
    summary_path = path / "summary.json"
    if summary_path.is_file():
        data = _read_json(summary_path, "the summary")
        tasks = data.get("tasks") if isinstance(data, dict) else None
        if not isinstance(data, dict) or not isinstance(tasks, list):
            raise AgentbenchError(
                f"--agentbench-baseline: {summary_path}: not a pytest-agentbench summary "
                "(expected a JSON object with a tasks list)"
            )
        records = tuple(
            _record(task, f"{summary_path} tasks[{index}]") for index, task in enumerate(tasks)
        )
        return BaselineRun(path, str(data.get("run_id") or path.name), records)
    results = sorted((path / "tasks").glob("*/*/result.json"))
    if not results:
        raise AgentbenchError(
            f"--agentbench-baseline: {path} is not a run folder: it holds neither summary.json "
            "nor tasks/<suite>/<task>/result.json"
        )
    found = []
    for result in results:
        data = _read_json(result, "the result")
        record = data.get("record") if isinstance(data, dict) else None
        found.append(_record(record, str(result)))
    return BaselineRun(path, path.name, tuple(found))
