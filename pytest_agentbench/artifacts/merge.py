"""Merge the runs of several shards (or machines) into one ctrf.json and summary.json."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pytest_agentbench.artifacts.coverage import run_coverage
from pytest_agentbench.artifacts.reports import write_run_reports
from pytest_agentbench.artifacts.summary import RunFacts, load_summary
from pytest_agentbench.core.jsontypes import JsonObject, JsonValue
from pytest_agentbench.core.task_record import RunSummary, TaskRecord
from pytest_agentbench.errors import AgentbenchError

MERGE_SUMMARY_LIMIT = 256 * 1024 * 1024


def merge_runs(
    run_dirs: Sequence[Path], out_dir: Path, *, force: bool = False, tool_version: str
) -> RunSummary:
    """Write the merged reports of ``run_dirs`` into ``out_dir`` and return the summary.

    Runs whose settings fingerprints differ are refused unless ``force``: their scores are
    not comparable. A task present in several runs (a shard run twice) keeps its last
    record, in the order the runs are given.
    """
    if not run_dirs:
        raise AgentbenchError("merge: name at least one run folder")
    summaries = [(run_dir, load_summary(run_dir, MERGE_SUMMARY_LIMIT)) for run_dir in run_dirs]
    fingerprints = {str(_fingerprint(summary)) for _, summary in summaries}
    if len(fingerprints) > 1 and not force:
        listed = ", ".join(f"{run_dir}: {_fingerprint(summary)}" for run_dir, summary in summaries)
        raise AgentbenchError(
            "merge: the runs were made with different settings (fingerprints "
            f"{listed}); their scores do not compare. Pass --force to merge anyway."
        )
    records: dict[str, TaskRecord] = {}
    for run_dir, summary in summaries:
        tasks = summary["tasks"]  # a list: load_summary checked it
        for index, data in enumerate(tasks if isinstance(tasks, list) else []):
            try:
                record = TaskRecord.from_json(data)
            except ValueError as exc:
                raise AgentbenchError(
                    f"{run_dir / 'summary.json'}: tasks[{index}] is not a task record: {exc}"
                ) from None
            records[record.nodeid] = record
    first = summaries[0][1]
    starts = [_int(s.get("start_ms")) for _, s in summaries]
    stops = [_int(s.get("stop_ms")) for _, s in summaries]
    settings = dict(_object(first.get("settings")))
    if len(fingerprints) > 1:
        settings["fingerprint"] = "mixed"
    partial, coverage = _merged_coverage([summary for _, summary in summaries], len(records))
    out_dir.mkdir(parents=True, exist_ok=True)
    facts = RunFacts(
        run_id="merged-" + "+".join(str(s.get("run_id")) for _, s in summaries),
        settings=settings,
        tool_version=tool_version,
        start_ms=min(starts),
        stop_ms=max(stops),
        partial=partial,
        coverage=coverage,
        exit_status=None,
        errors_as_failures=bool(settings.get("errors_as_failures")),
    )
    return write_run_reports(out_dir, list(records.values()), facts)


def _merged_coverage(summaries: Sequence[JsonObject], tasks: int) -> tuple[bool, JsonObject | None]:
    """Whether the merged run is partial, and its coverage. Each run planned the same
    tasks when it is a selection (pytest-split groups: planned = the whole suite), or its
    own shard (--agentbench-shard: planned = its tasks), so the merge planned the largest
    of them and covers every merged record and skipped task. Runs from before coverage was
    recorded: partial when any run was."""
    found = [s.get("coverage") for s in summaries]
    if not all(isinstance(c, dict) for c in found):
        return any(bool(s.get("partial")) for s in summaries), None
    coverages = [c for c in found if isinstance(c, dict)]
    interrupted = any("interrupted" in _list(c.get("reasons")) for c in coverages)
    planned = max(_int(c.get("planned")) for c in coverages)
    skipped = sum(_int(c.get("skipped")) for c in coverages)
    coverage = run_coverage(
        tasks=tasks,
        selected=planned,
        deselected=0,
        interrupted=interrupted,
        skipped=skipped,
    )
    return bool(coverage["partial"]), coverage


def _object(value: JsonValue | None) -> JsonObject:
    """``value`` when it is a JSON object, else an empty one."""
    return value if isinstance(value, dict) else {}


def _list(value: JsonValue | None) -> list[JsonValue]:
    """``value`` when it is a JSON array, else an empty one."""
    return value if isinstance(value, list) else []


def _fingerprint(summary: JsonObject) -> JsonValue:
    """The settings fingerprint a summary.json was made under (None when it has none)."""
    return _object(summary.get("settings")).get("fingerprint")


def _int(value: JsonValue | None) -> int:
    """``int(value or 0)`` of a summary's number (TypeError when it is none)."""
    if not value:
        return 0
    if isinstance(value, int | float | str):
        return int(value)
    raise TypeError(f"not a number: {value!r}")
