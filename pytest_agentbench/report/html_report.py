"""``report.html``: one self-contained page for a run folder, built from its files only
(summary.json, each task's result.json and trajectory.json), so it can be rebuilt from
any run folder, a merged one included (``python -m pytest_agentbench report RUN_DIR``).

``report_data`` gathers what the page shows and redacts it (the same redaction as every
artifact: secret header values and the given secret strings); ``html_page.render`` draws
it. See docs/html-report.md.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_agentbench.artifacts.jsonio import write_pieces_atomic
from pytest_agentbench.artifacts.rollout_files import redact, redacted_json
from pytest_agentbench.report import html_svg
from pytest_agentbench.report.html_data import (
    DETAIL_BUDGET,
    comparisons,
    load_summary,
    model_scores,
    row,
    severity_order,
    side_by_side,
    task_detail,
)
from pytest_agentbench.report.html_page import json_block, render_pieces, script_safe

DEFAULT_NAME = "report.html"
MAX_LOOP_FIGURES = 60


def _records(summary: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [dict(t) for t in summary["tasks"] if isinstance(t, Mapping)]


def _pictures(
    summary: Mapping[str, Any], records: Sequence[Mapping[str, Any]], several_models: bool
) -> list[tuple[str, str]]:
    groups = []
    for entry in summary.get("scores") or []:
        if not isinstance(entry, Mapping):
            continue
        label = str(entry.get("suite"))
        if several_models:
            label += f" · {entry.get('model')}"
        groups.append((label, entry.get("outcomes") or {}))
    totals = summary.get("totals") or {}
    tokens = [
        float(r["usage"]["total"])
        for r in records
        if isinstance(r.get("usage"), Mapping) and isinstance(r["usage"].get("total"), int)
    ]
    walls = [
        float(r["duration_ms"]) / 1000
        for r in records
        if isinstance(r.get("duration_ms"), int) and r.get("outcome") != "harness_error"
    ]
    return [
        (html_svg.outcome_mix(groups), "outcome mix per suite"),
        (html_svg.score_by_round(totals.get("repair_curve")), "score by repair round"),
        (html_svg.histogram(tokens, "tokens per task", "tokens"), "tokens per task"),
        (html_svg.histogram(walls, "wall time per task", "seconds"), "wall time per task"),
    ]


def _loop_figures(
    details: Mapping[int, Mapping[str, Any]], threshold: float | None
) -> list[tuple[int, str, str, str]]:
    """(task index, label, caption, svg) for each task with a killed or suspect stream:
    the killed ones first."""
    found = []
    for index, detail in details.items():
        for attempt in detail.get("attempts") or []:
            loop = attempt.get("loop")
            if not loop:
                continue
            killed = loop.get("killed")
            caption = (
                f"killed in round {attempt['round']} at {killed.get('killed_s')} s "
                f"({killed.get('rule')})"
                if killed
                else f"{loop.get('state')} (peak {loop.get('score')})"
                + (", recovered" if loop.get("recovered") else "")
            )
            svg = html_svg.loop_chart(loop, threshold)
            if svg:
                found.append((0 if killed else 1, index, str(detail.get("key")), caption, svg))
            break
    found.sort(key=lambda f: (f[0], f[1]))
    return [(i, label, caption, svg) for _, i, label, caption, svg in found[:MAX_LOOP_FIGURES]]


def report_data(
    run_dir: Path, *, secrets: Iterable[str] = (), baseline: Path | None = None
) -> dict[str, Any]:
    """Everything the page shows, redacted. ``baseline`` is another run folder to set
    side by side with this one (its tasks matched by suite and task id)."""
    summary = load_summary(run_dir)
    records = _records(summary)
    models = list(dict.fromkeys(str(r.get("model")) for r in records))
    order = severity_order(records)
    secrets = tuple(secrets)
    details: dict[int, str] = {}
    looped: dict[int, dict[str, Any]] = {}
    spent = 0
    for index in order:
        detail, text = redacted_json(task_detail(records[index], run_dir), secrets)
        block = script_safe(text)  # encoded once, for the secrets' scan and the page
        if spent + len(block) > DETAIL_BUDGET:
            detail = {"key": detail["key"], "reason": detail["reason"], "attempts": [],
                      "prompt": [], "evidence": {},
                      "note": "left out: the report's size budget was spent on earlier tasks; "
                      f"see {detail.get('rollout_dir')}"}  # fmt: skip
            block = json_block(detail)
        spent += len(block)
        details[index] = block
        if any(attempt.get("loop") for attempt in detail["attempts"]):
            looped[index] = detail
    settings = summary.get("settings") or {}
    kill = settings.get("loop_kill")
    threshold = kill / 100 if isinstance(kill, int | float) and kill > 0 else None
    sides = []
    by_model = {m: [r for r in records if str(r.get("model")) == m] for m in models}
    for other in models[1:4]:
        pairs = side_by_side(by_model[models[0]], by_model[other])
        sides.append((f"{models[0]} → {other}", models[0], other, pairs))
    if baseline is not None:
        base = _records(load_summary(baseline))
        title = f"baseline {baseline.name} → this run"
        sides.insert(0, (title, "baseline", "this run", side_by_side(base, records)))
    gathered: dict[str, Any] = {
        "run_dir": str(run_dir),
        "summary": {k: v for k, v in summary.items() if k != "tasks"},
        "models": models,
        "suites": sorted({str(r.get("suite")) for r in records}),
        "model_scores": model_scores(summary, records),
        "comparisons": comparisons(summary, records) if len(models) > 1 else [],
        "rows": [row(r) for r in records],
        "order": order,
        "sides": sides,
    }
    data: dict[str, Any] = redact(gathered, secrets)
    data["details"] = details  # each redacted and encoded above
    data["pictures"] = _pictures(data["summary"], records, len(models) > 1)  # numbers of records
    data["loops"] = _loop_figures(looped, threshold)
    return data


def write_html_report(
    run_dir: Path,
    out: Path | None = None,
    *,
    secrets: Iterable[str] = (),
    baseline: Path | None = None,
) -> Path:
    """Write the report of ``run_dir`` to ``out`` (default ``run_dir/report.html``)
    atomically; returns its path. AgentbenchError when run_dir holds no summary."""
    target = out if out is not None else run_dir / DEFAULT_NAME
    write_pieces_atomic(
        target, render_pieces(report_data(run_dir, secrets=secrets, baseline=baseline))
    )
    return target
