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

This module is the page itself: its frame and policy, the task table, the data blocks,
all streamed in pieces; the sections above the table (the run, the judge, the models,
side by side, the pictures, the loop watch) are ``html_sections.py``'s.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
from collections.abc import Iterable, Iterator, Sequence
from importlib import resources

from pytest_agentbench.core.jsontypes import JsonValue
from pytest_agentbench.core.records import OUTCOMES
from pytest_agentbench.report.html_data import (
    ROW_COLUMNS,
    mapping,
)
from pytest_agentbench.report.html_sections import (
    PageData,
    cell,
    esc,
    judge_section,
    loops_section,
    models_section,
    pictures_section,
    run_section,
    side_section,
)

FIRST_PAGE = 100
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


def _row_html(index: int, values: Sequence[JsonValue]) -> str:
    cells = []
    for name, value in zip(ROW_COLUMNS, values, strict=True):
        if name == "task":
            cells.append(f'<td><a href="#task-{index}">{esc(value)}</a></td>')
        elif name == "outcome":
            cells.append(f'<td class="o-text-{esc(value)}">{esc(value)}</td>')
        else:
            cells.append(f"<td>{esc(cell(value))}</td>")
    return f'<tr data-i="{index}">{"".join(cells)}</tr>'


def tasks_section(first: Sequence[tuple[int, Sequence[JsonValue]]], total: int) -> str:
    """The task table's frame, holding ``first``: (task index, row) of the first page,
    the failures first, for a page read without JavaScript."""
    rows = "".join(_row_html(i, values) for i, values in first)
    heads = "".join(f'<th data-col="{c}">{esc(_HEADINGS[c])}</th>' for c in ROW_COLUMNS)
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
        f'<noscript><p class="muted">{esc(note)}</p></noscript>'
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
        f"<title>{esc(title)}</title><style>{asset('report.css')}</style></head><body>"
        f'<header><h1>{esc(title)}</h1><p class="muted">{esc(tool.get("name"))} '
        f"{esc(tool.get('version'))} · results {esc(data['run_dir'])}</p></header>"
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
