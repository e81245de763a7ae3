"""A failure reason's text: one printable line (whitespace collapsed, control
characters removed), cut to ``BODY_LIMIT`` with an ellipsis, and its numbers written
plainly. Shared by the reason lines (``evidence.py``), the verifier evidence
(``verifier_evidence.py``) and the glue that shows an error in one line."""

from __future__ import annotations

import math
import re

BODY_LIMIT = 100
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def collapse(text: str) -> str:
    """Whitespace runs become one space; ends stripped."""
    return re.sub(r"\s+", " ", text).strip()


def cut(text: str, limit: int = BODY_LIMIT) -> str:
    """``text`` cut to ``limit`` characters, with an ellipsis when anything was dropped."""
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def clean(text: str) -> str:
    """One printable line: control characters and unencodable surrogates removed."""
    text = text.encode("utf-8", errors="replace").decode("utf-8")
    return collapse(_CONTROL.sub(" ", text))


def finite_number(value: object) -> float | None:
    """A finite number (not a bool); None for anything else."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def number_text(value: float) -> str:
    """``3``, ``0.25``, ``1000000``: whole numbers without exponent or ``.0``."""
    return str(int(value)) if value.is_integer() and abs(value) < 1e15 else f"{value:g}"


def format_reward(reward: object) -> str | None:
    """``0.4``-style text for a finite numeric reward; None when there is none to show."""
    number = finite_number(reward)
    return None if number is None else f"{number:.3g}"
