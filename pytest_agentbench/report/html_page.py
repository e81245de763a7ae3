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
from collections.abc import Iterator, Mapping, Sequence
from html import escape
from importlib import resources
from typing import Any

from pytest_agentbench.artifacts.score_stats import interval_text
from pytest_agentbench.core.records import OUTCOMES
from pytest_agentbench.report.html_data import ROW_COLUMNS
from pytest_agentbench.report.terminal import tokens_text

FIRST_PAGE = 100
SIDE_ROWS = 500
_HEADINGS = {
    "suite": "suite", "task": "task", "model": "model", "outcome": "outcome",
    "reward": "reward", "first_try": "first try", "attempts": "attempts",
    "tokens": "tokens", "wall_s": "wall s", "reason": "reason",
}  # fmt: skip


def asset(name: str) -> str:
    return (
        resources.files("pytest_agentbench.report")
        .joinpath("html_assets", name)
        .read_text(encoding="utf-8")
    )


def _finite(value: Any) -> Any:
    """``value`` with NaN and infinities as None (JSON has no such numbers)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def json_block(value: Any) -> str:
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


def _e(value: Any) -> str:
    return escape("" if value is None else str(value), quote=True)


def _cell(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.3g}" if value < 1000 else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def _when(ms: Any) -> str:
    if not isinstance(ms, int):
        return "–"
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(ms / 1000))


def _outcome_badges(outcomes: Mapping[str, Any]) -> str:
    return " ".join(
        f'<span class="badge o-{o}">{int(outcomes.get(o) or 0)} {o.replace("_", " ")}</span>'
        for o in OUTCOMES
        if outcomes.get(o)
    )


def _cost(totals: Mapping[str, Any]) -> str:
    cost = totals.get("cost")
    if isinstance(cost, Mapping):
        cost = cost.get("usd", cost.get("total"))
    if isinstance(cost, int | float) and not isinstance(cost, bool):
        return f"${cost:,.4f}"
    return "not known"


def run_section(data: Mapping[str, Any]) -> str:
    summary = data["summary"]
    totals = summary.get("totals") or {}
    settings = summary.get("settings") or {}
    stats = totals.get("stats") or {}
    items = [
        ("models", ", ".join(data["models"]) or "–"),
        ("settings fingerprint", settings.get("fingerprint") or "–"),
        ("suites", ", ".join(data["suites"]) or "–"),
        ("started", _when(summary.get("start_ms"))),
        ("wall time", f"{summary.get('wall_s', '–')} s"),
        ("tokens", tokens_text(totals["usage"]) if totals.get("usage") else "not reported"),
        ("cost", _cost(totals)),
    ]
    score = interval_text(stats["score"]) if stats.get("score") else "no score"
    first = interval_text(stats["first_try"]) if stats.get("first_try") else "no score"
    rows = "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in items)
    banner = ""
    coverage = summary.get("coverage") or {}
    if summary.get("partial"):
        reasons = ", ".join(str(r) for r in coverage.get("reasons") or []) or "see summary.json"
        covered = (
            f"{coverage.get('tasks')} of {coverage.get('planned')} tasks"
            if coverage.get("planned") is not None
            else f"{totals.get('tasks')} tasks"
        )
        banner = f'<p class="banner" id="partial">Partial run: {_e(covered)} ({_e(reasons)})</p>'
    gate = ""
    if isinstance(summary.get("gate"), Mapping):
        ok = summary["gate"].get("ok")
        word = "passed" if ok else "failed"
        gate = f'<p class="gate {"ok" if ok else "bad"}">score gate: {word}</p>'
    return (
        f'<section id="run">{banner}'
        f'<p class="score">score <strong id="score-value">{_e(score)}</strong>'
        f'<br><span class="muted">first try {_e(first)} · {_e(totals.get("repaired", 0))} repaired'
        f" · ± is the standard error</span></p>"
        f'<p>tasks <strong id="task-count">{_e(totals.get("tasks"))}</strong> '
        f"{_outcome_badges(totals.get('outcomes') or {})}</p>{gate}"
        f'<table class="facts">{rows}</table></section>'
    )


def models_section(data: Mapping[str, Any]) -> str:
    """Per model scores and the paired comparisons; nothing for a one-model run."""
    models, comparisons = data["model_scores"], data["comparisons"]
    if len(models) < 2 and not comparisons:
        return ""
    rows = []
    for entry in models:
        stats = entry.get("stats") or {}
        score = interval_text(stats["score"]) if stats.get("score") else "no score"
        rows.append(
            f"<tr><td>{_e(entry.get('model'))}</td><td>{_e(entry.get('tasks'))}</td>"
            f"<td>{_e(score)}</td><td>{_outcome_badges(entry.get('outcomes') or {})}</td></tr>"
        )
    lines = []
    for comparison in comparisons:
        words = comparison.get("words")
        if not isinstance(words, str):
            diff = comparison.get("difference") or {}
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
        "<th>tasks</th><th>score</th><th>outcomes</th></tr></thead><tbody>"
        + "".join(rows)
        + "</tbody></table>"
        + (
            f'<h3>Paired comparisons</h3><ul class="comparisons">{"".join(lines)}</ul>'
            if lines
            else ""
        )
        + "</section>"
    )


def pictures_section(data: Mapping[str, Any]) -> str:
    figures = [(svg, caption) for svg, caption in data["pictures"] if svg]
    if not figures:
        return ""
    body = "".join(f"<figure>{svg}<figcaption>{_e(c)}</figcaption></figure>" for svg, c in figures)
    return f'<section id="pictures"><h2>Pictures</h2><div class="figures">{body}</div></section>'


def loops_section(data: Mapping[str, Any]) -> str:
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


def side_section(data: Mapping[str, Any]) -> str:
    parts = []
    for title, a, b, pairs in data["sides"]:
        shown = pairs[:SIDE_ROWS]
        counts = {
            k: sum(1 for p in pairs if p["change"] == k)
            for k in ("regression", "improvement", "same")
        }
        rows = "".join(
            f'<tr class="{p["change"]}"><td>{_e(p["task"])}</td>'
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
            f"<tbody>{rows}</tbody></table>{more}"
        )
    if not parts:
        return ""
    return f'<section id="side"><h2>Side by side</h2>{"".join(parts)}</section>'


def _row_html(index: int, values: Sequence[Any]) -> str:
    cells = []
    for name, value in zip(ROW_COLUMNS, values, strict=True):
        if name == "task":
            cells.append(f'<td><a href="#task-{index}">{_e(value)}</a></td>')
        elif name == "outcome":
            cells.append(f'<td class="o-text-{_e(value)}">{_e(value)}</td>')
        else:
            cells.append(f"<td>{_e(_cell(value))}</td>")
    return f'<tr data-i="{index}">{"".join(cells)}</tr>'


def tasks_section(data: Mapping[str, Any]) -> str:
    rows, order = data["rows"], data["order"]
    first = "".join(_row_html(i, rows[i]) for i in order[:FIRST_PAGE])
    heads = "".join(f'<th data-col="{c}">{_e(_HEADINGS[c])}</th>' for c in ROW_COLUMNS)
    note = (
        f"Showing {min(FIRST_PAGE, len(rows))} of {len(rows)} tasks, the failures first. "
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
        f"<tbody>{first}</tbody></table>"
        '<p id="pager" class="js-only"><button type="button" id="prev">◀ previous</button> '
        '<span id="page"></span> <button type="button" id="next">next ▶</button></p>'
        '</section><section id="panel" hidden></section>'
    )


def render(data: Mapping[str, object]) -> str:
    """The page for ``data`` (``html_report.report_data``)."""
    return "".join(render_pieces(data))


def render_pieces(data: Mapping[str, Any]) -> Iterator[str]:
    """The page for ``data`` in pieces, each task's panel one piece: written as they
    come (``write_pieces_atomic``), the page never exists whole in memory, neither as
    text nor as bytes (at 3 000 tasks that was most of the run's peak memory)."""
    script = asset("report.js")
    digest = base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode()
    policy = (
        "default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
        f"script-src 'sha256-{digest}'; base-uri 'none'; form-action 'none'"
    )
    summary = data["summary"]
    title = f"agentbench run {summary.get('run_id')}"
    page_data = {
        "columns": list(ROW_COLUMNS),
        "rows": data["rows"],
        "order": data["order"],
        "suites": data["suites"],
        "models": data["models"],
        "outcomes": list(OUTCOMES),
        "loops": [i for i, _, _, _ in data["loops"]],
    }
    yield (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<meta http-equiv="Content-Security-Policy" content="{policy}">'
        '<meta name="referrer" content="no-referrer">'
        f"<title>{_e(title)}</title><style>{asset('report.css')}</style></head><body>"
        f'<header><h1>{_e(title)}</h1><p class="muted">{_e(summary.get("tool", {}).get("name"))} '
        f"{_e(summary.get('tool', {}).get('version'))} · results {_e(data['run_dir'])}</p></header>"
        + run_section(data)
        + models_section(data)
        + side_section(data)
        + pictures_section(data)
        + loops_section(data)
        + tasks_section(data)
        + f'<script type="application/json" id="run-data">{json_block(page_data)}</script>'
    )
    for i, block in data["details"].items():
        yield f'<script type="application/json" id="d-{i}">{block}</script>'
    yield f"<script>{script}</script></body></html>\n"
