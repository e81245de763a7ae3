"""What people read about the judges: their cost apart from the model under test, their
calibration against people's labels, the judged pass rate raw and corrected for the
judge's error, and the "judge not calibrated" mark. Terminal and Markdown show these
lines; they read summary.json's ``judge`` (artifacts/judge_summary.py)."""

from __future__ import annotations

from collections.abc import Mapping

from pytest_agentbench.artifacts.judge_summary import not_calibrated_why
from pytest_agentbench.core.jsontypes import JsonValue

#: How many self-disagreeing tasks a line names before "… and N more".
MAX_NAMED = 5


def _num(value: JsonValue | None, digits: int = 3) -> str:
    return f"{value:.{digits}f}" if isinstance(value, int | float) else "n/a"


def estimate_text(estimate: JsonValue | None, digits: int = 3) -> str:
    """``0.900 (95 % CI 0.77–0.96)`` of an Estimate's JSON form; ``n/a`` when undefined."""
    if not isinstance(estimate, Mapping) or estimate.get("value") is None:
        return "n/a"
    lo, hi = estimate.get("lo"), estimate.get("hi")
    ci = f" (95 % CI {_num(lo, 2)}–{_num(hi, 2)})" if lo is not None and hi is not None else ""
    return f"{_num(estimate.get('value'), digits)}{ci}"


def _kappa_text(estimate: JsonValue | None, unknown: JsonValue | None) -> str:
    """κ with its interval, or ``unknown (<why>)`` where it cannot be estimated: never a
    zero-width interval standing for a measurement."""
    if isinstance(unknown, str) and unknown:
        return f"unknown ({unknown})"
    return estimate_text(estimate)


def _tokens(usage: Mapping[str, JsonValue]) -> str:
    words = {"input": "in", "output": "out", "total": "total"}
    parts = [f"{usage[k]:,} {w}" for k, w in words.items() if isinstance(usage.get(k), int)]
    return " / ".join(parts) if parts else "unknown"


def _list(table: JsonValue | None, key: str) -> list[JsonValue]:
    found = table.get(key) if isinstance(table, Mapping) else None
    return found if isinstance(found, list) else []


def _signed(estimate: JsonValue | None) -> str:
    if not isinstance(estimate, Mapping) or not isinstance(estimate.get("value"), int | float):
        return "n/a"
    lo, hi, value = estimate.get("lo"), estimate.get("hi"), estimate["value"]
    if isinstance(lo, int | float) and isinstance(hi, int | float):
        return f"{value:+.3f} (95 % CI {lo:+.2f} to {hi:+.2f})"
    return f"{value:+.3f}"


def standing_text(standing: JsonValue | None, *, short: bool = False) -> str:
    """What a score must carry when judges graded it (artifacts.judge_summary.standing):
    ``⚠ judge not calibrated (κ 0.100 < 0.4)``, the score corrected for the judge's
    error, or both; with ``short`` (a title) the mark or ``corrected 0.741`` alone.
    Empty when there is nothing to say."""
    if not isinstance(standing, Mapping):
        return ""
    parts = []
    status, fixed = standing.get("status"), standing.get("corrected")
    if status:
        why = standing.get("why")
        parts.append(f"⚠ {status}" + (f" ({why})" if why and not short else ""))
    if isinstance(fixed, Mapping) and not (short and status):
        shown = estimate_text(fixed)
        if short:
            value = fixed.get("value")
            shown = _num(value) if isinstance(value, int | float) else "n/a"
        parts.append(f"corrected for the judge's error {shown}")
    judged, scored = standing.get("judged"), standing.get("scored")
    text = "; ".join(parts)
    if text and judged != scored and not short:
        text = f"{judged} of {scored} scored task(s) judged: {text}"
    return text


def model_standing(summary: Mapping[str, JsonValue], model: str) -> JsonValue | None:
    """One model's judge standing read from summary.json (for a report that groups by
    model, not by suite × model): the "judge not calibrated" status when a judge graded
    any of its scored tasks, and its corrected rate from ``judge.pass_rate.by_model``."""
    rows = summary.get("scores")
    found = [
        row["judge_standing"]
        for row in (rows if isinstance(rows, list) else [])
        if isinstance(row, Mapping)
        and row.get("model") == model
        and isinstance(row.get("judge_standing"), Mapping)
    ]
    if not found:
        return None
    judge = summary.get("judge")
    rate = judge.get("pass_rate") if isinstance(judge, Mapping) else None
    fixed = None
    for one in _list(rate, "by_model"):
        if isinstance(one, Mapping) and one.get("model") == model:
            fixed = one.get("corrected")
    if fixed is None and len(found) == 1 and isinstance(found[0], Mapping):
        fixed = found[0].get("corrected")
    first = found[0] if isinstance(found[0], Mapping) else {}
    return {"status": first.get("status"), "why": first.get("why"), "corrected": fixed}


def judge_lines(judge: JsonValue | None) -> list[str]:
    """The judge block (empty when no judge ran)."""
    if not isinstance(judge, Mapping):
        return []
    lines: list[str] = []
    usage = judge.get("usage")
    judges = judge.get("judges")
    if isinstance(usage, Mapping):
        who = ""
        if isinstance(judges, list):
            who = ", ".join(
                f"{one.get('model')} (judge {str(one.get('fingerprint'))[:8]}, "
                f"template {str(one.get('template_hash'))[:8]})"
                for one in judges
                if isinstance(one, Mapping)
            )
        elapsed = usage.get("elapsed_s")
        lines.append(
            f"judge: {usage.get('calls')} call(s) · tokens {_tokens(usage)} · "
            f"{_num(elapsed, 1)}s"
            + (f" · {who}" if who else "")
            + " (apart from the model under test)"
        )
    if judge.get("errors"):
        lines.append(f"judge errors: {judge['errors']} task(s) without a usable verdict")
    cal = judge.get("calibration")
    if isinstance(cal, Mapping):
        lines.append(
            f"judge calibration ({cal.get('judged')} labelled answer(s) judged"
            + (f", {cal['errors']} error(s)" if cal.get("errors") else "")
            + f"): accuracy {estimate_text(cal.get('accuracy'))} · "
            f"κ {_kappa_text(cal.get('kappa'), cal.get('kappa_unknown'))} · "
            f"sensitivity {estimate_text(cal.get('sensitivity'))} · "
            f"specificity {estimate_text(cal.get('specificity'))}"
        )
        weighted = cal.get("weighted_kappa")
        if isinstance(weighted, Mapping):
            lines.append(
                f"  weighted κ (quadratic, scale 1–{weighted.get('scale')}): "
                f"{_kappa_text(weighted, weighted.get('unknown'))}"
            )
        confusion = cal.get("confusion")
        matrix = confusion.get("matrix") if isinstance(confusion, Mapping) else None
        if isinstance(matrix, list) and len(matrix) == 2:
            (tp, fn), (fp, tn) = (row if isinstance(row, list) else [0, 0] for row in matrix)
            lines.append(
                f"  confusion (label → judge): pass→pass {tp}, pass→fail {fn}, "
                f"fail→pass {fp}, fail→fail {tn}"
            )
    rate = judge.get("pass_rate")
    if isinstance(rate, Mapping):
        lines.append(
            f"judged pass rate {estimate_text(rate.get('raw'))} · corrected for the judge's "
            f"error {estimate_text(rate.get('corrected'))}"
        )
    for one in _list(rate, "by_model"):
        if isinstance(one, Mapping):
            lines.append(
                f"  {one.get('model')}: judged {estimate_text(one.get('raw'))} · corrected "
                f"{estimate_text(one.get('corrected'))}"
            )
    for pair in _list(rate, "pairs"):
        if isinstance(pair, Mapping):
            raw, fixed = pair.get("raw_difference"), pair.get("corrected_difference")
            lines.append(
                f"  {pair.get('first')} − {pair.get('second')}: judged "
                f"{_signed(raw)}, corrected {_signed(fixed)}: {pair.get('words')}"
            )
    if judge.get("status"):
        why = not_calibrated_why(dict(judge))
        least = judge.get("min_kappa")
        lines.append(f"⚠ {judge['status']}: {why} (--agentbench-judge-min-kappa {least})")
    disagreeing = judge.get("self_disagreeing")
    if isinstance(disagreeing, list) and disagreeing:
        named = ", ".join(str(d) for d in disagreeing[:MAX_NAMED])
        more = len(disagreeing) - MAX_NAMED
        lines.append(
            f"judge disagreed with itself on {len(disagreeing)} task(s): {named}"
            + (f" … and {more} more" if more > 0 else "")
        )
    return lines
