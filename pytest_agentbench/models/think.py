"""Inline ``<think>…</think>`` split out of a streamed answer.

Local reasoning models (Qwen, DeepSeek-R1 and their distills on vLLM, llama.cpp, Ollama)
often put their reasoning inside the answer text, as a block at its very start, when the
server runs no reasoning parser. The splitter gives that block the thinking channel so
verifiers see only the answer and the loop watch sees both channels apart.
"""

from __future__ import annotations

from typing import Literal

Channel = Literal["thinking", "text"]

#: Opening tag → its closing tag.
THINK_TAGS = {"<think>": "</think>", "<thinking>": "</thinking>"}


class ThinkSplitter:
    """Splits text fed in pieces into ``("thinking", …)`` and ``("text", …)`` pieces.

    Only a block that opens the text (after optional whitespace) counts, as reasoning
    models emit it; a tag anywhere else is answer text. The whitespace before the block
    and between ``</think>`` and the answer is dropped; the thinking is kept verbatim.
    Tags may be split across pieces at any position: up to a tag's length is held back
    until it is decided, so each character is looked at a bounded number of times (linear
    time). A block still open at ``flush`` stays thinking; whitespace alone stays text.
    """

    def __init__(self) -> None:
        self._state: Literal["start", "thinking", "after", "text"] = "start"
        self._lead: list[str] = []
        self._held = ""
        self._close = ""

    @property
    def decided(self) -> bool:
        """True once the rest is answer text: ``feed(text)`` is then ``[("text", text)]``
        for any non-empty text, and callers may skip it."""
        return self._state == "text"

    def feed(self, text: str) -> list[tuple[Channel, str]]:
        """The pieces decided by ``text``, in order; adjacent pieces of one channel merged."""
        out: list[tuple[Channel, str]] = []
        if self._state == "start":
            text = self._feed_start(text, out)
        if self._state == "thinking" and text:
            text = self._feed_thinking(text, out)
        if self._state == "after" and text:
            text = text.lstrip()
            if text:
                self._state = "text"
        if self._state == "text" and text:
            _put(out, "text", text)
        return out

    def flush(self) -> list[tuple[Channel, str]]:
        """The held-back rest at the end of the text: an unfinished tag or leading
        whitespace is answer text; the tail of an unclosed block is thinking."""
        out: list[tuple[Channel, str]] = []
        if self._state == "start":
            _put(out, "text", "".join(self._lead) + self._held)
        elif self._state == "thinking":
            _put(out, "thinking", self._held)
        self._state, self._lead, self._held = "text", [], ""
        return out

    def _feed_start(self, text: str, out: list[tuple[Channel, str]]) -> str:
        """Decide between a think block and plain text; returns the text not consumed."""
        for position, char in enumerate(text):
            if not self._held and char.isspace():
                self._lead.append(char)
                continue
            candidate = self._held + char
            if candidate in THINK_TAGS:
                self._state, self._close = "thinking", THINK_TAGS[candidate]
                self._lead, self._held = [], ""
                return text[position + 1 :]
            if any(tag.startswith(candidate) for tag in THINK_TAGS):
                self._held = candidate
                continue
            self._state = "text"
            _put(out, "text", "".join(self._lead) + self._held)
            self._lead, self._held = [], ""
            return text[position:]
        return ""

    def _feed_thinking(self, text: str, out: list[tuple[Channel, str]]) -> str:
        """Thinking up to the closing tag; returns what follows it (or "" while open)."""
        pending = self._held + text
        end = pending.find(self._close)
        if end >= 0:
            _put(out, "thinking", pending[:end])
            self._state, self._held = "after", ""
            return pending[end + len(self._close) :]
        keep = _tag_prefix_suffix(pending, self._close)
        _put(out, "thinking", pending[: len(pending) - keep])
        self._held = pending[len(pending) - keep :]
        return ""


def _tag_prefix_suffix(text: str, tag: str) -> int:
    """Length of the longest end of ``text`` that could begin ``tag`` (shorter than it)."""
    for size in range(min(len(tag) - 1, len(text)), 0, -1):
        if tag.startswith(text[-size:]):
            return size
    return 0


def _put(out: list[tuple[Channel, str]], channel: Channel, text: str) -> None:
    if not text:
        return
    if out and out[-1][0] == channel:
        out[-1] = (channel, out[-1][1] + text)
    else:
        out.append((channel, text))


def split_think(text: str) -> tuple[str, str]:
    """``(thinking, answer)`` of a whole text, for replies that were not streamed."""
    splitter = ThinkSplitter()
    pieces = splitter.feed(text) + splitter.flush()
    thinking = "".join(piece for channel, piece in pieces if channel == "thinking")
    return thinking, "".join(piece for channel, piece in pieces if channel == "text")
