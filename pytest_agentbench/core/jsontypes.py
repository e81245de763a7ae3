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
