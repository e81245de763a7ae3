"""Durations as people read them in messages: a deadline of ``0.685032`` s reads ``0.69 s``."""

from __future__ import annotations

import math


def seconds_text(value: float) -> str:
    """``value`` seconds rounded for a message, without a unit: whole seconds from 10 s
    (``20``), one decimal from 1 s (``1.5``), two below (``0.69``), and one significant
    digit for what would round to zero (``0.004``). Trailing zeros go (``2``, not
    ``2.0``); a value that is not finite is written as it is."""
    if not math.isfinite(value):
        return f"{value:g}"
    size = abs(value)
    if size >= 10:
        text = f"{value:.0f}"
    elif size >= 1:
        text = f"{value:.1f}"
    else:
        text = f"{value:.2f}"
        if size and float(text) == 0:
            text = f"{value:.1g}"
            return text if "e" not in text else f"{value:.10f}".rstrip("0")
    return text.rstrip("0").rstrip(".") if "." in text else text


def any_seconds_text(value: object) -> str:
    """``seconds_text`` of a number read from a record (a bool or anything else is
    ``unknown``): one format for every time a report shows (a loop kill's ``at 0.41 s``)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return "unknown"
    return seconds_text(float(value))
