"""The agentbench section of the terminal summary, as lines (the plugin prints them)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from pytest_agentbench.artifacts.controls import task_records
from pytest_agentbench.artifacts.cost_totals import batch_totals, cache_totals, run_cost
from pytest_agentbench.artifacts.score_stats import interval_text, score_estimate
from pytest_agentbench.artifacts.summary import classify, judge_section, judge_standing, score
from pytest_agentbench.artifacts.usability import unusable
from pytest_agentbench.artifacts.usage_totals import run_usage, whole_input
from pytest_agentbench.core.cost import money
from pytest_agentbench.core.jsontypes import JsonObject, JsonValue
from pytest_agentbench.core.task_record import TaskRecord
from pytest_agentbench.report.controls import control_lines, judge_block, standing_mark
from pytest_agentbench.report.evidence import (
    MAX_FAILURE_LINES,
    details_pointer,
    failure_reason,
    order_failures,
    shown_failures,
)

_LABELS = {
    "passed": "passed",
    "failed": "failed",
    "timeout": "timed out",
    "loop_killed": "loop killed",
    "length_exceeded": "length exceeded",
    "harness_error": "harness error(s)",
}


def tokens_text(totals: Mapping[str, JsonValue]) -> str:
    """The run's tokens in words, from artifacts.usage_totals.run_usage: the whole input
    (with cache reads and writes), the output (with reasoning), the total, and how many
    tasks did not report a field the sums need."""
    parts = []
    whole = whole_input(totals)
    if whole is not None:
        cached = [
            f"{count:,} {label}"
            for name, label in (("cache_read", "cache read"), ("cache_write", "cache write"))
            if (count := _count(totals.get(name)))
        ]
        parts.append(f"{whole:,} in" + (f" ({', '.join(cached)})" if cached else ""))
    output = _count(totals.get("output"))
    if output is not None:
        reasoning = _count(totals.get("reasoning"))
        parts.append(f"{output:,} out" + (f" ({reasoning:,} reasoning)" if reasoning else ""))
    total = _count(totals.get("total"))
    if total is not None:
        parts.append(f"{total:,} total")
    if not parts:
        return "not reported"
    unknown = totals.get("unknown")
    unknown = unknown if isinstance(unknown, dict) else {}
    missing = max(_count(unknown.get(name)) or 0 for name in ("input", "output", "total"))
    note = f" (not reported by {missing} of {totals.get('tasks')} task(s))" if missing else ""
    return " / ".join(parts) + note


def cost_text(cost: Mapping[str, JsonValue]) -> str:
    """A group's cost in words, from artifacts.cost_totals.run_cost: the whole (with the
    model's and the judge's parts apart when a judge graded), per solved task, what the
    response cache saved, and how many tasks have no known cost."""
    usd = _usd(cost.get("usd"))
    parts = [money(usd)]
    judge = _usd(cost.get("judge_usd"))
    if judge is not None or _count(cost.get("judged")):
        model = money(_usd(cost.get("model_usd")))
        parts[0] += f" (model under test {model}, judge {money(judge)})"
    per_solved = _usd(cost.get("per_solved_usd"))
    if per_solved is not None:
        parts.append(f"{money(per_solved)} per solved task")
    saved = _usd(cost.get("saved_usd"))
    if saved:
        parts.append(f"{money(saved)} saved by the cache")
    text = " · ".join(parts)
    unknown = _count(cost.get("unknown")) or 0
    if unknown:
        text += f" (not known for {unknown} of {cost.get('tasks')} task(s): no price or no usage)"
    return text


def cache_text(cache: Mapping[str, JsonValue]) -> str:
    """``cache: 12 model call(s) of 6 task(s) replayed, not sent ($0.0420 saved)``."""
    saved = _usd(cache.get("saved_usd"))
    return (
        f"cache: {cache.get('hits')} model call(s) of {cache.get('tasks')} task(s) replayed, "
        "not sent" + (f" ({money(saved)} saved)" if saved is not None else "")
    )


def batch_text(batch: Mapping[str, JsonValue]) -> str:
    """``batch: 8 first-round request(s) of 8 task(s) answered by the batch API ($0.0210
    saved); 1 sent live``."""
    saved = _usd(batch.get("saved_usd"))
    text = (
        f"batch: {batch.get('requests')} first-round request(s) of {batch.get('tasks')} "
        "task(s) answered by the provider's batch API"
        + (f" ({money(saved)} saved)" if saved is not None else "")
    )
    if batch.get("live"):
        text += f"; {batch.get('live')} planned request(s) sent live (see batch_live)"
    return text


def _usd(value: JsonValue | None) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def group_cost_lines(records: Sequence[TaskRecord]) -> list[str]:
    """With several suites or models: ``cost suite × model: …`` per group that has a
    cost (the same groups as summary.json's ``scores``)."""
    groups: dict[tuple[str, str], list[TaskRecord]] = {}
    for record in records:
        groups.setdefault((record.suite, record.model), []).append(record)
    if len(groups) < 2:
        return []
    lines = []
    for (suite, model), members in sorted(groups.items()):
        cost = run_cost(members)
        if cost is not None:
            lines.append(f"  {suite} × {model}: {cost_text(cost)}")
    return ["cost by suite × model:", *lines] if lines else []


def task_label(record: TaskRecord) -> str:
    """``suite::task``, with the item's ``[model:epochK]`` when the task ran against
    several models or more than once (the item name, the last part of its node id)."""
    name = record.nodeid.rpartition("::")[2]
    task_id = record.task_id
    shown = name if name.startswith(task_id + "[") else task_id
    return f"{record.suite}::{shown}"


def _count(value: JsonValue) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def shown_path(path: str, relative_to: str | None) -> str:
    """``path`` relative to ``relative_to`` when it lies below it, else as it is."""
    if relative_to is None:
        return path
    try:
        return str(Path(path).relative_to(relative_to))
    except ValueError:
        return path


def score_lines(records: Sequence[TaskRecord], judge: JsonObject | None = None) -> list[str]:
    """``score 0.620 ± 0.069 (n=50, 95 % CI 0.487–0.738)``, and the first-try score on
    a line of its own when a repair round passed a task or a later round was lost. With
    several models, one such line per model and never a score pooled over them. A score
    a judge graded carries the judge's standing on its own line (``judge``: the run's
    judge_summary): the "judge not calibrated" mark, the corrected score."""
    models = list(dict.fromkeys(record.model for record in records))
    if len(models) > 1:
        lines = []
        width = max(len(model) for model in models)
        for model in models:
            members = [r for r in records if r.model == model]
            mark = standing_mark(judge_standing(members, judge))
            lines.append(
                f"score {model.ljust(width)}  {_score_text(members)}"
                + (f" · {mark}" if mark else "")
            )
        return lines
    mark = standing_mark(judge_standing(records, judge))
    lines = [f"score {_score_text(records)}" + (f" · {mark}" if mark else "")]
    repaired = sum(1 for r in records if r.repaired)
    incomplete = sum(1 for r in records if r.incomplete)
    if repaired or incomplete:
        first = interval_text(score_estimate(records, "first_attempt_reward"))
        note = f"{repaired} repaired"
        if incomplete:
            note += f", {incomplete} incomplete: a later round hit a harness error"
        lines.append(f"first try {first} · {note}")
    return lines


def _score_text(records: Sequence[TaskRecord]) -> str:
    text = interval_text(score_estimate(records))
    if any(record.epoch for record in records):
        samples = len(records)
        text += f" · {samples} samples, clustered by task"
    return text


def summary_lines(
    records: Sequence[TaskRecord],
    *,
    run_dir: str,
    wall_s: float,
    relative_to: str | None = None,
    partial: str | None = None,
    min_kappa: float | None = None,
) -> list[str]:
    """Totals, score, tokens, then one ``✗ task: reason`` line per failure (at most five,
    most severe first), one details pointer, harness errors apart, and the run folder.
    Paths under ``relative_to`` (where pytest was started) are shown relative to it.
    ``partial`` (artifacts.coverage.partial_line) follows the totals when the run did not
    cover every planned task, so a partial score never reads as a whole one."""
    run_dir = shown_path(run_dir, relative_to)
    controls = control_lines(records)
    judge = judge_section(records, min_kappa)
    judged = judge_block(judge)
    records = task_records(records)
    if not records:
        head = "no tasks ran" if not controls and not judged else None
        ended = (head, partial, *judged, *controls, f"results: {run_dir}")
        return [line for line in ended if line]
    counts = classify(records)
    shown = [f"{counts[k]} {label}" for k, label in _LABELS.items() if counts[k]]
    noun = "task" if len(records) == 1 else "tasks"
    if any(record.epoch for record in records):  # one record per task × epoch
        noun = "sample" if len(records) == 1 else "samples"
    lines = [f"{len(records)} {noun}: " + (", ".join(shown) if shown else "none ran")]
    broken = unusable(records, run_dir)
    if broken is not None:
        lines.append(f"⚠ {broken['words']}")
    if partial:
        lines.append(f"{partial} — the score covers these only")
    if score(records) is not None:
        lines += score_lines(records, judge)
    lines.append(f"tokens {tokens_text(run_usage(records))} · wall {wall_s:.1f}s")
    cost = run_cost(records)
    if cost is not None:
        lines.append(f"cost {cost_text(cost)}")
        lines += group_cost_lines(records)
    cache = cache_totals(records)
    if cache is not None:
        lines.append(cache_text(cache))
    batched = batch_totals(records)
    if batched is not None:
        lines.append(batch_text(batched))
    lines += judged

    failures = shown_failures(records)
    for record in failures[:MAX_FAILURE_LINES]:
        lines.append(f"✗ {task_label(record)}: {record.message or failure_reason(record)}")
    if len(failures) > MAX_FAILURE_LINES:
        lines.append(f"… and {len(failures) - MAX_FAILURE_LINES} more")
    pointer = details_pointer(records)
    if pointer:
        lines.append(f"(details: {shown_path(pointer, relative_to)})")

    errors = [r for r in order_failures(records) if r.outcome == "harness_error"]
    if errors:
        lines.append("harness errors (not the model's fault; excluded from the score):")
        for record in errors[:MAX_FAILURE_LINES]:
            lines.append(f"! {task_label(record)}: {record.message or failure_reason(record)}")
        if len(errors) > MAX_FAILURE_LINES:
            lines.append(f"… and {len(errors) - MAX_FAILURE_LINES} more")
    lines += controls
    lines.append(f"results: {run_dir}")
    return lines
