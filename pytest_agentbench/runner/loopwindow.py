"""The text window the loop watch analyses: the last characters of a stream, raw and with
every run of ASCII digits collapsed to one placeholder, and the map between the two.

Counting loops ("Step 41 ... Step 42 ...") only repeat once numbers are set aside, so cycles
are looked for in the normalised text; what a user sees (the period, the excerpt) comes
from the raw text. Text arrives in batches; for each batch the window remembers where it
starts in both texts, so a normalised offset maps back to a raw one by reading one batch.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right

_DIGITS = re.compile(r"[0-9]+")
PLACEHOLDER = "0"  # a digit itself, so in the normalised text it only stands for a digit run


class TextWindow:
    """The last ``size`` to ``2 * size`` characters of a stream, raw (``raw``) and
    normalised (``norm``). Offsets are absolute: counted from the start of the stream."""

    def __init__(self, size: int) -> None:
        self._size = size
        self.raw = ""
        self.norm = ""
        self.raw_total = 0  # raw characters appended so far
        self.norm_total = 0  # normalised characters appended so far
        self._in_digits = False
        self._starts: list[int] = []  # normalised offset where each batch starts
        self._raw_starts: list[int] = []  # raw offset where each batch starts
        self._carries: list[bool] = []  # whether the batch starts inside a digit run

    @property
    def raw_base(self) -> int:
        """The absolute raw offset of ``raw[0]``."""
        return self.raw_total - len(self.raw)

    def append(self, batch: str) -> int:
        """Add a batch of raw text; returns how many normalised characters it added (fewer
        than its length when it holds numbers, 0 when it only continues a digit run)."""
        carry = self._in_digits and "0" <= batch[:1] <= "9"
        if any(digit in batch for digit in "0123456789"):
            norm = _DIGITS.sub(PLACEHOLDER, batch)
            if carry:
                norm = norm[1:]  # the digit run began in the previous batch
            self._in_digits = "0" <= batch[-1] <= "9"
        else:
            norm = batch
            self._in_digits = False
        self._starts.append(self.norm_total)
        self._raw_starts.append(self.raw_total)
        self._carries.append(carry)
        # appending to a string nothing else refers to lets CPython grow it in place
        raw, normalised = self.raw, self.norm
        self.raw = self.norm = ""
        raw += batch
        normalised += norm
        self.raw_total += len(batch)
        self.norm_total += len(norm)
        if len(raw) > 2 * self._size:
            raw, normalised = raw[-self._size :], normalised[-self._size :]
            gone = bisect_left(self._raw_starts, self.raw_total - len(raw))
            del self._starts[:gone], self._raw_starts[:gone], self._carries[:gone]
        self.raw, self.norm = raw, normalised
        return len(norm)

    def raw_offset(self, offset: int) -> int | None:
        """The raw offset where the normalised character at ``offset`` begins (the end of
        the text for ``norm_total``); None when that text has left the window."""
        if offset >= self.norm_total:
            return self.raw_total
        i = bisect_right(self._starts, offset) - 1
        base = self.raw_base
        if i < 0 or self._raw_starts[i] < base:
            return None
        start = self._raw_starts[i]
        end = self._raw_starts[i + 1] if i + 1 < len(self._raw_starts) else self.raw_total
        text = self.raw[start - base : end - base]
        at = 0
        if self._carries[i]:
            match = _DIGITS.match(text)
            at = match.end() if match else 0
        left = offset - self._starts[i]  # normalised characters to step over
        for match in _DIGITS.finditer(text, at):
            gap = match.start() - at
            if left <= gap:
                break
            left -= gap + 1
            at = match.end()
            if left == 0:
                return start + at
        return start + at + left

    def raw_between(self, start: int, end: int) -> str:
        """The raw text between two absolute offsets inside the window."""
        base = self.raw_base
        return self.raw[start - base : end - base]
