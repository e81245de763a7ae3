"""The JSON of a stream's events, decoded fast: ``parse_json`` (exactly ``json.loads``,
cheaper for an event's object) and ``StringSlot``, which reads the one string that
changes from event to event of a streamed reply without decoding the rest, answering only
when the answer is provably what decoding would give. models/sse.py frames the events.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Collection, Mapping
from typing import cast

from pytest_agentbench.core.jsontypes import JsonObject, JsonValue

#: The C scanner behind ``json.loads``, called without the wrapper's two regex matches.
#: ``JSONDecoder.__init__`` sets ``scan_once``; typeshed does not declare it.
_SCAN_JSON: Callable[[str, int], tuple[JsonValue, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]

#: A step into a decoded JSON value: an object's key or a list's index.
PathStep = str | int


def parse_json(text: str) -> JsonValue:
    """Exactly ``json.loads(text)`` (same value, same errors), cheaper for the common case
    of a JSON object with no surrounding whitespace: a stream's event data. The value is
    what JSON decodes to (``JsonValue``): a reader narrows it with ``isinstance``."""
    if text[:1] == "{" and text[-1:] == "}":
        try:
            value, end = _SCAN_JSON(text, 0)
        except (StopIteration, ValueError):
            end = -1
        if end == len(text):
            return value
    decoded: JsonValue = json.loads(text)
    return decoded


class StringSlot:
    """Stream events that repeat one JSON text except for one string value (a delta's
    text) and, optionally, top-level fields nobody reads (a sequence number, random
    padding): ``match`` returns that string without decoding the rest, or None.

    ``learn`` builds one from an event already decoded: it finds where the values sit in
    the text and proves it by decoding the text with other values in their places. A
    match then means exactly what decoding would: JSON is read left to right, so the same
    text around tokens of the same types makes the same object with those values changed.
    """

    __slots__ = ("_head", "_holes", "_last", "_start", "_tail")

    #: How many slots a client learns per stream at most: a server whose events vary in
    #: ways a slot cannot follow stops costing a learn per event.
    TRIES = 4

    def __init__(self, head: str, holes: list[tuple[type, str, bool]]) -> None:
        """``holes``: each hole's type, the text after it, and whether it is the value."""
        self._head = head
        self._start = len(head)
        self._holes = holes[:-1]
        kind, self._tail, is_value = holes[-1]
        self._last = (kind, is_value)

    @classmethod
    def learn(
        cls,
        text: str,
        obj: JsonObject,
        path: tuple[PathStep, ...],
        key: str,
        previous: Mapping[str, JsonValue],
        reads: Collection[str] = (),
    ) -> StringSlot | None:
        """The slot of ``obj[path…][key]`` (a string) in ``text``, the JSON text ``obj``
        was decoded from; None when it cannot be proven. Top-level fields not in
        ``reads`` whose string or integer values differ from those of ``previous`` (the
        event of this kind before it) become holes that match any value of their type."""
        try:
            value = _at(obj, path).get(key)
        except (LookupError, TypeError):
            return None
        if not isinstance(value, str):
            return None
        holes: list[tuple[str, str | int, bool]] = [(key, value, True)]
        for name, seen in obj.items():
            if name in reads or name == key or previous.get(name) == seen:
                continue
            if seen.__class__ in (str, int):
                holes.append((name, seen, False))
        spans: list[tuple[int, int, str]] = []
        for name, seen, _ in holes:
            span = _find(text, name, seen, spans)
            if span is None:
                return None
            spans.append(span)
        if not _proven(text, obj, path, holes, spans):
            return None
        order = sorted(range(len(spans)), key=lambda i: spans[i][0])
        following = [spans[i][0] for i in order[1:]] + [len(text)]
        return cls(
            text[: spans[order[0]][0]],
            [
                (type(holes[i][1]), text[spans[i][1] : stop], holes[i][2])
                for i, stop in zip(order, following, strict=True)
            ],
        )

    def within(self, before: str, after: str) -> StringSlot:
        """This slot with fixed text added before and after: the event's framing."""
        kind, is_value = self._last
        holes = [*self._holes, (kind, self._tail + after, is_value)]
        return StringSlot(before + self._head, holes)

    def match(self, text: str) -> str | None:
        """The string in the slot when ``text`` is the learned text with tokens of the
        same types in the holes; None otherwise (decode it the ordinary way)."""
        tail = self._tail
        if not (text.startswith(self._head) and text.endswith(tail)):
            return None
        scan = _SCAN_JSON
        position = self._start
        value: str | None = None
        try:
            for kind, after, is_value in self._holes:
                token, position = scan(text, position)
                if token.__class__ is not kind or not text.startswith(after, position):
                    return None
                position += len(after)
                if is_value:  # the value hole is the slot's string: its kind is str
                    value = cast(str, token)
            token, position = scan(text, position)
        except (StopIteration, ValueError):
            return None
        kind, is_value = self._last
        if token.__class__ is not kind or position + len(tail) != len(text):
            return None
        return cast(str, token) if is_value else value


def _probe(seen: str | int) -> str | int:
    """A value of the same type as ``seen`` and different from it."""
    if isinstance(seen, int):
        return seen + 1
    return "\0" if seen != "\0" else "\1"


def _find(
    text: str, name: str, seen: str | int, taken: list[tuple[int, int, str]]
) -> tuple[int, int, str] | None:
    """The span of the token after the first ``"name":`` whose value is ``seen`` (same
    type) and that overlaps no span already taken, with a probe token to put there."""
    for found in re.finditer(f'"{re.escape(name)}"\\s*:\\s*', text):
        start = found.end()
        try:
            value, end = _SCAN_JSON(text, start)
        except (StopIteration, ValueError):
            continue
        fits = all(end <= a or start >= b for a, b, _ in taken)
        if value.__class__ is seen.__class__ and value == seen and fits:
            return (start, end, json.dumps(_probe(seen)))
    return None


def _proven(
    text: str,
    obj: JsonObject,
    path: tuple[PathStep, ...],
    holes: list[tuple[str, str | int, bool]],
    spans: list[tuple[int, int, str]],
) -> bool:
    """True when the text with each span's probe decodes to ``obj`` with exactly the
    holes' values changed (the first hole at ``path``, the others at the top level)."""
    pieces, position = [], 0
    for start, end, probe in sorted(spans):
        pieces += [text[position:start], probe]
        position = end
    try:
        decoded = _at(parse_json("".join(pieces) + text[position:]), ())
        container = _at(decoded, path)
    except (ValueError, LookupError, TypeError):
        return False
    for name, seen, is_value in holes:
        where = container if is_value else decoded
        changed = _probe(seen)
        if where.get(name) != changed or where[name].__class__ is not changed.__class__:
            return False
        where[name] = seen
    return bool(decoded == obj)


def _at(obj: JsonValue, path: tuple[PathStep, ...]) -> JsonObject:
    """``obj[path[0]][path[1]]…``, which must be a dict (LookupError / TypeError if not)."""
    for step in path:
        if isinstance(obj, list) and isinstance(step, int):
            obj = obj[step]
            continue
        if not isinstance(obj, dict) or not isinstance(step, str):
            raise TypeError("no such step")
        obj = obj[step]
    if not isinstance(obj, dict):
        raise TypeError("not an object")
    return obj
