"""JSON values, typed: what the JSON edge hands the layers above it.

``json.loads`` returns ``Any``; the code that reads a file, a request or a reply turns
that into a ``JsonValue`` (or, better, into a record of its own) at once, so ``Any``
stays at the edge (``tests/package/test_any_edge.py`` keeps the count). A ``JsonValue`` read
back is narrowed with ``isinstance`` before use: that is where a malformed file or reply
is caught and named.
"""

from __future__ import annotations

from typing import TypeAlias

JsonScalar: TypeAlias = bool | int | float | str | None
#: Any JSON value (recursive).
JsonValue: TypeAlias = JsonScalar | list["JsonValue"] | dict[str, "JsonValue"]
#: A JSON object.
JsonObject: TypeAlias = dict[str, JsonValue]


def as_object(value: JsonValue | None) -> JsonObject:
    """``value`` when it is a JSON object, else an empty one (a file read leniently)."""
    return value if isinstance(value, dict) else {}


def as_list(value: JsonValue | None) -> list[JsonValue]:
    """``value`` when it is a JSON array, else an empty one."""
    return value if isinstance(value, list) else []


def as_int(value: JsonValue | None) -> int | None:
    """``value`` when it is an integer (not a bool), else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None
