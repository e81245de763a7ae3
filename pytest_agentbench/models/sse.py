"""An incremental Server-Sent Events parser (the WHATWG ``text/event-stream`` rules).

Bytes arrive split anywhere: inside a line, between CR and LF, inside a UTF-8 sequence.
Each ``feed`` scans only the new bytes, so parsing a stream costs time linear in its size
however it was split. Comment lines and keep-alives produce nothing; an event still
waiting for its blank line when the stream ends is dropped, as the spec says.
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass

_LINE_END = re.compile(r"\r\n|\r|\n")


@dataclass(frozen=True)
class SSEEvent:
    """One dispatched event. ``id`` is the last event id seen on the stream so far."""

    data: str
    event: str = "message"
    id: str = ""


class SSEParser:
    """Feed bytes with ``feed``; it returns the events completed by them, in order.

    ``retry`` holds the last valid ``retry:`` value in milliseconds (None when never sent).
    """

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._line_parts: list[str] = []
        self._after_cr = False
        self._at_start = True
        self._data: list[str] = []
        self._event = ""
        self._last_id = ""
        self.retry: int | None = None

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        text = self._decoder.decode(chunk)
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
        events: list[SSEEvent] = []
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
            event = self._process_line(line)
            if event is not None:
                events.append(event)
            start = match.end()
        if start < len(text):
            self._line_parts.append(text[start:])
        return events

    def _feed_lf(self, text: str) -> list[SSEEvent]:
        """The common case, LF line ends only: split once, and take ``data:`` lines and
        blank lines without the general line processing (a third of the client's cost)."""
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
        events: list[SSEEvent] = []
        data = self._data
        for line in lines:
            if not line:
                event = self._dispatch()
                if event is not None:
                    events.append(event)
            elif line.startswith("data:"):
                data.append(line[6:] if line.startswith("data: ") else line[5:])
            else:
                self._process_line(line)
        return events

    def _process_line(self, line: str) -> SSEEvent | None:
        if not line:
            return self._dispatch()
        if line.startswith(":"):
            return None
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
        return None

    def _dispatch(self) -> SSEEvent | None:
        event_type, self._event = self._event, ""
        if not self._data:
            return None
        data = "\n".join(self._data)
        self._data.clear()
        return SSEEvent(data=data, event=event_type or "message", id=self._last_id)
