"""The loop watch against the labelled corpus, and its contracts: chunking never changes
the verdict, confirmation needs growth, cycles modulo numbers are flagged numeric, the
excerpt is one cycle."""

from __future__ import annotations

import random
import re

import pytest
from loop_corpus_support import CASES, Case, counting_loop, prose, sentence_repeated

from pytest_agentbench.runner.loopwatch import LoopVerdict, LoopWatch
from pytest_agentbench.runner.loopwindow import TextWindow

SENTENCE = "The answer is 42 because the two halves add up to the whole amount. "
WAIT = "I need to check again. Wait, "


def stream(text: str, seed: int = 0, watch: LoopWatch | None = None) -> tuple[LoopWatch, str]:
    """Feed ``text`` in random deltas of 1 to 64 characters, asking for a verdict after
    each; return the watch and the worst state seen on the way."""
    watch = watch or LoopWatch()
    rng = random.Random(seed)
    worst = "none"
    rank = {"none": 0, "suspect": 1, "looping": 2}
    at = 0
    while at < len(text):
        size = rng.randint(1, 64)
        watch.feed(text[at : at + size])
        at += size
        state = watch.verdict().state
        if rank[state] > rank[worst]:
            worst = state
    return watch, worst


def feed_by_chars(text: str) -> LoopWatch:
    watch = LoopWatch()
    for char in text:
        watch.feed(char)
    return watch


def feed_whole(text: str) -> LoopWatch:
    watch = LoopWatch()
    watch.feed(text)
    return watch


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_corpus_case_gets_its_label(case: Case) -> None:
    text = case.make()
    watch, worst = stream(text, seed=len(text))
    verdict = watch.verdict()
    if case.looping:
        assert verdict.state == "looping", (case.name, verdict)
        assert verdict.confirmed and verdict.score >= 0.8
        assert verdict.cycle is not None and verdict.cycle.numeric is case.numeric
    else:
        assert worst != "looping", (case.name, watch.peak)
        assert not watch.peak.confirmed and watch.peak.score < 0.8


def test_the_corpus_is_big_enough_and_balanced() -> None:
    assert len(CASES) >= 20
    assert len({case.name for case in CASES}) == len(CASES)
    assert sum(case.looping for case in CASES) >= 8
    assert sum(not case.looping for case in CASES) >= 8


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_chunking_never_changes_the_verdict(case: Case) -> None:
    text = case.make()
    whole = feed_whole(text)
    by_chars = feed_by_chars(text)
    random_deltas, _ = stream(text, seed=7)
    assert whole.chars == by_chars.chars == random_deltas.chars == len(text)
    assert whole.verdict() == by_chars.verdict() == random_deltas.verdict()
    assert whole.peak == by_chars.peak == random_deltas.peak


def test_a_digit_run_split_across_deltas_is_one_number() -> None:
    text = counting_loop()
    cut_in_numbers = LoopWatch()
    at = 0
    while at < len(text):
        # end every delta right after a digit, so digit runs keep crossing delta ends
        nxt = at + 1
        while nxt < len(text) and not text[nxt - 1].isdigit():
            nxt += 1
        cut_in_numbers.feed(text[at:nxt])
        at = nxt
    assert cut_in_numbers.verdict() == feed_whole(text).verdict()
    assert cut_in_numbers.verdict().state == "looping"


def first_qualifying(text: str) -> int:
    """Characters after which the watch first holds a qualifying, unconfirmed cycle."""
    watch = LoopWatch()
    for at in range(0, len(text), 256):
        watch.feed(text[at : at + 256])
        verdict = watch.verdict()
        if verdict.score >= 0.7:
            assert not verdict.confirmed and verdict.state == "suspect"
            return watch.chars
    raise AssertionError("the cycle never qualified")


def test_confirmation_needs_the_text_to_grow() -> None:
    text = WAIT * 200
    qualified_at = first_qualifying(text)
    watch = LoopWatch()
    watch.feed(text[:qualified_at])
    verdict = watch.verdict()
    assert verdict.state == "suspect" and not verdict.confirmed
    assert 0.7 <= verdict.score < 0.8
    assert verdict.cycle is not None and verdict.cycle.period == len(WAIT)
    # the same cycle, still active, but the text has not grown enough yet
    watch.feed(text[qualified_at : qualified_at + 255])
    assert not watch.verdict().confirmed
    # seen again after the text grew by 256 characters: confirmed
    watch.feed(text[qualified_at + 255 : qualified_at + 512])
    verdict = watch.verdict()
    assert verdict.state == "looping" and verdict.confirmed and verdict.score >= 0.8


def test_a_qualifying_cycle_that_stops_is_never_confirmed() -> None:
    text = WAIT * 200
    qualified_at = first_qualifying(text)
    watch = LoopWatch()
    watch.feed(text[:qualified_at] + prose(4000, seed=40))
    assert watch.peak.state == "suspect" and not watch.peak.confirmed
    assert watch.verdict().state == "none"


def test_a_loop_the_text_leaves_still_shows_as_the_peak() -> None:
    watch = feed_whole(WAIT * 100 + prose(6000, seed=41))
    assert watch.verdict().state == "none"
    assert watch.peak.state == "looping"
    assert watch.peak.cycle is not None and watch.peak.cycle.period == len(WAIT)


def test_counting_loop_is_a_numeric_cycle() -> None:
    verdict = feed_whole(counting_loop()).verdict()
    assert verdict.cycle is not None
    assert verdict.cycle.numeric
    assert verdict.cycle.period == len("Step 200: add 1 to get 201.\n")
    assert verdict.cycle.excerpt.startswith("Step ") and verdict.cycle.excerpt.endswith(".\n")


def test_numbers_that_repeat_exactly_are_not_numeric() -> None:
    verdict = feed_whole(sentence_repeated()).verdict()
    assert verdict.cycle is not None and not verdict.cycle.numeric


def test_the_excerpt_is_one_cycle_started_at_a_sentence() -> None:
    cycle = feed_whole(sentence_repeated()).verdict().cycle
    assert cycle is not None
    assert cycle.excerpt == SENTENCE
    assert cycle.period == len(SENTENCE)
    assert cycle.repetitions >= 30
    assert cycle.span == pytest.approx(cycle.repetitions * cycle.period, abs=1)


def test_a_long_cycle_excerpt_is_capped_and_comes_from_the_cycle() -> None:
    paragraph = prose(1500, seed=3).rstrip() + "\n\n"
    cycle = feed_whole(prose(800, seed=4) + paragraph * 6).verdict().cycle
    assert cycle is not None
    assert cycle.period == len(paragraph)
    assert len(cycle.excerpt) == 120
    assert cycle.excerpt in paragraph * 2


def test_the_score_grows_with_the_span() -> None:
    scores = [feed_whole(WAIT * reps).verdict().score for reps in (60, 200, 2000)]
    assert scores[0] >= 0.8
    assert scores[0] < scores[1] < scores[2] <= 1.0


def test_a_cycle_longer_than_max_period_is_not_looked_for() -> None:
    paragraph = prose(1500, seed=3).rstrip() + "\n\n"
    text = paragraph * 8
    assert feed_whole(text).verdict().state == "looping"
    short_sight = LoopWatch(max_period=1000)
    short_sight.feed(text)
    assert short_sight.verdict().state != "looping"


def test_the_verdict_is_cached_between_analyses() -> None:
    watch = feed_whole(WAIT * 100)
    verdict = watch.verdict()
    watch.feed("x" * 100)  # less than one batch: no new analysis
    assert watch.verdict() is verdict
    assert watch.chars == len(WAIT) * 100 + 100


def test_quiet_text_has_the_quiet_verdict() -> None:
    watch = feed_whole(prose(5000, seed=42))
    assert watch.verdict() == LoopVerdict("none", 0.0, None, False)
    assert feed_whole("").verdict().state == "none"


@pytest.mark.parametrize(
    "kwargs", [{"min_repetitions": 1}, {"min_span": 10}, {"max_period": 0}, {"batch": 0}]
)
def test_bad_settings_are_refused(kwargs: dict[str, int]) -> None:
    with pytest.raises(ValueError, match="LoopWatch needs"):
        LoopWatch(**kwargs)


def test_the_window_maps_normalised_offsets_back_to_raw_ones() -> None:
    rng = random.Random(5)
    pieces = ["Step ", "41", "9", ": add ", "1", " to ", "12345", ".\n", "x", "007", " "]
    raw = "".join(rng.choice(pieces) for _ in range(3000))
    # reference: where each normalised character starts in the raw text
    starts: list[int] = []
    for match in re.finditer(r"[0-9]+|[^0-9]", raw):
        starts.append(match.start())
    window = TextWindow(1024)
    at = 0
    while at < len(raw):
        size = rng.randint(1, 40)
        window.append(raw[at : at + size])
        at = min(at + size, len(raw))
        assert window.norm_total == len(re.sub(r"[0-9]+", "0", raw[:at]))
        for offset in range(max(0, window.norm_total - 300), window.norm_total):
            mapped = window.raw_offset(offset)
            if mapped is not None:
                assert mapped == starts[offset]
        assert window.raw_offset(window.norm_total) == window.raw_total == at
    assert window.norm == re.sub(r"[0-9]+", "0", raw)[-len(window.norm) :]
    assert window.raw == raw[-len(window.raw) :]
    assert window.raw_offset(0) is None  # long gone from the window


def _confirmed_at(text: str) -> int | None:
    """Characters fed (in 32-character deltas) until the watch first says ``looping``."""
    watch = LoopWatch()
    for at in range(0, len(text), 32):
        watch.feed(text[at : at + 32])
        if watch.verdict().state == "looping":
            return watch.chars
    return None


_LETTERS = str.maketrans("0123456789", "abcdefghij")


@pytest.mark.parametrize(
    "line",
    [
        "2024-01-05 12:00:01 retrying request 17\n",
        "The total is 42 apples and 17 pears, so far.\n",
        "x = 1234567\n",
        "Answer: 3.14159\n",
    ],
)
def test_an_exact_loop_with_numbers_is_confirmed_as_soon_as_one_without(line: str) -> None:
    """An exact cycle's span and growth count the characters a reader sees: its numbers
    are one placeholder each in the normalised text, which made such a loop need up to
    twice the text (or, when the text ended inside a number, look like a cycle modulo
    numbers and never be confirmed: ``x = 1234567``)."""
    with_digits = _confirmed_at(line * 400)
    with_letters = _confirmed_at(line.translate(_LETTERS) * 400)
    assert with_letters is not None
    assert with_digits == with_letters
    watch = LoopWatch()
    watch.feed(line * 400)
    cycle = watch.verdict().cycle
    assert cycle is not None and not cycle.numeric and cycle.period == len(line)
