"""An incremental Server-Sent Events parser (the WHATWG ``text/event-stream`` rules), and
the JSON decoding of event data that every protocol client needs.

Bytes arrive split anywhere: inside a line, between CR and LF, inside a UTF-8 sequence.
Each ``feed`` scans only the new bytes, so parsing a stream costs time linear in its size
however it was split. Comment lines and keep-alives produce nothing; an event still
waiting for its blank line when the stream ends is dropped, as the spec says.

A streamed reply is mostly one event repeated with a different text: a ``StringSlot``
learned from one such event reads the text of the next ones without decoding their JSON,
and ``SSEParser.feed_slot`` reads a chunk that is exactly one of them without parsing it.
Both answer only when the answer is provably what the general path would give.
"""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Callable, Collection, Mapping
from typing import cast

from pytest_agentbench.core.fastclass import dataclass
from pytest_agentbench.core.jsontypes import JsonObject, JsonValue

_LINE_END = re.compile(r"\r\n|\r|\n")

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


@dataclass(frozen=True)
class SSEEvent:
    """One dispatched event. ``id`` is the last event id seen on the stream so far."""

    data: str
    event: str = "message"
    id: str = ""


#: An event as ``SSEParser.feed_fields`` returns it: ``(event type, data, last event id)``.
Fields = tuple[str, str, str]


class SSEParser:
    """Feed bytes with ``feed``; it returns the events completed by them, in order.
    ``feed_fields`` returns the same events as plain tuples, for hot loops.

    ``retry`` holds the last valid ``retry:`` value in milliseconds (None when never sent).
    """

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        # True while the decoder holds no partial UTF-8 sequence: the last chunk it saw
        # ended in an ASCII byte (or it saw none), so a chunk that also ends in one
        # decodes alike without it.
        self._decoder_clean = True
        # Nothing pending (decoder, line, data lines, CR, start of stream): the short cut
        # of feed_fields applies. Only the general path changes what it depends on.
        self._ready = False
        # The last chunk when it was exactly one event (short cut), and where its data
        # began: the framing ``framed`` puts around a slot.
        self._frame_text: str | None = None
        self._frame_end = 0
        self._line_parts: list[str] = []
        self._after_cr = False
        self._at_start = True
        self._data: list[str] = []
        self._event = ""
        self._last_id = ""
        self.retry: int | None = None

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        return [SSEEvent(data, event, last_id) for event, data, last_id in self.feed_fields(chunk)]

    def feed_fields(self, chunk: bytes) -> list[Fields]:
        """The events completed by ``chunk`` as ``(event type, data, last event id)``.

        The most common chunk, one whole event (``data: …`` or ``event: …`` then
        ``data: …``, LF line ends) with nothing pending, takes a short cut; anything
        else the general path."""
        if self._ready:
            # Ends in LF LF, so the chunk ends in ASCII: decoded alike without the decoder.
            text = chunk.decode("utf-8", "replace")
            if text[-2:] == "\n\n" and "\r" not in text:
                end = len(text) - 2
                first = text.find("\n")
                if first == end:
                    if text[:6] == "data: ":
                        event_type, self._event = self._event or "message", ""
                        self._frame_text, self._frame_end = text, 6
                        return [(event_type, text[6:end], self._last_id)]
                elif (
                    text[:7] == "event: "
                    and text.find("\n", first + 1) == end
                    and text.startswith("data: ", first + 1)
                ):
                    self._event = ""
                    self._frame_text, self._frame_end = text, first + 7
                    return [(text[7:first] or "message", text[first + 7 : end], self._last_id)]
        self._frame_text = None
        events = self._feed(chunk)
        self._ready = self._decoder_clean and not (
            self._line_parts or self._data or self._after_cr or self._at_start
        )
        return events

    def framed(self, slot: StringSlot) -> StringSlot | None:
        """``slot`` (learned on an event's data) extended to a whole chunk, for
        ``feed_slot``: within the framing of the last chunk when that chunk was exactly
        one event (``data: `` or ``event: …`` then ``data: ``; a blank line after).
        None when it was not."""
        if self._frame_text is None or self._event:
            return None
        return slot.within(self._frame_text[: self._frame_end], "\n\n")

    def feed_slot(self, chunk: bytes, framed: StringSlot) -> str | None:
        """The string in the slot when ``chunk`` is exactly one event that ``framed``
        matches and nothing is pending; the chunk is then consumed just as ``feed`` would
        consume it (one event of that type and data, nothing else changed). None
        otherwise, with nothing consumed: feed the chunk the ordinary way.

        A match cannot hide another parse: the framing and the text between the holes are
        those of a chunk that was one event, and no JSON token holds a CR or LF."""
        if not self._ready or self._event:
            return None
        return framed.match(chunk.decode("utf-8", "replace"))

    def _feed(self, chunk: bytes) -> list[Fields]:
        if self._decoder_clean and chunk and chunk[-1] < 0x80:
            text = chunk.decode("utf-8", "replace")
        else:
            text = self._decoder.decode(chunk)
            if chunk:
                self._decoder_clean = chunk[-1] < 0x80
        if not text:
            return []
        if self._at_start:
            self._at_start = False
            text = text.removeprefix("\ufeff")
        if self._after_cr and text.startswith("\n"):
            text = text[1:]
        self._after_cr = False
        if "\r" not in text:
            return self._feed_lf(text)
        events: list[Fields] = []
        start = 0
        for match in _LINE_END.finditer(text):
            if match.group() == "\r" and match.end() == len(text):
                # A CR at the very end may be the first half of a CRLF split across feeds.
                self._after_cr = True
            piece = text[start : match.start()]
            if self._line_parts:
                self._line_parts.append(piece)
                line = "".join(self._line_parts)
                self._line_parts.clear()
            else:
                line = piece
            self._process_line(line, events)
            start = match.end()
        if start < len(text):
            self._line_parts.append(text[start:])
        return events

    def _feed_lf(self, text: str) -> list[Fields]:
        """The common case, LF line ends only: split once, and take ``data:``, ``event:``
        and blank lines without the general line processing."""
        lines = text.split("\n")
        tail = lines.pop()
        if self._line_parts:
            if lines:
                self._line_parts.append(lines[0])
                lines[0] = "".join(self._line_parts)
                self._line_parts.clear()
            else:
                self._line_parts.append(tail)
                return []
        if tail:
            self._line_parts.append(tail)
        events: list[Fields] = []
        data = self._data
        for line in lines:
            if not line:
                if data:
                    joined = data[0] if len(data) == 1 else "\n".join(data)
                    events.append((self._event or "message", joined, self._last_id))
                    data.clear()
                self._event = ""
            elif line[:6] == "data: ":
                data.append(line[6:])
            elif line[:5] == "data:":
                data.append(line[5:])
            elif line[:7] == "event: ":
                self._event = line[7:]
            else:
                self._process_line(line, events)
        return events

    def _process_line(self, line: str, events: list[Fields]) -> None:
        if not line:
            self._dispatch(events)
            return
        if line.startswith(":"):
            return
        name, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id":
            if "\0" not in value:
                self._last_id = value
        elif name == "retry" and value.isascii() and value.isdigit():
            self.retry = int(value)

    def _dispatch(self, events: list[Fields]) -> None:
        event_type, self._event = self._event, ""
        if self._data:
            events.append((event_type or "message", "\n".join(self._data), self._last_id))
            self._data.clear()


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
