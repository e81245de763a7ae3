"""An incremental Server-Sent Events parser (the WHATWG ``text/event-stream`` rules); the
JSON decoding of event data that every protocol client needs is models/event_json.py.

Bytes arrive split anywhere: inside a line, between CR and LF, inside a UTF-8 sequence.
Each ``feed`` scans only the new bytes, so parsing a stream costs time linear in its size
however it was split. Comment lines and keep-alives produce nothing; an event still
waiting for its blank line when the stream ends is dropped, as the spec says.

A streamed reply is mostly one event repeated with a different text: a ``StringSlot``
(models/event_json.py) learned from one such event reads the text of the next ones
without decoding their JSON, and ``SSEParser.feed_slot`` reads a chunk that is exactly one
of them without parsing it. Both answer only when the answer is provably what the general
path would give.
"""

from __future__ import annotations

import codecs
import re

from pytest_agentbench.core.fastclass import dataclass
from pytest_agentbench.models.event_json import StringSlot

_LINE_END = re.compile(r"\r\n|\r|\n")


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
