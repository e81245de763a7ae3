"""The sections of the HTML report above the task table (``html_page.py`` is the page
around them): the run and its totals, the judge, the models and their scores, side by
side comparisons with their differing tasks, the pictures and the loop-watch figures.
Each takes what ``html_report`` read of the run, redacted, and returns its markup, with
every text escaped where it is written (``esc``)."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from html import escape
from typing import TypedDict

from pytest_agentbench.artifacts.score_stats import interval_text
from pytest_agentbench.core.jsontypes import JsonObject, JsonValue
from pytest_agentbench.core.records import OUTCOMES
from pytest_agentbench.report.html_data import (
    Side,
    SidePair,
    cheapest_for_score,
    mapping,
    model_costs,
)
from pytest_agentbench.report.html_svg import cost_vs_score
from pytest_agentbench.report.terminal import cost_text, tokens_text

SIDE_ROWS = 500


class RunData(TypedDict):
    """What the sections above the task table show, redacted (``html_report``)."""

    run_dir: str
    summary: JsonObject
    models: list[str]
    suites: list[str]
    model_scores: list[JsonValue]
    comparisons: list[JsonValue]
    sides: list[Side]


class PageData(RunData):
    """``RunData`` with what the page adds: the pictures (svg, caption), the loop
    figures (task index, label, caption, svg), the first page of the table (task index,
    row), the number of tasks and their order, the worst first."""

    pictures: list[tuple[str, str]]
    loops: list[tuple[int, str, str, str]]
    first_page: Sequence[tuple[int, Sequence[JsonValue]]]
    tasks: int
    order: Sequence[int]


def esc(value: object) -> str:
    """``value`` as text escaped for markup (None: empty)."""
    return escape("" if value is None else str(value), quote=True)


def cell(value: JsonValue) -> str:
    """A table cell's number or text (None: a dash)."""
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.3g}" if value < 1000 else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def _when(ms: JsonValue) -> str:
    if not isinstance(ms, int):
        return "–"
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(ms / 1000))


def _int(value: JsonValue) -> int:
    return int(value) if isinstance(value, int | float | str) and value else 0


def _outcome_badges(outcomes: Mapping[str, JsonValue]) -> str:
    return " ".join(
        f'<span class="badge o-{o}">{_int(outcomes.get(o))} {o.replace("_", " ")}</span>'
        for o in OUTCOMES
        if outcomes.get(o)
    )


def _cost(totals: Mapping[str, JsonValue]) -> str:
    cost = totals.get("cost")
    if isinstance(cost, dict):
        return cost_text(cost)
    return "not known (no model of this run has a price: docs/cost.md)"


def _estimate_text(stats: Mapping[str, JsonValue], key: str) -> str:
    estimate = stats.get(key)
    return interval_text(estimate) if isinstance(estimate, dict) and estimate else "no score"


def run_section(data: RunData) -> str:
    summary = data["summary"]
    totals = mapping(summary.get("totals"))
    settings = mapping(summary.get("settings"))
    stats = mapping(totals.get("stats"))
    usage = totals.get("usage")
    items = [
        ("models", ", ".join(data["models"]) or "–"),
        ("settings fingerprint", settings.get("fingerprint") or "–"),
        ("suites", ", ".join(data["suites"]) or "–"),
        ("started", _when(summary.get("start_ms"))),
        ("wall time", f"{summary.get('wall_s', '–')} s"),
        ("tokens", tokens_text(usage) if isinstance(usage, dict) and usage else "not reported"),
        ("cost", _cost(totals)),
    ]
    score, first = _estimate_text(stats, "score"), _estimate_text(stats, "first_try")
    rows = "".join(f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in items)
    banner = ""
    coverage = mapping(summary.get("coverage"))
    if summary.get("partial"):
        given = coverage.get("reasons") or []
        listed = given if isinstance(given, list) else []
        reasons = ", ".join(str(r) for r in listed) or "see summary.json"
        covered = (
            f"{coverage.get('tasks')} of {coverage.get('planned')} tasks"
            if coverage.get("planned") is not None
            else f"{totals.get('tasks')} tasks"
        )
        banner = f'<p class="banner" id="partial">Partial run: {esc(covered)} ({esc(reasons)})</p>'
    standing = ""
    judged = totals.get("judge_standing")
    mark = ""
    if judged is not None:  # judged runs only: report/controls.py is not imported else
        from pytest_agentbench.report.controls import standing_mark

        mark = standing_mark(judged)
    if mark:  # a score a judge graded carries the judge's standing where it is shown
        bad = " bad" if mapping(totals.get("judge_standing")).get("status") else ""
        standing = f' <span class="judge-standing{bad}" id="judge-standing">{esc(mark)}</span>'
    broken = mapping(totals.get("unusable"))
    if broken:  # too many harness errors: the score is not usable
        banner += f'<p class="banner" id="unusable">⚠ {esc(broken.get("words"))}</p>'
    gate = ""
    verdict = summary.get("gate")
    if isinstance(verdict, dict):
        ok = verdict.get("ok")
        word = "passed" if ok else "failed"
        gate = f'<p class="gate {"ok" if ok else "bad"}">score gate: {word}</p>'
    return (
        f'<section id="run">{banner}'
        f'<p class="score">score <strong id="score-value">{esc(score)}</strong>{standing}'
        f'<br><span class="muted">first try {esc(first)} · '
        f"{esc(totals.get('repaired', 0))} repaired"
        f" · ± is the standard error</span></p>"
        f'<p>tasks <strong id="task-count">{esc(totals.get("tasks"))}</strong> '
        f"{_outcome_badges(mapping(totals.get('outcomes')))}</p>{gate}"
        f'<table class="facts">{rows}</table></section>'
    )


def _model_mark(summary: Mapping[str, JsonValue], model: str) -> str:
    """One model's judge standing mark; empty, with the judge's modules not imported,
    when no judge ran."""
    if not isinstance(summary.get("judge"), Mapping):
        return ""
    from pytest_agentbench.report.judges import model_standing, standing_text

    return standing_text(model_standing(summary, model))


def judge_section(data: RunData) -> str:
    """The judges' cost apart from the model's, their calibration, the corrected judged
    pass rate and the "judge not calibrated" mark; nothing when no judge ran."""
    from pytest_agentbench.report.controls import judge_block

    judge = data["summary"].get("judge")
    lines = judge_block(judge)
    if not lines:
        return ""
    status = mapping(judge).get("status") if isinstance(judge, dict) else None
    mark = f'<p class="gate bad" id="judge-status">{esc(status)}</p>' if status else ""
    items = "".join(f"<li>{esc(line.strip())}</li>" for line in lines)
    return f'<section id="judge"><h2>Judge</h2>{mark}<ul>{items}</ul></section>'


def models_section(data: RunData) -> str:
    """Per model scores and the paired comparisons; nothing for a one-model run."""
    models, comparisons = data["model_scores"], data["comparisons"]
    if len(models) < 2 and not comparisons:
        return ""
    costs = model_costs(data["summary"])
    rows = []
    points: list[tuple[str, float, float]] = []
    for model in models:
        entry = mapping(model)
        stats = mapping(entry.get("stats"))
        score = _estimate_text(stats, "score")
        name = str(entry.get("model"))
        cost = costs.get(name, {})
        usd = cost.get("usd")
        value = mapping(stats.get("score")).get("value")
        if isinstance(usd, float) and not cost.get("unknown") and isinstance(value, int | float):
            points.append((name, usd, float(value)))
        mark = _model_mark(data["summary"], name)
        score += f" · {mark}" if mark else ""
        rows.append(
            f"<tr><td>{esc(name)}</td><td>{esc(entry.get('tasks'))}</td>"
            f"<td>{esc(score)}</td><td>{_outcome_badges(mapping(entry.get('outcomes')))}</td>"
            f"<td>{esc(cost_text(cost) if cost else '–')}</td></tr>"
        )
    marks = cheapest_for_score(points)
    chart = cost_vs_score([(*p, m) for p, m in zip(points, marks, strict=True)])
    if chart:
        cheapest = ", ".join(p[0] for p, m in zip(points, marks, strict=True) if m)
        chart = (
            f'<figure id="cost-score">{chart}<figcaption>cost against score per model; '
            f"★ cheapest for its score: {esc(cheapest)}</figcaption></figure>"
        )
    lines = []
    for given in comparisons:
        comparison = mapping(given)
        words = comparison.get("words")
        if not isinstance(words, str):
            diff = mapping(comparison.get("difference"))
            words = (
                f"{comparison.get('first')} − {comparison.get('second')} = "
                f"{diff.get('value')} ({comparison.get('test')}, p={comparison.get('p_value')})"
            )
        suite = comparison.get("suite")  # a multi-model run compares within suites too
        if isinstance(suite, str):
            words = f"{suite}: {words}"
        lines.append(f"<li>{esc(words)}</li>")
    return (
        '<section id="models"><h2>Models</h2><table class="grid"><thead><tr><th>model</th>'
        "<th>tasks</th><th>score</th><th>outcomes</th><th>cost</th></tr></thead><tbody>"
        + "".join(rows)
        + "</tbody></table>"
        + chart
        + (
            f'<h3>Paired comparisons</h3><ul class="comparisons">{"".join(lines)}</ul>'
            if lines
            else ""
        )
        + "</section>"
    )


def pictures_section(data: PageData) -> str:
    figures = [(svg, caption) for svg, caption in data["pictures"] if svg]
    if not figures:
        return ""
    body = "".join(f"<figure>{svg}<figcaption>{esc(c)}</figcaption></figure>" for svg, c in figures)
    return f'<section id="pictures"><h2>Pictures</h2><div class="figures">{body}</div></section>'


def loops_section(data: PageData) -> str:
    loops = data["loops"]
    if not loops:
        return ""
    body = "".join(
        f'<figure class="loop" id="loop-{i}">{svg}<figcaption><a href="#task-{i}">'
        f"{esc(label)}</a> · {esc(caption)}</figcaption></figure>"
        for i, label, caption, svg in loops
    )
    return (
        '<section id="loops"><h2>Loop watch</h2><p class="muted">The loop-watch score over '
        "the stream of each killed or suspect rollout; dashed: the kill threshold.</p>"
        f'<div class="figures">{body}</div></section>'
    )


def side_section(data: RunData) -> str:
    parts = []
    for side in data["sides"]:
        title, a, b, pairs = side["title"], side["first"], side["second"], side["pairs"]
        shown = pairs[:SIDE_ROWS]
        counts = {
            k: sum(1 for p in pairs if p["change"] == k)
            for k in ("regression", "improvement", "same")
        }
        rows = "".join(
            f'<tr class="{p["change"]}"><td>{_task_cell(p)}</td>'
            f'<td class="o-text-{esc(p["a_outcome"])}">{esc(p["a_outcome"])}</td>'
            f"<td>{cell(p['a_reward'])}</td>"
            f'<td class="o-text-{esc(p["b_outcome"])}">{esc(p["b_outcome"])}</td>'
            f"<td>{cell(p['b_reward'])}</td>"
            f"<td>{p['delta']:+.3g}</td><td>{esc(p['change'])}</td></tr>"
            for p in shown
        )
        more = (
            f'<p class="muted">{len(pairs) - SIDE_ROWS} more not shown</p>'
            if len(pairs) > SIDE_ROWS
            else ""
        )
        parts.append(
            f"<h3>{esc(title)}</h3><p>{counts['regression']} regression(s), "
            f"{counts['improvement']} improvement(s), {counts['same']} unchanged, of "
            f"{len(pairs)} task(s) both ran</p>"
            f'<table class="grid side"><thead><tr><th>task</th><th>{esc(a)}</th><th>reward</th>'
            f"<th>{esc(b)}</th><th>reward</th><th>change</th><th></th></tr></thead>"
            f"<tbody>{rows}</tbody></table>{more}{_diff_panels(side)}"
        )
    if not parts:
        return ""
    return f'<section id="side"><h2>Side by side</h2>{"".join(parts)}</section>'


def _task_cell(pair: SidePair) -> str:
    """The task's name, linked to its two-sided panel when the sides disagree on it."""
    panel = pair.get("panel")
    if panel:
        return f'<a href="#{esc(panel)}">{esc(pair["task"])}</a>'
    return esc(pair["task"])


def _diff_panels(side: Side) -> str:
    """Each task the two sides disagree on (one passed, the other not): both sides'
    outcome, reason and answers, side by side, in a ``<details>`` the table links to."""
    panels = side.get("panels") or []
    if not panels:
        return ""
    names = (side["first"], side["second"])
    parts = []
    for panel in panels:
        columns = "".join(
            f'<div class="sxs-side"><h4>{esc(name)}: '
            f'<span class="o-text-{esc(view["outcome"])}">{esc(view["outcome"])}</span></h4>'
            f'<p class="reason">{esc(view["reason"])}</p>'
            + "".join(f"<pre>{esc(answer)}</pre>" for answer in view["answers"])
            + "</div>"
            for name, view in zip(names, (panel["a"], panel["b"]), strict=True)
        )
        parts.append(
            f'<details class="sxs" id="{esc(panel["id"])}"><summary>{esc(panel["task"])}'
            f'</summary><div class="sxs-grid">{columns}</div></details>'
        )
    return (
        f"<h4>Where they differ: {len(panels)} task(s) shown with both sides</h4>{''.join(parts)}"
    )
