"""Token usage, normalised: the one shape every layer reads.

Each client normalises its provider's native usage into ``Usage`` (models/usage.py has the
per-provider arithmetic); a task record holds a ``Usage``, its JSON (``to_json``) has the
``USAGE_FIELDS`` and ``recovered``. A field nobody reported is None, never 0; a sum with
an unknown term is unknown.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pytest_agentbench.core.fastclass import dataclass
from pytest_agentbench.core.jsontypes import JsonObject, JsonValue

USAGE_FIELDS = ("input", "output", "cache_read", "cache_write", "reasoning", "total")


def _count(data: Mapping[str, object], name: str) -> int | None:
    value = data.get(name)
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"usage.{name}: expected int or null, got {type(value).__name__}")
    return value


@dataclass(frozen=True, slots=True)
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

    def as_dict(self) -> JsonObject:
        """The JSON form (records, result.json, the CTRF extra)."""
        return {
            "input": self.input,
            "output": self.output,
            "cache_read": self.cache_read,
            "cache_write": self.cache_write,
            "reasoning": self.reasoning,
            "total": self.total,
            "recovered": self.recovered,
        }

    to_json = as_dict

    @classmethod
    def from_json(cls, data: object) -> Usage:
        """The usage a JSON object holds (a field left out is unknown); ValueError naming
        the field when one is not a count."""
        if not isinstance(data, Mapping):
            raise ValueError(f"usage: expected a JSON object, got {type(data).__name__}")
        return cls(
            input=_count(data, "input"),
            output=_count(data, "output"),
            cache_read=_count(data, "cache_read"),
            cache_write=_count(data, "cache_write"),
            reasoning=_count(data, "reasoning"),
            total=_count(data, "total"),
            recovered=data.get("recovered") is True,
        )

    def get(self, name: str) -> int | None:
        """The field ``name`` (one of ``USAGE_FIELDS``), for code that picks fields by name."""
        value: int | None = getattr(self, name)
        return value


def sum_usage(items: Sequence[Mapping[str, JsonValue]]) -> JsonObject:
    """Add usage dicts field by field; a field unknown in any item is unknown in the sum."""
    total: JsonObject = {}
    for name in USAGE_FIELDS:
        values = [item.get(name) for item in items]
        ints = [v for v in values if isinstance(v, int)]
        total[name] = sum(ints) if values and len(ints) == len(values) else None
    total["recovered"] = any(item.get("recovered") for item in items)
    return total
