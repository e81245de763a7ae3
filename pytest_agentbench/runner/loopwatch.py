"""Loop watch: an incremental detector of degenerate repetition in streamed text.

A model that has fallen into a loop keeps writing the same thing, so the end of its text is
periodic: ``s[i] == s[i - p]`` for every recent position ``i``. The watch looks for such an
*active cycle* (period ``p``, the span it covers, the repetitions in that span) in the text
with every run of ASCII digits replaced by one placeholder, so counting loops ("Step 41 ...
Step 42 ...") are cycles too. Work is batched: the text is analysed at fixed offsets, every
``batch`` characters, and an analysis touches a bounded window, never the whole text. Because
the analysis points are fixed, the verdict never depends on how the stream was cut up.

Finding a cycle: the last 32 characters (the probe) are searched for within the last
``max_period`` characters; each earlier occurrence at distance ``d`` is a candidate period,
and the candidate whose periodic suffix is longest wins (the shortest period on a tie). Once
found, a cycle is extended cheaply for as long as the new text continues it.

When a cycle is a loop: its span and repetitions must reach thresholds that grow for tiny
periods ("====", "0, ") and for cycles modulo numbers (tables, logs), and a cycle modulo
numbers must hold some words (a CSV of numbers never loops). A qualifying cycle is
*confirmed* once it is seen again, still active, after the text grew by
``max(256, min(2p, 1024))`` characters; only a confirmed cycle makes the state ``looping``.
A weaker signal, broad repetition (how many 32-character pieces of the last 8 KiB already
occurred in the 4 KiB before them), can make the state ``suspect`` but never ``looping``.
"""

from __future__ import annotations

import math
import re
from collections import deque
from typing import Literal

from pytest_agentbench.core.fastclass import dataclass
from pytest_agentbench.runner.loopwindow import PLACEHOLDER, TextWindow

LoopState = Literal["none", "suspect", "looping"]

_WORD = re.compile(r"[^\W\d_]{2,}")

_PROBE = 32  # characters of the probe that finds candidate periods
_CANDIDATES = 8  # probe occurrences tried per analysis
_BROAD_STEP = 128  # one broad-repetition probe per this many characters
_BROAD_LOOKBACK = 4096  # a probe is repeated when it occurred this close before
_BROAD_WINDOW = 64  # probes in the coverage window (8 KiB of text)
_BROAD_MIN = 16  # probes needed before broad repetition says anything
_NUMERIC_WORDS = 3  # words a cycle modulo numbers needs before it can be a loop
_EXCERPT = 120


@dataclass(frozen=True)
class LoopCycle:
    """An active cycle: the end of the text repeats it.

    ``period`` is the length of one cycle and ``span`` the text the cycle covers, in
    characters of the raw text (for a cycle modulo numbers, whose length drifts as numbers
    grow, both are estimates). ``repetitions`` is span / period. ``excerpt`` is one cycle
    (at most 120 characters), started at a line or sentence start when it has one.
    ``numeric`` says the cycle repeats only modulo changing numbers.
    """

    period: int
    repetitions: float
    span: int
    excerpt: str
    numeric: bool


@dataclass(frozen=True)
class LoopVerdict:
    """What the watch thinks of the text so far.

    ``score`` is in [0, 1]: below 0.5 ``none``, 0.5 up to 0.8 ``suspect``, 0.8 or more only
    for a confirmed cycle (``looping``), growing with the span the cycle covers. ``cycle`` is
    the active cycle behind the score when that cycle alone is at least suspect, else None;
    ``confirmed`` says it was seen growing across two analyses, and holds exactly when the
    state is ``looping``.
    """

    state: LoopState
    score: float
    cycle: LoopCycle | None
    confirmed: bool


QUIET = LoopVerdict("none", 0.0, None, False)


class _Run:
    """The candidate cycle at the end of the normalised text."""

    __slots__ = ("cycle", "described_at", "numeric", "period", "run", "scale", "words")

    def __init__(self, period: int, run: int) -> None:
        self.period = period
        self.run = run  # trailing positions i with s[i] == s[i - period]
        self.numeric: bool | None = None  # decided once the cycle looks worth a look
        self.words = 0
        #: raw characters per normalised one in an exact cycle (its numbers are one
        #: placeholder each in the normalised text, several digits in the raw one), so its
        #: span and growth are measured in the characters a reader sees; 1 for a cycle
        #: modulo numbers, whose length drifts as the numbers grow
        self.scale = 1.0
        self.cycle: LoopCycle | None = None  # period, excerpt, numeric in raw terms
        self.described_at = 0  # normalised offset when ``cycle`` was worked out


def _periodic_run(s: str, n: int, d: int) -> int:
    """How many trailing positions of ``s[:n]`` satisfy ``s[i] == s[i - d]``: compares
    doubling blocks, then bisects the first block that differs."""
    limit = n - d
    run = 0
    step = 64
    while run < limit:
        size = min(step, limit - run)
        end = n - run
        if s[end - size : end] == s[end - size - d : end - d]:
            run += size
            step = min(step * 2, 8192)
            continue
        lo, hi = 0, size - 1  # the matching tail of this block is lo..hi long
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if s[end - mid : end] == s[end - mid - d : end - d]:
                lo = mid
            else:
                hi = mid - 1
        return run + lo
    return run


def _excerpt(text: str, length: int) -> str:
    """One cycle out of ``text`` (two cycles, the earlier ``length`` long), rotated to start
    after a line break or a sentence end in the earlier cycle when it has one."""
    start = text.find("\n", 0, length)
    if start < 0:
        start = text.find(". ", 0, length)
        start = 0 if start < 0 else start + 1
    while start < length and text[start] in " \n":
        start += 1
    return text[start : start + length][:_EXCERPT]


class LoopWatch:
    """Watch one channel of a streamed generation (thinking or answer) for loops.

    ``feed`` any deltas (one character or a megabyte); ``verdict`` is cached and costs
    nothing. The text is analysed every ``batch`` characters, so the verdict lags the text
    by less than ``batch`` characters and is the same however the text was cut into deltas.

    Thresholds: a cycle of period ``p`` (digit runs count as one character) is a loop
    candidate once it covers ``min_span`` characters (x2 for periods up to 16, x4 up to 4,
    x3 for a cycle modulo numbers) and ``min_repetitions`` repetitions (halved gradually as
    periods grow from 128 to 1024). Periods over ``max_period`` are not looked for.
    """

    def __init__(
        self,
        *,
        min_repetitions: float = 8,
        min_span: int = 1024,
        max_period: int = 4096,
        batch: int = 256,
    ) -> None:
        if min_repetitions < 2 or min_span < 64 or max_period < 1 or batch < 1:
            raise ValueError(
                "LoopWatch needs min_repetitions >= 2, min_span >= 64, max_period >= 1 and "
                f"batch >= 1; got min_repetitions={min_repetitions}, min_span={min_span}, "
                f"max_period={max_period}, batch={batch}"
            )
        self._min_repetitions = float(min_repetitions)
        self._min_span = min_span
        self._max_period = max_period
        self._batch = batch
        self._text = TextWindow(max(32768, 8 * max_period, 4 * batch))
        self._chars = 0
        self._next_analysis = batch
        self._pending: list[str] = []
        self._run: _Run | None = None
        self._seen: tuple[str, int, bool] | None = None  # qualifying cycle, offset first seen, raw
        self._next_probe = 0
        self._probes: deque[bool] = deque()
        self._probe_hits = 0
        self._verdict = QUIET
        self._peak = QUIET

    @property
    def chars(self) -> int:
        """Characters fed so far."""
        return self._chars

    @property
    def peak(self) -> LoopVerdict:
        """The highest-scoring verdict so far: a loop the text has since left (a thinking
        loop the model escaped on its own) still shows here."""
        return self._peak

    def verdict(self) -> LoopVerdict:
        """The verdict as of the last analysis point (cached; never raises)."""
        return self._verdict

    def feed(self, text: str) -> None:
        """Append a streamed delta of any size, in time linear in its size: a big delta
        (a non-streamed answer of megabytes) is read in batch-sized pieces by offset,
        never by cutting off what is left of it (a copy of the rest per batch)."""
        at, size = 0, len(text)
        while at < size:
            room = self._next_analysis - self._chars
            if size - at < room:
                self._pending.append(text[at:] if at else text)
                self._chars += size - at
                return
            self._pending.append(text[at : at + room])
            self._chars += room
            at += room
            self._next_analysis += self._batch
            self._analyse()

    def _analyse(self) -> None:
        grown = self._text.append("".join(self._pending))
        self._pending.clear()
        if grown:
            self._track_cycle(grown)
        self._track_broad()
        self._decide()

    def _track_cycle(self, grown: int) -> None:
        s, n = self._text.norm, len(self._text.norm)
        run = self._run
        if run is not None and n - grown - run.period >= 0:
            p = run.period
            if s[n - grown :] == s[n - grown - p : n - p]:
                run.run += grown
            else:
                run = self._discover(s, n)
        else:
            run = self._discover(s, n)
        self._run = run

    def _discover(self, s: str, n: int) -> _Run | None:
        """The candidate period whose periodic suffix is longest (ties: the shortest).

        When the probe sits in a stretch of a short period (a rule of "=" inside a longer
        cycle), its other occurrences say nothing new; a second probe across the start of
        that stretch finds the longer period."""
        best: _Run | None = None
        end = n  # where the probe ends
        for _ in range(2):
            if end <= _PROBE:
                break
            probe = s[end - _PROBE : end]
            low = max(0, end - _PROBE - self._max_period)
            high = end - 1
            stretch = -1
            for _ in range(_CANDIDATES):
                at = s.rfind(probe, low, high)
                if at < 0:
                    break
                d = end - _PROBE - at
                run = _periodic_run(s, n, d)
                if best is None or run + d > best.run + best.period:
                    best = _Run(d, run)
                if end == n and d <= _PROBE and run >= _PROBE:
                    stretch = n - run - d
                    break
                high = at + _PROBE - 1
            if stretch < 0:
                break
            end = stretch + _PROBE // 2
        return best

    def _cycle_ends(self, p: int) -> tuple[int | None, int | None, int | None]:
        """The raw offsets where the last three whole cycles of period ``p`` (normalised)
        end, latest first. When the raw text ends inside a run of digits, that number may
        still grow, so the cycles end one period earlier (None when that has left the
        window)."""
        text = self._text
        shift = p if "0" <= text.raw[-1:] <= "9" else 0
        last, middle, first = (text.raw_offset(text.norm_total - shift - k * p) for k in range(3))
        return last, middle, first

    def _classify(self, run: _Run) -> None:
        """Decide whether the cycle repeats exactly or only modulo numbers (left
        undecided while the text does not yet hold whole cycles to compare)."""
        text, p = self._text, run.period
        if PLACEHOLDER not in text.norm[max(0, len(text.norm) - 2 * p) :]:
            run.numeric = False
            return
        shifted = "0" <= text.raw[-1:] <= "9"
        if shifted and run.run < 2 * p:
            return  # the last number may be cut: compare once two whole cycles precede it
        run.words = len(_WORD.findall(text.norm, len(text.norm) - p))
        last, middle, first = self._cycle_ends(p)
        if last is None or middle is None or first is None:
            run.numeric = True  # the raw text has left the window: assume the stricter kind
        else:
            run.numeric = text.raw_between(middle, last) != text.raw_between(first, middle)
            if not run.numeric:
                run.scale = max(1.0, (last - middle) / p)

    def _describe(self, run: _Run) -> LoopCycle:
        """The cycle in raw terms. Period and excerpt are worked out once per run, and again
        every 1024 characters for a cycle modulo numbers, whose length drifts."""
        text, p = self._text, run.period
        repetitions = (run.run + p) / p
        stale = run.numeric and text.norm_total - run.described_at >= 1024
        if run.cycle is None or stale:
            run.described_at = text.norm_total
            last, middle, first = self._cycle_ends(p)
            if last is None or middle is None or first is None:
                period, excerpt = p, text.norm[len(text.norm) - p :][:_EXCERPT]
            else:
                period = last - middle
                excerpt = _excerpt(text.raw_between(first, last), middle - first)
            run.cycle = LoopCycle(period, 0.0, 0, excerpt, bool(run.numeric))
        period, excerpt = run.cycle.period, run.cycle.excerpt
        span = round(repetitions * period)
        return LoopCycle(period, round(repetitions, 2), span, excerpt, run.cycle.numeric)

    def _track_broad(self) -> None:
        s, n, total = self._text.norm, len(self._text.norm), self._text.norm_total
        while self._next_probe + _PROBE <= total:
            at = n - (total - self._next_probe)
            self._next_probe += _BROAD_STEP
            if at < 0:
                continue
            probe = s[at : at + _PROBE]
            hit = s.find(probe, max(0, at - _BROAD_LOOKBACK), at + _PROBE - 1) >= 0
            self._probes.append(hit)
            self._probe_hits += hit
            if len(self._probes) > _BROAD_WINDOW:
                self._probe_hits -= self._probes.popleft()

    def _needs(self, period: int, numeric: bool) -> int:
        """The span a cycle of this period must cover before it is a loop candidate: at
        least ``min_repetitions`` cycles (fewer for long periods) and ``min_span``
        characters (more for tiny periods and for cycles modulo numbers)."""
        shrink = min(1.0, math.log2(period / 128) / 3) if period > 128 else 0.0
        repetitions = self._min_repetitions * (1 - 0.5 * shrink)
        factor = 4 if period <= 4 else 2 if period <= 16 else 1
        if numeric:
            factor *= 3
        return max(self._min_span * factor, math.ceil(repetitions * period))

    def _span(self, run: _Run) -> float:
        """The characters the cycle covers (``run`` plus one period): counted in the raw
        text for an exact cycle with numbers in it (each number is one placeholder in the
        normalised text), else in the normalised text."""
        normalised = run.run + run.period
        if run.scale == 1.0:
            return normalised
        text = self._text
        start = text.raw_offset(text.norm_total - normalised)
        return normalised * run.scale if start is None else text.raw_total - start

    def _progress(self, run: _Run, numeric: bool) -> float:
        """How far the cycle is towards a loop candidate (1.0: it is one)."""
        return min(1.0, self._span(run) / self._needs(round(run.period * run.scale), numeric))

    def _cycle_score(self, run: _Run) -> tuple[float, bool]:
        """The score the active cycle alone earns, and whether it is confirmed."""
        if run.numeric is None and run.run >= run.period and self._progress(run, False) > 0.3:
            self._classify(run)
        p = run.period
        progress = self._progress(run, bool(run.numeric))
        if progress < 1.0:
            return 0.7 * progress, False
        if run.numeric and run.words < _NUMERIC_WORDS:
            return 0.6, False  # periodic data (numbers and punctuation) is not a loop
        cycle = self._text.norm[-p:]
        seen = self._seen
        # an exact cycle grows by the raw characters, one modulo numbers by normalised ones
        raw = run.scale != 1.0
        total = self._text.raw_total if raw else self._text.norm_total
        if seen is not None and seen[2] == raw and len(seen[0]) == p and cycle in seen[0] * 2:
            growth = total - seen[1]
        else:
            self._seen, growth = (cycle, total, raw), 0
        raw_p = round(p * run.scale)
        needed = max(256, min(2 * raw_p, 1024))
        if growth < needed:
            return 0.7 + 0.09 * growth / needed, False
        over = math.log2(self._span(run) / self._needs(raw_p, bool(run.numeric)))
        return 0.8 + 0.2 * min(1.0, over / 4), True

    def _decide(self) -> None:
        run = self._run
        cycle_score, confirmed = self._cycle_score(run) if run is not None else (0.0, False)
        if cycle_score < 0.7:
            self._seen = None
        broad = 0.0
        if len(self._probes) >= _BROAD_MIN:
            coverage = self._probe_hits / len(self._probes)
            broad = 0.75 * min(1.0, max(0.0, (coverage - 0.5) / 0.4))
        score = round(max(cycle_score, broad), 3)
        if score == 0.0:
            self._verdict = QUIET
            return
        state: LoopState = "looping" if confirmed else "suspect" if score >= 0.5 else "none"
        cycle = self._describe(run) if run is not None and cycle_score >= 0.5 else None
        self._verdict = LoopVerdict(state, score, cycle, confirmed)
        if score > self._peak.score:
            self._peak = self._verdict
