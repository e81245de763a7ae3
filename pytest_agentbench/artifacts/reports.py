"""Write the run-level reports: ctrf.json and summary.json, atomically."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from pytest_agentbench.artifacts.controls import invalid_reason, task_records
from pytest_agentbench.artifacts.ctrf import build_ctrf
from pytest_agentbench.artifacts.jsonio import write_json_atomic
from pytest_agentbench.artifacts.judge_summary import judge_summary
from pytest_agentbench.artifacts.score_stats import score_stats
from pytest_agentbench.artifacts.summary import build_summary, min_kappa_of
from pytest_agentbench.artifacts.usage_totals import run_usage
from pytest_agentbench.core.jsontypes import JsonValue
from pytest_agentbench.core.task_record import RunSummary, TaskRecord


def write_run_reports(
    run_dir: Path,
    records: Sequence[TaskRecord],
    *,
    run_id: str,
    settings: Mapping[str, JsonValue],
    tool_version: str,
    start_ms: int,
    stop_ms: int,
    partial: bool,
    exit_status: int | None,
    gate: Mapping[str, JsonValue] | None = None,
    errors_as_failures: bool = False,
    coverage: Mapping[str, JsonValue] | None = None,
    sections: Mapping[str, JsonValue] | None = None,
) -> RunSummary:
    """Write ``ctrf.json`` and ``summary.json`` for ``records`` into ``run_dir``, one test
    and one task at a time (a 10 000-task run never holds either report whole); return
    the summary (its ``tasks`` are the records themselves). ``sections`` are added to
    summary.json as they are (the baseline comparison, robustness)."""
    scored = task_records(records)  # controls are reported, never scored
    ctrf = build_ctrf(
        records,
        start_ms=start_ms,
        stop_ms=stop_ms,
        tool_version=tool_version,
        run_id=run_id,
        extra={
            "partial": partial,
            "coverage": dict(coverage) if coverage is not None else None,
            "fingerprint": settings.get("fingerprint"),
            "usage": run_usage(scored),
            "stats": score_stats(scored, errors_as_failures=errors_as_failures),
            "invalid": invalid_reason(records),
            "judge": judge_summary(records, min_kappa_of(settings)),
        },
        stream=True,
    )
    write_json_atomic(run_dir / "ctrf.json", ctrf, indent=None)
    summary = build_summary(
        records,
        run_id=run_id,
        settings=settings,
        tool_version=tool_version,
        start_ms=start_ms,
        stop_ms=stop_ms,
        partial=partial,
        exit_status=exit_status,
        gate=gate,
        errors_as_failures=errors_as_failures,
        coverage=coverage,
        stream=True,
        sections=sections,
    )
    write_json_atomic(run_dir / "summary.json", summary, indent=None)
    written = RunSummary.from_json({**summary, "tasks": []})  # all JSON but the tasks
    return replace(written, tasks=list(records))
