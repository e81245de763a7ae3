"""Write the run-level reports: ctrf.json and summary.json, atomically."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from pytest_agentbench.artifacts.controls import invalid_reason, task_records
from pytest_agentbench.artifacts.ctrf import build_ctrf
from pytest_agentbench.artifacts.jsonio import write_json_atomic
from pytest_agentbench.artifacts.summary import (
    RunFacts,
    build_summary,
    judge_section,
    min_kappa_of,
    run_totals,
)
from pytest_agentbench.core.task_record import RunSummary, TaskRecord


def write_run_reports(run_dir: Path, records: Sequence[TaskRecord], run: RunFacts) -> RunSummary:
    """Write ``ctrf.json`` and ``summary.json`` for ``records`` into ``run_dir``, one test
    and one task at a time (a 10 000-task run never holds either report whole); return
    the summary (its ``tasks`` are the records themselves). The run's totals (its usage,
    and its score statistics, a bootstrap) are made once, for both files."""
    scored = task_records(records)  # controls are reported, never scored
    totals = run_totals(scored, errors_as_failures=run.errors_as_failures)
    ctrf = build_ctrf(
        records,
        start_ms=run.start_ms,
        stop_ms=run.stop_ms,
        tool_version=run.tool_version,
        run_id=run.run_id,
        extra={
            "partial": run.partial,
            "coverage": dict(run.coverage) if run.coverage is not None else None,
            "fingerprint": run.settings.get("fingerprint"),
            "usage": totals["usage"],
            "cost": totals["cost"],
            "stats": totals["stats"],
            "invalid": invalid_reason(records),
            "judge": judge_section(records, min_kappa_of(run.settings)),
        },
        stream=True,
    )
    write_json_atomic(run_dir / "ctrf.json", ctrf, indent=None)
    summary = build_summary(records, run, stream=True, totals=totals)
    write_json_atomic(run_dir / "summary.json", summary, indent=None)
    written = RunSummary.from_json({**summary, "tasks": []})  # all JSON but the tasks
    return replace(written, tasks=list(records))
