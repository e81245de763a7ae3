"""The run's summary.json: one classification of every task, scores per suite × model."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from pytest_agentbench.artifacts.controls import (
    calibration_records,
    controls_summary,
    invalid_reason,
    task_records,
)
from pytest_agentbench.artifacts.cost_totals import batch_totals, cache_totals, run_cost
from pytest_agentbench.artifacts.jsonio import Streamed
from pytest_agentbench.artifacts.lineup import model_comparisons, reduced_score, task_samples
from pytest_agentbench.artifacts.score_stats import (
    RewardField,
    Scored,
    repair_curve,
    reward_of,
    score_stats,
)
from pytest_agentbench.artifacts.usability import unusable
from pytest_agentbench.artifacts.usage_totals import run_usage
from pytest_agentbench.core.fastclass import dataclass
from pytest_agentbench.core.jsontypes import JsonObject, JsonValue
from pytest_agentbench.core.task_record import OUTCOMES, TaskRecord
from pytest_agentbench.errors import AgentbenchError

SUMMARY_SCHEMA_VERSION = 1


def load_summary(run_dir: Path, limit: int) -> JsonObject:
    """summary.json of ``run_dir`` (at most ``limit`` bytes), read back by the merge and
    the HTML report; AgentbenchError naming the file when it is not one."""
    path = run_dir / "summary.json"
    try:
        if path.stat().st_size > limit:
            raise AgentbenchError(f"{path}: larger than {limit} bytes")
        data: JsonValue = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise AgentbenchError(
            f"{run_dir}: no summary.json (is this an agentbench run folder?)"
        ) from None
    except (OSError, ValueError) as exc:
        raise AgentbenchError(f"{path}: cannot read it: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("tasks"), list):
        raise AgentbenchError(f"{path}: not a pytest-agentbench summary (no tasks list)")
    return data


def classify(records: Iterable[Scored]) -> dict[str, int]:
    """Count tasks per outcome. Every record lands in exactly one bucket (an unknown
    outcome counts as a harness error), so the buckets always sum to the total."""
    counts: Counter[str] = Counter(dict.fromkeys(OUTCOMES, 0))
    for record in records:
        outcome = record.outcome
        counts[outcome if outcome in OUTCOMES else "harness_error"] += 1
    return dict(counts)


def score(
    records: Sequence[TaskRecord],
    field: RewardField = "reward",
    *,
    errors_as_failures: bool = False,
) -> float | None:
    """Mean reward over tasks that reached the model, harness errors excluded (or counted
    as 0 with ``errors_as_failures``); a task with no reward (timed out before a verdict)
    counts as 0. A harness error that still holds a reward for ``field`` (a later round
    failed, the first attempt's verdict stands) is scored: a harness problem never
    discards an earlier attempt. None when no task is scored."""
    scored = [r for r in records if errors_as_failures or _scored(r, field)]
    if not scored:
        return None
    rewards = [reward_of(r, field) for r in scored]
    return sum(0.0 if v is None else float(v) for v in rewards) / len(scored)


def _scored(record: TaskRecord, field: RewardField) -> bool:
    return record.outcome != "harness_error" or reward_of(record, field) is not None


def _distinct(values: Iterable[JsonObject]) -> list[JsonValue]:
    """The distinct repair (or sampling) settings in a group, so runs that differ never
    mix silently."""
    seen: list[JsonValue] = []
    for value in values:
        if value not in seen:
            seen.append(value)
    return seen


def _reduced(
    suite: str, model: str, members: Sequence[TaskRecord], errors_as_failures: bool
) -> JsonObject | None:
    """The group's score over its tasks' reduced scores (``lineup.reduced_score``); None
    when no task ran more than once, found without grouping every record by task (a
    list per task: the largest part of writing summary.json's memory)."""
    seen: set[str] = set()
    for record in members:
        task = record.task_id
        if record.epoch or task in seen:
            samples = task_samples(members)[suite, model]
            return reduced_score(samples, errors_as_failures=errors_as_failures)
        seen.add(task)
    return None


def _group_scores(
    records: Sequence[TaskRecord],
    errors_as_failures: bool = False,
    judge: JsonObject | None = None,
) -> list[JsonValue]:
    groups: dict[tuple[str, str], list[TaskRecord]] = {}
    for record in records:
        groups.setdefault((record.suite, record.model), []).append(record)
    rows: list[JsonValue] = []
    for (suite, model), members in sorted(groups.items()):
        rows.append(
            {
                "suite": suite,
                "model": model,
                "tasks": len(members),
                "outcomes": dict(classify(members)),
                "score": score(members, errors_as_failures=errors_as_failures),
                "first_try_score": score(
                    members, "first_attempt_reward", errors_as_failures=errors_as_failures
                ),
                "repair": _distinct(r.repair.to_json() for r in members),
                "sampling": _distinct(dict(r.sampling or {}) for r in members),
                "stats": score_stats(members, errors_as_failures=errors_as_failures),
                "repair_curve": repair_curve(members, errors_as_failures=errors_as_failures),
                "reduced": _reduced(suite, model, members, errors_as_failures),
                "cost": run_cost(members),
                "judge_standing": judge_standing(members, judge),
            }
        )
    return rows


@dataclass(frozen=True)
class RunFacts:
    """What the run reports (summary.json, ctrf.json) say of a run besides its records:
    made once where the run ends (session/finish.py) or is merged (artifacts/merge.py).
    ``coverage`` (artifacts/coverage.py) says how many of the planned tasks the records
    cover, None when unknown (a merge of runs); ``sections`` (the baseline comparison,
    robustness) are added to summary.json as they are."""

    run_id: str
    settings: Mapping[str, JsonValue]
    tool_version: str
    start_ms: int
    stop_ms: int
    partial: bool
    exit_status: int | None
    gate: Mapping[str, JsonValue] | None = None
    errors_as_failures: bool = False
    coverage: Mapping[str, JsonValue] | None = None
    sections: Mapping[str, JsonValue] | None = None
    margin: float | None = None


def run_totals(records: Sequence[TaskRecord], *, errors_as_failures: bool = False) -> JsonObject:
    """summary.json's ``totals`` over the scored ``records`` (controls left out already);
    its ``usage`` and ``stats`` (a bootstrap) are ctrf.json's too, computed once."""
    outcomes = classify(records)
    return {
        "tasks": len(records),
        "outcomes": dict(outcomes),
        "scored": len(records) - (0 if errors_as_failures else outcomes["harness_error"]),
        "score": score(records, errors_as_failures=errors_as_failures),
        "first_try_score": score(
            records, "first_attempt_reward", errors_as_failures=errors_as_failures
        ),
        "repaired": sum(1 for r in records if r.repaired),
        "incomplete": sum(1 for r in records if r.incomplete),
        "usage": run_usage(records),
        "cost": run_cost(records),
        "cache": cache_totals(records),
        "batch": batch_totals(records),
        "stats": score_stats(records, errors_as_failures=errors_as_failures),
        "repair_curve": repair_curve(records, errors_as_failures=errors_as_failures),
    }


def build_summary(
    records: Sequence[TaskRecord],
    run: RunFacts,
    *,
    stream: bool = False,
    totals: JsonObject | None = None,
) -> dict[str, object]:
    """The summary.json document. ``tasks`` holds every task's record as the reports saw
    it (outcome, reward, usage, reason, where its artifacts are), so shards can be merged
    and runs resumed from it alone. With ``stream`` it is a :class:`Streamed` array of the
    records themselves, not copies. Each task is its record's JSON form
    (``TaskRecord.to_json``), made as it is written. ``totals``, when given, are
    ``run_totals`` of the scored records, already made. ``run.sections`` come before
    ``tasks``. Control
    records (artifacts/controls.py) are in ``tasks`` but never in a count or a score:
    ``controls`` sums them up, and ``invalid`` says why a canary made the run invalid."""
    every = records
    records = task_records(every)
    errors_as_failures = run.errors_as_failures
    start_ms, stop_ms = run.start_ms, run.stop_ms
    judge = judge_section(every, min_kappa_of(run.settings))
    if totals is None:
        totals = run_totals(records, errors_as_failures=errors_as_failures)
    # the judge's standing beside the score it graded, where the score is read
    totals = {**totals, "judge_standing": judge_standing(records, judge)}
    out = run.settings.get("out_dir")
    folder = f"{out}/{run.run_id}" if isinstance(out, str) else run.run_id
    totals["unusable"] = unusable(records, folder)  # too many harness errors to trust it
    return {
        "schema_version": SUMMARY_SCHEMA_VERSION,
        "tool": {"name": "pytest-agentbench", "version": run.tool_version},
        "run_id": run.run_id,
        "start_ms": start_ms,
        "stop_ms": max(stop_ms, start_ms),
        "wall_s": round(max(0, stop_ms - start_ms) / 1000, 3),
        "partial": run.partial,
        "coverage": dict(run.coverage) if run.coverage is not None else None,
        "exit_status": run.exit_status,
        "settings": dict(run.settings),
        "totals": totals,
        "scores": _group_scores(records, errors_as_failures, judge),
        "comparisons": model_comparisons(
            records, errors_as_failures=errors_as_failures, margin=run.margin
        ),
        "gate": dict(run.gate) if run.gate is not None else None,
        "controls": controls_summary(every),
        "invalid": invalid_reason(every),
        "judge": judge,
        **dict(run.sections or {}),
        "tasks": Streamed(r.to_json() for r in every) if stream else [r.to_json() for r in every],
    }


def judge_section(records: Sequence[TaskRecord], min_kappa: float | None) -> JsonObject | None:
    """summary.json's ``judge`` (artifacts/judge_summary.py); None when no judge ran, and
    then the judge's modules are not even imported."""
    if not any(r.judge is not None for r in records) and not calibration_records(records):
        return None
    from pytest_agentbench.artifacts.judge_summary import judge_summary

    return judge_summary(records, min_kappa)


def judge_standing(records: Sequence[TaskRecord], judge: JsonObject | None) -> JsonObject | None:
    """The judge's standing beside a score (artifacts/judge_summary.py's ``standing``);
    None, with the judge's modules not even imported, when no judge ran."""
    if judge is None:
        return None
    from pytest_agentbench.artifacts.judge_summary import standing

    return standing(records, judge)


def min_kappa_of(settings: Mapping[str, JsonValue]) -> float | None:
    """``--agentbench-judge-min-kappa`` as summary.json's settings record it."""
    value = settings.get("judge_min_kappa")
    return float(value) if isinstance(value, int | float) else None
