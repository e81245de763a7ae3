"""The terminal's view of a run with several models or epochs: a suites × models table
of scores (each with its reducer), and each pair of models compared in words."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pytest_agentbench.artifacts.controls import task_records
from pytest_agentbench.artifacts.lineup import model_comparisons, reduced_score, task_samples
from pytest_agentbench.artifacts.score_stats import score_estimate
from pytest_agentbench.core.task_record import TaskRecord


def _cell(samples: Mapping[str, Sequence[TaskRecord]], errors_as_failures: bool) -> str:
    """``pass@2 0.750 (n=4, CI 0.30–0.95)`` for reduced epochs, else ``0.750 (n=4, …)``."""
    reduced = reduced_score(samples, errors_as_failures=errors_as_failures)
    if reduced is None:
        flat = [record for records in samples.values() for record in records]
        data = score_estimate(flat, errors_as_failures=errors_as_failures).as_dict()
        reducer = ""
    else:
        score = reduced["score"]
        data, reducer = score if isinstance(score, dict) else {}, f"{reduced['reducer']} "
    value, lo, hi = data.get("value"), data.get("lo"), data.get("hi")
    if value is None:
        return reducer + "no score"
    interval = f", CI {lo:.2f}–{hi:.2f}" if lo is not None and hi is not None else ""
    return f"{reducer}{value:.3f} (n={data.get('n')}{interval})"


def lineup_lines(
    records: Sequence[TaskRecord], *, errors_as_failures: bool = False, margin: float | None = None
) -> list[str]:
    """The table and the comparisons; no lines for a one-model run whose tasks ran once.
    Controls (and canaries) are left out: the scripted provider plays them, no model."""
    records = task_records(records)
    models = list(dict.fromkeys(record.model for record in records))
    epochs = any(record.epoch for record in records)
    if len(models) < 2 and not epochs:
        return []  # found before grouping the records by task: a list per task
    groups = task_samples(records)
    suites = list(dict.fromkeys(suite for suite, _ in groups))
    header = ["suite", *models]
    rows = [header]
    for suite in suites:
        row = [suite]
        for model in models:
            samples = groups.get((suite, model))
            row.append(_cell(samples, errors_as_failures) if samples else "—")
        rows.append(row)
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = ["scores by suite × model (n = tasks):"]
    for row in rows:
        lines.append(
            "  "
            + "  ".join(text.ljust(width) for text, width in zip(row, widths, strict=True)).rstrip()
        )
    pairs = model_comparisons(records, errors_as_failures=errors_as_failures, margin=margin) or []
    if len({(p["first"], p["second"]) for p in pairs}) > 1:
        lines.append(
            f"compared: each pair of {len(models)} models, Holm-corrected over the "
            f"{len({(p['first'], p['second']) for p in pairs})} pairs"
        )
    for pair in pairs:
        if pair.get("suite") is None:  # the run as a whole; summary.json has each suite
            lines.append(f"compared: {pair['words']}")
    return lines
