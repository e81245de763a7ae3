"""Token usage, normalised: the one shape every layer reads.

Each client normalises its provider's native usage into ``Usage`` (models/usage.py has the
per-provider arithmetic); records keep it as a dict with ``USAGE_FIELDS``. A field nobody
reported is None, never 0; a sum with an unknown term is unknown.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

USAGE_FIELDS = ("input", "output", "cache_read", "cache_write", "reasoning", "total")


@dataclass(frozen=True)
class Usage:
    """Normalised token usage. A field nobody reported is None, never 0; a sum with an
    unknown term is unknown. ``recovered`` marks output counted from streamed text."""

    input: int | None = None
    output: int | None = None
    cache_read: int | None = None
    cache_write: int | None = None
    reasoning: int | None = None
    total: int | None = None
    recovered: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {
            "input": self.input,
            "output": self.output,
            "cache_read": self.cache_read,
            "cache_write": self.cache_write,
            "reasoning": self.reasoning,
            "total": self.total,
            "recovered": self.recovered,
        }


def sum_usage(items: list[dict[str, Any]]) -> dict[str, Any]:
    """Add usage dicts field by field; a field unknown in any item is unknown in the sum."""
    total: dict[str, Any] = {}
    for name in USAGE_FIELDS:
        values = [item.get(name) for item in items]
        total[name] = sum(values) if values and all(v is not None for v in values) else None
    total["recovered"] = any(item.get("recovered") for item in items)
    return total
