"""The report's pictures as plain inline SVG: the outcome mix per suite, the score by
repair round, distributions (tokens, wall time) and the loop-watch score over a stream.

Every function returns a complete ``<svg>`` element as text (or "" when there is nothing
to draw). Labels go through ``html.escape``; every other value is a number we format, so
nothing a model or a task file wrote can become markup. Colours come from the page's CSS
classes (``o-<outcome>``), so the pictures follow its light and dark themes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from html import escape

from pytest_agentbench.core.jsontypes import JsonValue
from pytest_agentbench.core.records import OUTCOMES

WIDTH = 540


def _f(value: float) -> str:
    return f"{value:.1f}".rstrip("0").rstrip(".")


def _svg(width: int, height: int, title: str, body: list[str]) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
        f'width="{width}" height="{height}" role="img" aria-label="{escape(title)}">'
        f"<title>{escape(title)}</title>" + "".join(body) + "</svg>"
    )


def _text(x: float, y: float, text: str, anchor: str = "start", cls: str = "lbl") -> str:
    return (
        f'<text x="{_f(x)}" y="{_f(y)}" text-anchor="{anchor}" class="{cls}">{escape(text)}</text>'
    )


def outcome_mix(groups: Sequence[tuple[str, Mapping[str, JsonValue]]]) -> str:
    """One stacked bar per group (a suite, or a suite × model): the share of each
    outcome, with the counts in each bar's tooltip."""
    groups = [(label, o) for label, o in groups if sum(_int(o.get(k)) for k in OUTCOMES)]
    if not groups:
        return ""
    left, bar, gap = 150, 18, 8
    height = 30 + len(groups) * (bar + gap) + 24
    span = WIDTH - left - 44
    body = []
    for index, (label, outcomes) in enumerate(groups):
        y = 20 + index * (bar + gap)
        total = sum(_int(outcomes.get(k)) for k in OUTCOMES)
        body.append(_text(left - 6, y + bar - 5, label[:28], "end"))
        x = float(left)
        for outcome in OUTCOMES:
            count = _int(outcomes.get(outcome))
            if not count:
                continue
            w = span * count / total
            body.append(
                f'<rect x="{_f(x)}" y="{y}" width="{_f(w)}" height="{bar}" class="o-{outcome}">'
                f"<title>{escape(label)}: {count} {outcome}</title></rect>"
            )
            x += w
        body.append(_text(left + span + 6, y + bar - 5, str(total), cls="lbl small"))
    legend_y = height - 8
    x = 10.0
    for outcome in OUTCOMES:
        body.append(
            f'<rect x="{_f(x)}" y="{legend_y - 9}" width="10" height="10" class="o-{outcome}"/>'
        )
        body.append(_text(x + 13, legend_y, outcome.replace("_", " "), cls="lbl small"))
        x += 18 + 6 * len(outcome)
    return _svg(WIDTH, height, "outcome mix per suite", body)


def _int(value: JsonValue) -> int:
    """A count read from JSON; 0 when it is absent (or empty)."""
    return int(value) if isinstance(value, int | float | str) and value else 0


def _float(value: JsonValue, default: float) -> float:
    return float(value) if isinstance(value, int | float | str) and value else default


def _y(value: float, top: float, height: float) -> float:
    return top + height * (1 - max(0.0, min(1.0, value)))


def score_by_round(curve: JsonValue) -> str:
    """The score after each repair round (0 is the first try) with its 95 % interval."""
    points: list[tuple[int, float, Mapping[str, JsonValue]]] = []
    for entry in curve if isinstance(curve, list) else []:
        score = entry.get("score") if isinstance(entry, Mapping) else None
        if not isinstance(score, Mapping):
            continue
        given = score.get("value")
        if isinstance(given, int | float) and isinstance(entry, Mapping):
            points.append((_int(entry.get("round")), given, score))
    if not points:
        return ""
    left, top, plot_h, height = 50, 14, 150, 214
    step = (WIDTH - left - 40) / max(1, len(points) - 1)
    body = [
        f'<line x1="{left}" y1="{_f(_y(v, top, plot_h))}" x2="{WIDTH - 20}" '
        f'y2="{_f(_y(v, top, plot_h))}" class="grid"/>'
        + _text(left - 6, _y(v, top, plot_h) + 4, f"{v:g}", "end", "lbl small")
        for v in (0.0, 0.25, 0.5, 0.75, 1.0)
    ]
    path = []
    for position, (number, value, est) in enumerate(points):
        x = left + 10 + position * step if len(points) > 1 else left + (WIDTH - left) / 2
        y = _y(float(value), top, plot_h)
        lo, hi = est.get("lo"), est.get("hi")
        if isinstance(lo, int | float) and isinstance(hi, int | float):
            body.append(
                f'<line x1="{_f(x)}" y1="{_f(_y(lo, top, plot_h))}" x2="{_f(x)}" '
                f'y2="{_f(_y(hi, top, plot_h))}" class="whisker"/>'
            )
        body.append(
            f'<circle cx="{_f(x)}" cy="{_f(y)}" r="4" class="point">'
            f"<title>round {number}: {value:.3f} (n={est.get('n')})</title></circle>"
        )
        body.append(_text(x, top + plot_h + 18, f"round {number}", "middle", "lbl small"))
        body.append(_text(x + 7, y - 6, f"{value:.3f}", "start", "lbl small"))
        path.append(f"{_f(x)},{_f(y)}")
    body.insert(0, f'<polyline points="{" ".join(path)}" class="curve"/>')
    body.append(_text(left, height - 6, "score by repair round (bars: 95 % CI)", cls="lbl small"))
    return _svg(WIDTH, height, "score by repair round", body)


def histogram(values: Sequence[float], what: str, unit: str, bins: int = 24) -> str:
    """The distribution of ``values`` (tokens, seconds) as a histogram; log-spaced bins
    when the values span more than two orders of magnitude."""
    values = [float(v) for v in values if v is not None and v >= 0]
    if not values:
        return ""
    low, high = min(values), max(values)
    log = low > 0 and high / low > 100
    if log:
        edges = [
            math.exp(math.log(low) + (math.log(high) - math.log(low)) * i / bins)
            for i in range(bins + 1)
        ]
    else:
        width = (high - low) / bins or 1.0
        edges = [low + width * i for i in range(bins + 1)]
    counts = [0] * bins
    for value in values:
        index = bins - 1
        for i in range(bins):
            if value < edges[i + 1]:
                index = i
                break
        counts[index] += 1
    left, top, plot_h, height = 40, 10, 120, 170
    span = (WIDTH - left - 20) / bins
    tallest = max(counts)
    body = [_text(left - 6, top + 8, str(tallest), "end", "lbl small")]
    for i, count in enumerate(counts):
        if not count:
            continue
        h = plot_h * count / tallest
        body.append(
            f'<rect x="{_f(left + i * span + 1)}" y="{_f(top + plot_h - h)}" '
            f'width="{_f(span - 2)}" height="{_f(h)}" class="bar">'
            f"<title>{count} task(s): {_num(edges[i])}–{_num(edges[i + 1])} {escape(unit)}</title>"
            "</rect>"
        )
    base = top + plot_h
    body.append(f'<line x1="{left}" y1="{base}" x2="{WIDTH - 20}" y2="{base}" class="axis"/>')
    body.append(_text(left, top + plot_h + 16, _num(low), cls="lbl small"))
    body.append(_text(WIDTH - 20, top + plot_h + 16, _num(high), "end", "lbl small"))
    scale = " (log scale)" if log else ""
    body.append(
        _text(left, height - 8, f"{what}: {len(values)} task(s), {unit}{scale}", cls="lbl small")
    )
    return _svg(WIDTH, height, f"{what} distribution", body)


def _num(value: float) -> str:
    if value >= 100:
        return f"{value:,.0f}"
    return f"{value:.3g}"


def loop_chart(loop: Mapping[str, JsonValue], threshold: float | None, width: int = 420) -> str:
    """The loop-watch score of one stream against the characters streamed, the kill
    threshold dashed, the kill point marked (a killed stream) and the point the cycle was
    confirmed."""
    given = loop.get("trace")
    trace = [
        (p[1], p[2])
        for p in (given if isinstance(given, list) else [])
        if isinstance(p, list) and len(p) == 3 and isinstance(p[1], int | float)
        and isinstance(p[2], int | float)
    ]  # fmt: skip
    if not trace:
        return ""
    killed = loop.get("killed")
    killed = killed if isinstance(killed, Mapping) else None
    left, top, plot_h, height = 36, 10, 110, 160
    last = max([p[0] for p in trace] + [_int(killed.get("chars")) if killed else 0]) or 1
    span = width - left - 14

    def x_of(chars: float) -> float:
        return left + span * chars / last

    body = [
        f'<line x1="{left}" y1="{_f(_y(v, top, plot_h))}" x2="{width - 14}" '
        f'y2="{_f(_y(v, top, plot_h))}" class="grid"/>'
        + _text(left - 4, _y(v, top, plot_h) + 4, f"{v:.1f}", "end", "lbl small")
        for v in (0.0, 0.5, 1.0)
    ]
    if threshold:
        level = _f(_y(threshold, top, plot_h))
        body.append(
            f'<line x1="{left}" y1="{level}" x2="{width - 14}" y2="{level}" class="threshold"/>'
        )
    points = " ".join(
        f"{_f(x_of(chars))},{_f(_y(float(score), top, plot_h))}" for chars, score in trace
    )
    body.append(f'<polyline points="{points}" class="loopline"/>')
    if killed is not None:
        x = x_of(_float(killed.get("chars"), last))
        y = _y(_float(killed.get("score"), 0.0), top, plot_h)
        body.append(
            f'<line x1="{_f(x)}" y1="{top}" x2="{_f(x)}" y2="{top + plot_h}" class="kill"/>'
        )
        body.append(
            f'<circle cx="{_f(x)}" cy="{_f(y)}" r="5" class="killpoint"><title>killed at '
            f"{killed.get('killed_s')} s, {killed.get('chars')} characters, score "
            f"{killed.get('score')}</title></circle>"
        )
        body.append(_text(x - 4, top + 12, "kill", "end", "lbl small killlbl"))
    body.append(_text(left, top + plot_h + 16, "0", cls="lbl small"))
    body.append(_text(width - 14, top + plot_h + 16, f"{last:,} characters", "end", "lbl small"))
    channel = str(loop.get("channel") or "")
    body.append(_text(left, height - 8, f"loop score over the {channel} stream", cls="lbl small"))
    return _svg(width, height, f"loop-watch score over the {channel} stream", body)


def cost_vs_score(points: Sequence[tuple[str, float, float, bool]]) -> str:
    """One dot per model: its cost (x, USD) against its score (y, 0-1); a model that is
    the cheapest for its score (no other model scores as well or better for less) is a
    ringed dot and its label says so. "" with fewer than two models of known cost."""
    if len(points) < 2:
        return ""
    left, top, plot_w, plot_h = 56, 16, WIDTH - 56 - 24, 200
    height = top + plot_h + 40
    most = max(cost for _, cost, _, _ in points) or 1.0
    body = [
        f'<line x1="{left}" y1="{top + plot_h}" x2="{left + plot_w}" y2="{top + plot_h}" '
        'class="axis"/>',
        f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + plot_h}" class="axis"/>',
        _text(left - 6, top + 8, "1", "end", "lbl small"),
        _text(left - 6, top + plot_h, "0", "end", "lbl small"),
        _text(left, top + plot_h + 16, "$0", "middle", "lbl small"),
        _text(left + plot_w, top + plot_h + 16, f"${most:.4g}", "end", "lbl small"),
        _text(left + plot_w / 2, height - 6, "cost (USD)", "middle", "lbl small"),
    ]
    for label, cost, score, cheapest in points:
        x = left + plot_w * (cost / most)
        y = _y(score, top, plot_h)
        mark = " ★ cheapest for its score" if cheapest else ""
        body.append(
            f'<circle cx="{_f(x)}" cy="{_f(y)}" r="{6 if cheapest else 4}" '
            f'class="dot{" frontier" if cheapest else ""}"><title>{escape(label)}: '
            f"score {score:.3f}, ${cost:.4f}{escape(mark)}</title></circle>"
        )
        anchor = "end" if x > left + plot_w * 0.7 else "start"
        dx = -9 if anchor == "end" else 9
        body.append(_text(x + dx, y + 4, label[:32] + (" ★" if cheapest else ""), anchor))
    return _svg(WIDTH, height, "cost against score per model", body)
