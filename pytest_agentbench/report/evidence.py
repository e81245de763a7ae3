"""The one-line reason a task failed, from its record (the artifact probes come later).

Never raises: any surprise in a record degrades to the next tier, down to ``reward R``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

BODY_LIMIT = 100
MAX_METRICS = 3
_PAIRED_SUFFIXES = ("_found", "_passed", "_ok")


def collapse(text: str) -> str:
    """Whitespace runs become one space; ends stripped."""
    return re.sub(r"\s+", " ", text).strip()


def cut(text: str, limit: int = BODY_LIMIT) -> str:
    """``text`` cut to ``limit`` characters, with an ellipsis when anything was dropped."""
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def format_reward(reward: Any) -> str | None:
    """``0.4``-style text for a numeric reward; None when there is none to show."""
    if isinstance(reward, bool) or not isinstance(reward, int | float) or math.isnan(reward):
        return None
    return f"{reward:.3g}"


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def metric_breakdown(metrics: Mapping[str, Any]) -> str | None:
    """``x found 2/3, y 0, z 1``: numeric metrics, ``reward`` excluded; ``<x>_found`` (or
    ``_passed`` / ``_ok``) pairs with a positive ``<x>_total`` and sorts by its fraction;
    other metrics sort zero first, then partial credit, then perfect; at most three."""
    numeric = {k: v for k, v in metrics.items() if k != "reward" and _is_number(v)}
    shown: list[tuple[float, int, str]] = []
    used: set[str] = set()
    for order, (name, value) in enumerate(numeric.items()):
        for suffix in _PAIRED_SUFFIXES:
            base = name[: -len(suffix)]
            total = numeric.get(f"{base}_total")
            if name.endswith(suffix) and total is not None and total > 0:
                shown.append((value / total, order, f"{base} {suffix[1:]} {value:g}/{total:g}"))
                used.update({name, f"{base}_total"})
                break
    for order, (name, value) in enumerate(numeric.items()):
        if name not in used:
            rank = 0.0 if value == 0 else (0.5 if 0 < value < 1 else 1.0)
            shown.append((rank, order, f"{name} {value:g}"))
    if not shown:
        return None
    shown.sort(key=lambda item: (item[0], item[1]))
    return ", ".join(text for _, _, text in shown[:MAX_METRICS])


def failure_reason(record: Mapping[str, Any]) -> str:
    """The reason line for a record that did not pass (without the task name)."""
    try:
        return _reason(record)
    except Exception:  # mining must never break a run
        return "failed (no reason could be read from the record)"


def _reason(record: Mapping[str, Any]) -> str:
    outcome = record.get("outcome")
    reward = format_reward(record.get("reward"))
    prefix = f"reward {reward} — " if reward is not None else ""
    if outcome == "harness_error":
        return "harness error: " + cut(collapse(str(record.get("error") or "unknown error")))
    if outcome == "timeout":
        return prefix + cut(collapse(str(record.get("error") or "timeout")))
    verdict = record.get("verdict") or {}
    if isinstance(verdict, Mapping) and verdict.get("error"):
        return cut(collapse(str(verdict["error"])))
    body = None
    if isinstance(verdict, Mapping) and isinstance(verdict.get("metrics"), Mapping):
        body = metric_breakdown(verdict["metrics"])
    if outcome == "length_exceeded":
        limit = record.get("max_tokens")
        note = f"output-token limit ({limit}) reached" if limit else "output-token limit reached"
        body = f"{note}; {body}" if body else note
    if body:
        return prefix + cut(body)
    return f"reward {reward}" if reward is not None else str(outcome or "failed")
