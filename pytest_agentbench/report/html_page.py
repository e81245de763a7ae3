"""The HTML report as one self-contained page: inline CSS, inline SVG, the data as JSON in
``<script type="application/json">`` blocks and one inline script; no network access.

Safety: every text that came from a model or a task file is escaped where it is written
(``html.escape`` for markup, ``json_block`` for the data blocks, where ``<``, ``>`` and
``&`` become ``\\u003c`` escapes, so no ``</script>`` or ``<!--`` can end a block); the
script builds the task panels with ``textContent`` only. A Content-Security-Policy allows
no network at all and only our own script (by its hash), so even markup that slipped
through could neither run nor load anything.

Without JavaScript the page still shows the run, the pictures, the side-by-side tables
and the first ``FIRST_PAGE`` task rows (the failures first); the script replaces that
table with the whole one (paged, filtered, sorted) and opens task panels.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from html import escape
from importlib import resources
from typing import TypedDict

from pytest_agentbench.artifacts.score_stats import interval_text
from pytest_agentbench.core.jsontypes import JsonObject, JsonValue
from pytest_agentbench.core.records import OUTCOMES
from pytest_agentbench.report.controls import standing_mark
from pytest_agentbench.report.html_data import (
    ROW_COLUMNS,
    Side,
    SidePair,
    cheapest_for_score,
    mapping,
    model_costs,
)
from pytest_agentbench.report.html_svg import cost_vs_score
from pytest_agentbench.report.terminal import cost_text, tokens_text

FIRST_PAGE = 100
SIDE_ROWS = 500
_HEADINGS = {
    "suite": "suite", "task": "task", "model": "model", "outcome": "outcome",
    "reward": "reward", "first_try": "first try", "attempts": "attempts",
    "tokens": "tokens", "wall_s": "wall s", "reason": "reason",
}  # fmt: skip


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


def asset(name: str) -> str:
    return (
        resources.files("pytest_agentbench.report")
        .joinpath("html_assets", name)
        .read_text(encoding="utf-8")
    )


def _finite(value: object) -> object:
    """``value`` with NaN and infinities as None (JSON has no such numbers)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def json_block(value: object) -> str:
    """JSON safe inside a ``<script type="application/json">`` element."""
    try:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except ValueError:  # a NaN or an infinity somewhere in a record
        text = json.dumps(_finite(value), ensure_ascii=False, separators=(",", ":"))
    return script_safe(text)


def script_safe(text: str) -> str:
    """Compact JSON ``text`` made safe inside a ``<script>`` element (``json_block``'s
    last step, for text already encoded)."""
    return text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")


def _e(value: object) -> str:
    return escape("" if value is None else str(value), quote=True)


def _cell(value: JsonValue) -> str:
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
    rows = "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in items)
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
        banner = f'<p class="banner" id="partial">Partial run: {_e(covered)} ({_e(reasons)})</p>'
    standing = ""
    mark = standing_mark(totals.get("judge_standing"))
    if mark:  # a score a judge graded carries the judge's standing where it is shown
        bad = " bad" if mapping(totals.get("judge_standing")).get("status") else ""
        standing = f' <span class="judge-standing{bad}" id="judge-standing">{_e(mark)}</span>'
    broken = mapping(totals.get("unusable"))
    if broken:  # too many harness errors: the score is not usable
        banner += f'<p class="banner" id="unusable">⚠ {_e(broken.get("words"))}</p>'
    gate = ""
    verdict = summary.get("gate")
    if isinstance(verdict, dict):
        ok = verdict.get("ok")
        word = "passed" if ok else "failed"
        gate = f'<p class="gate {"ok" if ok else "bad"}">score gate: {word}</p>'
    return (
        f'<section id="run">{banner}'
        f'<p class="score">score <strong id="score-value">{_e(score)}</strong>{standing}'
        f'<br><span class="muted">first try {_e(first)} · {_e(totals.get("repaired", 0))} repaired'
        f" · ± is the standard error</span></p>"
        f'<p>tasks <strong id="task-count">{_e(totals.get("tasks"))}</strong> '
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
    mark = f'<p class="gate bad" id="judge-status">{_e(status)}</p>' if status else ""
    items = "".join(f"<li>{_e(line.strip())}</li>" for line in lines)
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
            f"<tr><td>{_e(name)}</td><td>{_e(entry.get('tasks'))}</td>"
            f"<td>{_e(score)}</td><td>{_outcome_badges(mapping(entry.get('outcomes')))}</td>"
            f"<td>{_e(cost_text(cost) if cost else '–')}</td></tr>"
        )
    marks = cheapest_for_score(points)
    chart = cost_vs_score([(*p, m) for p, m in zip(points, marks, strict=True)])
    if chart:
        cheapest = ", ".join(p[0] for p, m in zip(points, marks, strict=True) if m)
        chart = (
            f'<figure id="cost-score">{chart}<figcaption>cost against score per model; '
            f"★ cheapest for its score: {_e(cheapest)}</figcaption></figure>"
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
        lines.append(f"<li>{_e(words)}</li>")
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
    body = "".join(f"<figure>{svg}<figcaption>{_e(c)}</figcaption></figure>" for svg, c in figures)
    return f'<section id="pictures"><h2>Pictures</h2><div class="figures">{body}</div></section>'


def loops_section(data: PageData) -> str:
    loops = data["loops"]
    if not loops:
        return ""
    body = "".join(
        f'<figure class="loop" id="loop-{i}">{svg}<figcaption><a href="#task-{i}">'
        f"{_e(label)}</a> · {_e(caption)}</figcaption></figure>"
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
            f'<td class="o-text-{_e(p["a_outcome"])}">{_e(p["a_outcome"])}</td>'
            f"<td>{_cell(p['a_reward'])}</td>"
            f'<td class="o-text-{_e(p["b_outcome"])}">{_e(p["b_outcome"])}</td>'
            f"<td>{_cell(p['b_reward'])}</td>"
            f"<td>{p['delta']:+.3g}</td><td>{_e(p['change'])}</td></tr>"
            for p in shown
        )
        more = (
            f'<p class="muted">{len(pairs) - SIDE_ROWS} more not shown</p>'
            if len(pairs) > SIDE_ROWS
            else ""
        )
        parts.append(
            f"<h3>{_e(title)}</h3><p>{counts['regression']} regression(s), "
            f"{counts['improvement']} improvement(s), {counts['same']} unchanged, of "
            f"{len(pairs)} task(s) both ran</p>"
            f'<table class="grid side"><thead><tr><th>task</th><th>{_e(a)}</th><th>reward</th>'
            f"<th>{_e(b)}</th><th>reward</th><th>change</th><th></th></tr></thead>"
            f"<tbody>{rows}</tbody></table>{more}{_diff_panels(side)}"
        )
    if not parts:
        return ""
    return f'<section id="side"><h2>Side by side</h2>{"".join(parts)}</section>'


def _task_cell(pair: SidePair) -> str:
    """The task's name, linked to its two-sided panel when the sides disagree on it."""
    panel = pair.get("panel")
    if panel:
        return f'<a href="#{_e(panel)}">{_e(pair["task"])}</a>'
    return _e(pair["task"])


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
            f'<div class="sxs-side"><h4>{_e(name)}: '
            f'<span class="o-text-{_e(view["outcome"])}">{_e(view["outcome"])}</span></h4>'
            f'<p class="reason">{_e(view["reason"])}</p>'
            + "".join(f"<pre>{_e(answer)}</pre>" for answer in view["answers"])
            + "</div>"
            for name, view in zip(names, (panel["a"], panel["b"]), strict=True)
        )
        parts.append(
            f'<details class="sxs" id="{_e(panel["id"])}"><summary>{_e(panel["task"])}'
            f'</summary><div class="sxs-grid">{columns}</div></details>'
        )
    return (
        f"<h4>Where they differ: {len(panels)} task(s) shown with both sides</h4>{''.join(parts)}"
    )


def _row_html(index: int, values: Sequence[JsonValue]) -> str:
    cells = []
    for name, value in zip(ROW_COLUMNS, values, strict=True):
        if name == "task":
            cells.append(f'<td><a href="#task-{index}">{_e(value)}</a></td>')
        elif name == "outcome":
            cells.append(f'<td class="o-text-{_e(value)}">{_e(value)}</td>')
        else:
            cells.append(f"<td>{_e(_cell(value))}</td>")
    return f'<tr data-i="{index}">{"".join(cells)}</tr>'


def tasks_section(first: Sequence[tuple[int, Sequence[JsonValue]]], total: int) -> str:
    """The task table's frame, holding ``first``: (task index, row) of the first page,
    the failures first, for a page read without JavaScript."""
    rows = "".join(_row_html(i, values) for i, values in first)
    heads = "".join(f'<th data-col="{c}">{_e(_HEADINGS[c])}</th>' for c in ROW_COLUMNS)
    note = (
        f"Showing {min(FIRST_PAGE, total)} of {total} tasks, the failures first. "
        "The full table, its filters and the task panels need JavaScript."
    )
    return (
        '<section id="tasks"><h2>Tasks</h2>'
        '<form id="filters" class="js-only" autocomplete="off">'
        '<label>suite <select id="f-suite"><option value="">all</option></select></label> '
        '<label>outcome <select id="f-outcome"><option value="">all</option></select></label> '
        '<label>model <select id="f-model"><option value="">all</option></select></label> '
        '<label>text <input id="f-text" type="search" placeholder="task, reason…"></label> '
        '<span id="shown"></span></form>'
        f'<noscript><p class="muted">{_e(note)}</p></noscript>'
        f'<table id="task-table" class="grid"><thead><tr>{heads}</tr></thead>'
        f"<tbody>{rows}</tbody></table>"
        '<p id="pager" class="js-only"><button type="button" id="prev">◀ previous</button> '
        '<span id="page"></span> <button type="button" id="next">next ▶</button></p>'
        '</section><section id="panel" hidden></section>'
    )


def _run_data(
    data: PageData, rows: Iterable[Sequence[JsonValue]], order: Sequence[int]
) -> Iterator[str]:
    """The page's ``run-data`` JSON, a row at a time: the same text as ``json_block`` of
    the whole (its members are encoded one by one, and the escapes of ``json_block``
    are character by character)."""
    yield f'{{"columns":{json_block(list(ROW_COLUMNS))},"rows":['
    for position, values in enumerate(rows):
        yield ("," if position else "") + json_block(values)
    yield '],"order":['
    for start in range(0, len(order), 4096):
        yield ("," if start else "") + ",".join(map(str, order[start : start + 4096]))
    loops = [i for i, _, _, _ in data["loops"]]
    yield (
        f'],"suites":{json_block(data["suites"])},"models":{json_block(data["models"])},'
        f'"outcomes":{json_block(list(OUTCOMES))},"loops":{json_block(loops)}}}'
    )


def page_pieces(
    data: PageData,
    rows: Iterable[Sequence[JsonValue]],
    details: Iterable[tuple[int, str]],
) -> Iterator[str]:
    """The page, in pieces to be written as they come. ``data`` holds what the sections
    above the table show (``html_report``); ``rows`` gives every task's row in the
    records' order and ``details`` each task's panel (task index, its ``json_block``) in
    the order they are set down: each is taken one at a time, only when its place in
    the page is reached, so neither is ever held whole."""
    script = asset("report.js")
    digest = base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode()
    policy = (
        "default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
        f"script-src 'sha256-{digest}'; base-uri 'none'; form-action 'none'"
    )
    summary = data["summary"]
    title = f"agentbench run {summary.get('run_id')}"
    tool = mapping(summary.get("tool", {}))
    yield (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<meta http-equiv="Content-Security-Policy" content="{policy}">'
        '<meta name="referrer" content="no-referrer">'
        f"<title>{_e(title)}</title><style>{asset('report.css')}</style></head><body>"
        f'<header><h1>{_e(title)}</h1><p class="muted">{_e(tool.get("name"))} '
        f"{_e(tool.get('version'))} · results {_e(data['run_dir'])}</p></header>"
    )
    yield run_section(data)
    yield judge_section(data)
    yield models_section(data)
    yield side_section(data)
    yield pictures_section(data)
    yield loops_section(data)
    yield tasks_section(data["first_page"], data["tasks"])
    yield '<script type="application/json" id="run-data">'
    yield from _run_data(data, rows, data["order"])
    yield "</script>"
    for i, block in details:
        yield f'<script type="application/json" id="d-{i}">{block}</script>'
    yield f"<script>{script}</script></body></html>\n"
