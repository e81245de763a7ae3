"""A bounded, incremental reader for a verifier's inner CTRF report (``ctrf.json``).

A CTRF report may be far bigger than any whole-file read cap (long traces, many tests), and
its first failure is still the best evidence of why a task failed. So the cap is per test,
not per file: the file is read in :data:`CHUNK`-byte pieces, up to :data:`CTRF_SCAN_CAP`
bytes. Inside ``results.tests`` each element of at most :data:`TEST_CAP` characters is
decoded by :mod:`json` whole (fast); a bigger or broken one goes through a small scanner
that tracks just enough JSON structure, keeps only ``name``, ``status``, ``rawStatus`` and
``message`` (each cut to :data:`FIELD_CAP` characters) and skips everything deeper bracket
to bracket. Nesting is capped at :data:`MAX_DEPTH` and the scanner's work at
:data:`MAX_STEPS`, so hostile input costs a bounded time. Stdlib only.
"""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from pytest_agentbench.core.fastclass import dataclass
from pytest_agentbench.core.jsontypes import JsonObject, JsonValue

CHUNK = 64 * 1024
CTRF_SCAN_CAP = 32 * 1024 * 1024
TEST_CAP = 256 * 1024
FIELD_CAP = 2048
MAX_DEPTH = 64
MAX_STEPS = 250_000
_KEY_CAP = 64
_LITERAL_CAP = 64
_KEPT_FIELDS = frozenset({"name", "status", "rawStatus", "message"})
_ERROR_STATUSES = frozenset({"error", "errored", "broken"})

_STRING_BODY = re.compile(r'[^"\\]*(?:\\.[^"\\]*)*', re.DOTALL)
_DEEP_SKIP = re.compile(r'(?:[^"\[\]{}]+|"[^"\\]*(?:\\.[^"\\]*)*")*', re.DOTALL)
_STRUCTURE = re.compile(r'[{}\[\]",:]')
_BETWEEN_TESTS = re.compile(r"[\s,]*")
_JSON = json.JSONDecoder(strict=False)
_PARTIAL_ESCAPE = re.compile(r"\\(u[0-9a-fA-F]{0,3})?$")


@dataclass(frozen=True)
class CtrfTest:
    """The fields of one CTRF test the evidence line needs (strings, possibly cut)."""

    name: str
    status: str
    raw_status: str
    message: str

    @property
    def is_failure(self) -> bool:
        """A failed test or a pytest error (``setup_failed``, ``teardown_failed``, …)."""
        raw = self.raw_status.lower()
        return (
            self.status == "failed" or raw in _ERROR_STATUSES or raw.endswith(("_failed", "_error"))
        )


@dataclass(frozen=True)
class CtrfFindings:
    """What a CTRF report says about failures. Counts are None when unknown: the scan did
    not reach the end of ``results.tests`` and the report has no usable summary."""

    first_failure: CtrfTest | None
    failures: int | None
    passed: int | None
    total: int | None


class _Frame:
    __slots__ = ("expect_key", "is_object", "key")

    def __init__(self, is_object: bool) -> None:
        self.is_object = is_object
        self.expect_key = is_object
        self.key: str | None = None


class _CtrfScanner:
    """Feeds on text pieces of a CTRF document and tracks just enough JSON structure to find
    ``results.tests[*]`` and ``results.summary``. Malformed input stops it (``broken``);
    it never raises on any text."""

    def __init__(self) -> None:
        self.stack: list[_Frame] = []
        self.in_string = False
        self.escaped = False
        self.string_is_key = False
        self.parts: list[str] | None = None
        self.kept = 0
        self.cap = 0
        self.literal: list[str] = []
        self.literal_len = 0
        self.test: JsonObject | None = None
        self.summary: JsonObject = {}
        self.first_failure: CtrfTest | None = None
        self.failures = 0
        self.passed = 0
        self.total = 0
        self.tests_closed = False
        self.broken = False
        self.paused = False
        self.deep = False
        self.steps = 0

    @property
    def done(self) -> bool:
        return self.tests_closed or self.broken

    @property
    def at_tests_level(self) -> bool:
        """Directly inside the ``results.tests`` array, between elements."""
        return (
            not self.in_string
            and len(self.stack) == 3
            and self._path_is("tests")
            and not self.stack[2].is_object
        )

    def feed(self, text: str, start: int = 0) -> int:
        """Scan ``text`` from ``start``; returns where it stopped: the end, or just after
        the tests array opened or a test object closed (so a faster reader can take over)."""
        pos, end = start, len(text)
        self.paused = False
        while pos < end and not self.done and not self.paused:
            self.steps += 1
            if self.steps > MAX_STEPS:
                self.broken = True
                break
            if self.in_string:
                if self.escaped:
                    self._keep(text[pos])
                    self.escaped = False
                    pos += 1
                    continue
                stop = _skip(_STRING_BODY, text, pos)
                self._keep(text[pos:stop])
                if stop >= end:
                    return end
                if text[stop] == '"':
                    self.in_string = False
                    self._string_done()
                else:
                    self._keep("\\")
                    self.escaped = True
                pos = stop + 1
            elif self.deep:
                stop = _skip(_DEEP_SKIP, text, pos)
                if stop >= end:
                    return end
                self._structure(text[stop])
                pos = stop + 1
            else:
                match = _STRUCTURE.search(text, pos)
                stop = end if match is None else match.start()
                if stop > pos:
                    self._add_literal(text[pos:stop])
                if match is None:
                    return end
                self._structure(text[stop])
                pos = stop + 1
        return pos

    def _keep(self, piece: str) -> None:
        if self.parts is not None and self.kept < self.cap:
            piece = piece[: self.cap - self.kept]
            self.parts.append(piece)
            self.kept += len(piece)

    def _add_literal(self, piece: str) -> None:
        piece = piece.strip()
        if piece:
            self.literal_len += len(piece)
            if self.literal_len <= _LITERAL_CAP:
                self.literal.append(piece)

    def _flush_literal(self) -> None:
        text, too_long = "".join(self.literal), self.literal_len > _LITERAL_CAP
        self.literal, self.literal_len = [], 0
        if text and not too_long:
            try:
                value = json.loads(text)
            except ValueError:
                return
            self._scalar(value)

    def _structure(self, char: str) -> None:
        frame = self.stack[-1] if self.stack else None
        if char == '"':
            self.in_string = True
            self.string_is_key = frame is not None and frame.is_object and frame.expect_key
            capture = not self.deep and (self.string_is_key or self._at_test_field())
            self.parts = [] if capture else None
            self.kept = 0
            self.cap = _KEY_CAP if self.string_is_key else FIELD_CAP
            return
        self._flush_literal()
        if char in "{[":
            if len(self.stack) >= MAX_DEPTH:
                self.broken = True
                return
            self.stack.append(_Frame(is_object=char == "{"))
            self.deep = not self._tracked()
            if self._at_test_object():
                self.test = {}
            self.paused = self.at_tests_level
        elif char in "}]":
            if frame is None or frame.is_object != (char == "}"):
                self.broken = True
                return
            if self._at_test_object():
                self.add_test(self.test or {})
                self.test = None
                self.paused = True
            self.stack.pop()
            self.deep = not self._tracked()
            if len(self.stack) == 2 and self._path_is("tests"):
                self.tests_closed = True
        elif frame is not None and frame.is_object:
            frame.expect_key = char == ","
            if char == ",":
                frame.key = None

    def _tracked(self) -> bool:
        """Whether the innermost frame can hold something we keep: the root, ``results``,
        ``results.summary``, ``results.tests`` and each test object. Anything deeper is
        skipped bracket to bracket (``deep``), strings and all, without looking inside."""
        stack, depth = self.stack, len(self.stack)
        if depth <= 1:
            return depth == 0 or stack[0].is_object
        if not (stack[0].is_object and stack[0].key == "results" and stack[1].is_object):
            return False
        if depth == 2:
            return True
        if depth == 3:
            inner = stack[2].is_object
            return (self._path_is("summary") and inner) or (self._path_is("tests") and not inner)
        return depth == 4 and self._at_test_object()

    def _path_is(self, key: str) -> bool:
        """The two outer frames are ``{"results": {key: …`` ."""
        outer, results = self.stack[0], self.stack[1]
        return (
            outer.is_object and outer.key == "results" and results.is_object and results.key == key
        )

    def _at_test_object(self) -> bool:
        stack = self.stack
        return (
            len(stack) == 4
            and self._path_is("tests")
            and not stack[2].is_object
            and stack[3].is_object
        )

    def _at_test_field(self) -> bool:
        frame = self.stack[-1] if self.stack else None
        return (
            self.test is not None
            and self._at_test_object()
            and frame is not None
            and not frame.expect_key
            and frame.key in _KEPT_FIELDS
        )

    def _string_done(self) -> None:
        parts, self.parts = self.parts, None
        if parts is None:
            return
        text = _decode("".join(parts))
        frame = self.stack[-1] if self.stack else None
        if self.string_is_key and frame is not None:
            frame.key = text
        else:
            self._scalar(text)

    def _scalar(self, value: JsonValue) -> None:
        if not self.stack:
            return
        frame = self.stack[-1]
        if not frame.is_object or frame.expect_key or frame.key is None:
            return
        if self._at_test_field() and self.test is not None:
            self.test[frame.key] = value
        elif len(self.stack) == 3 and self._path_is("summary"):
            self.summary[frame.key] = value

    def add_test(self, fields: JsonObject) -> None:
        """Count one test of ``results.tests`` and keep it when it is the first failure."""
        test = CtrfTest(
            name=_text(fields.get("name")),
            status=_text(fields.get("status")),
            raw_status=_text(fields.get("rawStatus")),
            message=_text(fields.get("message")),
        )
        self.total += 1
        if test.status == "passed":
            self.passed += 1
        elif test.is_failure:
            self.failures += 1
            if self.first_failure is None:
                self.first_failure = test


def _skip(pattern: re.Pattern[str], text: str, pos: int) -> int:
    """Where a run of ``pattern`` (which may match nothing) starting at ``pos`` ends."""
    match = pattern.match(text, pos)
    return pos if match is None else match.end()


def _text(value: JsonValue) -> str:
    return value[:FIELD_CAP] if isinstance(value, str) else ""


def _decode(raw: str) -> str:
    """The text of a JSON string body that may have been cut mid-escape."""
    for candidate in (raw, _PARTIAL_ESCAPE.sub("", raw)):
        try:
            value = json.loads(f'"{candidate}"', strict=False)
        except ValueError:
            continue
        return value if isinstance(value, str) else raw
    return raw


def _count(value: JsonValue) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _scan(file: BinaryIO, scanner: _CtrfScanner) -> None:
    """Drive ``scanner`` over at most :data:`CTRF_SCAN_CAP` bytes of ``file``. Inside
    ``results.tests`` each element that fits in :data:`TEST_CAP` characters is decoded by
    :mod:`json` directly (fast); a bigger or broken one is left to the scanner."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    read = 0

    def more(text: str) -> str | None:
        nonlocal read
        chunk = file.read(min(CHUNK, CTRF_SCAN_CAP - read)) if read < CTRF_SCAN_CAP else b""
        read += len(chunk)
        return text + decoder.decode(chunk) if chunk else None

    text, pos = "", 0
    while not scanner.done:
        if pos >= len(text):
            pulled = more("")
            if pulled is None:
                return
            text, pos = pulled, 0
        if scanner.at_tests_level:
            pos = _skip(_BETWEEN_TESTS, text, pos)
            if pos < len(text) and text[pos] == "{":
                fields, text, pos = _decode_test(text, pos, more)
                if fields is not None:
                    scanner.add_test(fields)
                    continue
            elif pos >= len(text):
                continue
        pos = scanner.feed(text, pos)


def _decode_test(
    text: str, pos: int, more: Callable[[str], str | None]
) -> tuple[JsonObject | None, str, int]:
    """The test object at ``text[pos]`` decoded whole, with the text and the position after
    it; reads more while the object is incomplete and under :data:`TEST_CAP`. When it is
    too big or broken: None, with the text (and whatever was read) and the object's
    position, for the scanner to take over."""
    while True:
        try:
            value, end = _JSON.raw_decode(text, pos)
        except (ValueError, RecursionError):
            text, pos = text[pos:], 0
            grown = more(text) if len(text) < TEST_CAP else None
            if grown is None:
                return None, text, pos
            text = grown
            continue
        return (value if isinstance(value, dict) else {}), text, end


def scan_ctrf(path: Path) -> CtrfFindings | None:
    """The first failed (or errored) test of a CTRF report and the failure / pass / total
    counts; None when the report lists no failure. Reads at most :data:`CTRF_SCAN_CAP`
    bytes and holds at most :data:`TEST_CAP` characters of one test, or
    :data:`FIELD_CAP` of any field of a bigger one."""
    scanner = _CtrfScanner()
    with path.open("rb") as file:
        _scan(file, scanner)
    if scanner.test is not None:  # cut off inside a test: what it showed so far counts
        scanner.add_test(scanner.test)
    if scanner.first_failure is None:
        return None
    if scanner.tests_closed:
        return CtrfFindings(scanner.first_failure, scanner.failures, scanner.passed, scanner.total)
    summary = scanner.summary
    failed, passed, total = (_count(summary.get(k)) for k in ("failed", "passed", "tests"))
    if failed is not None and passed is not None and total is not None and failed >= 1:
        return CtrfFindings(scanner.first_failure, failed, passed, total)
    return CtrfFindings(scanner.first_failure, None, None, None)
