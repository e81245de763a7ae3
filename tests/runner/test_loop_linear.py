"""Any answer size costs linear time in the loop watch, however it arrives: a non-streamed
answer of megabytes is one delta. The work is counted, not timed: the delta is a string
that counts every character its slices copy (bench/loops.py prints the speed)."""

from __future__ import annotations

from typing import Any

from loop_corpus_support import prose

from pytest_agentbench.models.base import StreamEvent
from pytest_agentbench.runner.loopguard import KillPolicy, LoopGuard
from pytest_agentbench.runner.loopwatch import LoopWatch


class CountingText(str):
    """A str whose slices are CountingText too and add their length to ``copied``."""

    copied = 0

    def __getitem__(self, key: Any) -> CountingText:
        piece = str.__getitem__(self, key)
        CountingText.copied += len(piece)
        return CountingText(piece)


def copied_by_feed(text: str) -> int:
    CountingText.copied = 0
    LoopWatch().feed(CountingText(text))
    return CountingText.copied


def test_one_big_delta_is_read_in_linear_work() -> None:
    text = prose(400_000)
    small, large = copied_by_feed(text[:100_000]), copied_by_feed(text)
    assert small <= 2 * 100_000
    assert large <= 2 * 400_000, f"{large} characters copied to feed 400 000"
    assert large <= 4.5 * small, "four times the text, four times the work"


def test_the_guard_feeds_a_whole_answer_in_linear_work() -> None:
    CountingText.copied = 0
    guard = LoopGuard(KillPolicy())
    guard(StreamEvent("text", CountingText(prose(300_000))))
    assert CountingText.copied <= 2 * 300_000


def test_one_delta_and_many_give_the_same_verdict() -> None:
    text = prose(20_000) + "I need to check again. Wait, " * 2_000
    whole, pieces = LoopWatch(), LoopWatch()
    whole.feed(text)
    for at in range(0, len(text), 37):
        pieces.feed(text[at : at + 37])
    assert whole.verdict() == pieces.verdict()
    assert whole.verdict().state == "looping"
