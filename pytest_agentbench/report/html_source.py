"""summary.json read one task record at a time, for the HTML report of a run of any size:
the file is parsed in chunks and each record of ``tasks`` is handed over and dropped, so
neither the file's text nor a list of every record is ever held (a record is about 1 KB
of JSON and several times that as Python objects).

The document is the one ``artifacts.summary`` writes (``tasks`` last, compact), but any
layout of the same JSON reads alike: members before and after ``tasks`` land in ``head``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

from pytest_agentbench.core.jsontypes import JsonObject, JsonValue
from pytest_agentbench.errors import AgentbenchError

CHUNK = 1 << 16
_SPACE = " \t\n\r"


class SummaryStream:
    """summary.json of ``run_dir``, at most ``limit`` bytes. Iterate :meth:`records` once;
    once it is exhausted, ``head`` holds every other member (settings, totals, scores…).

    AgentbenchError, with the messages of ``artifacts.summary.load_summary``: at once when
    the file is missing or too large, from :meth:`records` when the text is not a summary
    (after the records before the fault were handed over)."""

    def __init__(self, run_dir: Path, limit: int) -> None:
        self.path = run_dir / "summary.json"
        self.head: JsonObject = {}
        try:
            size = self.path.stat().st_size
        except FileNotFoundError:
            raise AgentbenchError(
                f"{run_dir}: no summary.json (is this an agentbench run folder?)"
            ) from None
        except OSError as exc:
            raise AgentbenchError(f"{self.path}: cannot read it: {exc}") from None
        if size > limit:
            raise AgentbenchError(f"{self.path}: larger than {limit} bytes")
        self._decode = json.JSONDecoder().raw_decode
        self._handle: TextIO | None = None
        self._text = ""
        self._at = 0
        self._ended = False

    def records(self) -> Iterator[JsonObject]:
        """Each task record (a JSON object; anything else in ``tasks`` is passed over), in
        the file's order."""
        try:
            with self.path.open(encoding="utf-8") as handle:
                yield from self._document(handle)
        except (OSError, UnicodeDecodeError) as exc:
            raise AgentbenchError(f"{self.path}: cannot read it: {exc}") from None

    def _document(self, handle: TextIO) -> Iterator[JsonObject]:
        self._handle = handle
        if self._next() != "{":
            raise self._not_a_summary()
        self._at += 1
        seen_tasks, first = False, True
        while self._next() != "}":
            if not first:
                self._expect(",")
                self._next()
            first = False
            key = self._value()
            if not isinstance(key, str):
                raise self._fault("a member name")
            self._next()
            self._expect(":")
            if key == "tasks" and self._next() == "[":
                self._at += 1
                seen_tasks = True
                yield from self._tasks()
            else:
                self._next()
                self.head[key] = self._value()
        self._at += 1
        if self._next() != "":
            raise self._fault("the end of the file")
        if not seen_tasks:
            raise self._not_a_summary()

    def _tasks(self) -> Iterator[JsonObject]:
        first = True
        while self._next() != "]":
            if not first:
                self._expect(",")
                self._next()
            first = False
            item = self._value()
            if isinstance(item, dict):
                yield item
        self._at += 1

    def _fill(self) -> bool:
        """Read on; False at the end of the file. Reads at least as much as is held, so a
        value longer than a chunk is decoded a few times, never once per chunk."""
        if self._ended or self._handle is None:
            return False
        more = self._handle.read(max(CHUNK, len(self._text) - self._at))
        self._text = self._text[self._at :] + more
        self._at = 0
        self._ended = not more
        return bool(more)

    def _next(self) -> str:
        """The next character that is not white space ("" at the end), not consumed."""
        while True:
            text, at = self._text, self._at
            while at < len(text) and text[at] in _SPACE:
                at += 1
            self._at = at
            if at < len(text):
                return text[at]
            if not self._fill():
                return ""

    def _expect(self, char: str) -> None:
        if self._next() != char:
            raise self._fault(repr(char))
        self._at += 1

    def _value(self) -> JsonValue:
        """The JSON value that starts here. A value that ends where the text read so far
        ends may go on (a number cut by a chunk), so it is decoded again with more."""
        while True:
            try:
                value: JsonValue
                value, end = self._decode(self._text, self._at)
            except ValueError:
                if self._fill():
                    continue
                raise self._fault("a JSON value") from None
            if end == len(self._text) and self._fill():
                continue
            self._at = end
            return value

    def _fault(self, wanted: str) -> AgentbenchError:
        return AgentbenchError(f"{self.path}: cannot read it: expected {wanted}")

    def _not_a_summary(self) -> AgentbenchError:
        return AgentbenchError(f"{self.path}: not a pytest-agentbench summary (no tasks list)")
