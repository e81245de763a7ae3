"""The kill rule with values other than the defaults, so a rule that is broken shows: a
threshold the guard ignores, or a token budget counted in characters (a kill four times
too early), failed no test while every test ran with 80 % and 1024 tokens or with 0."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_agentbench.core.stream import StreamEvent
from pytest_agentbench.runner.loopguard import CHARS_PER_TOKEN, KillPolicy, LoopGuard, LoopKilled
from pytest_agentbench.runner.loopwatch import LoopWatch

SENTENCE = "I should double-check the total once more before answering. "
LOOP = SENTENCE * 600
DELTA = 8  # divides the watch's analysis batch (256): a verdict changes at a delta's end


def _held_from(text: str, threshold: float) -> int:
    """Where a confirmed loop's score first reaches ``threshold``: the characters fed at
    the analysis point where the guard starts counting the kill window and budget."""
    watch = LoopWatch()
    for at in range(0, len(text), DELTA):
        watch.feed(text[at : at + DELTA])
        verdict = watch.verdict()
        if verdict.confirmed and verdict.score >= threshold:
            return watch.chars
    raise AssertionError("the loop never reached the threshold")


def _kill(policy: KillPolicy, text: str = LOOP) -> dict[str, object]:
    """Stream ``text`` through a guard whose clock never moves (so only the token budget
    can kill); the kill evidence."""
    guard = LoopGuard(policy, clock=lambda: 0.0)
    with pytest.raises(LoopKilled) as info:
        for at in range(0, len(text), DELTA):
            guard(StreamEvent("text", text[at : at + DELTA]))
    return dict(info.value.evidence)


@pytest.mark.parametrize("budget", [150, 700])
def test_the_token_budget_counts_tokens_not_characters(budget: int) -> None:
    evidence = _kill(KillPolicy(threshold=0.8, window_s=1e9, budget_tokens=budget))
    start = _held_from(LOOP, 0.8)
    assert evidence["rule"] == "token budget"
    assert evidence["chars"] == start + budget * CHARS_PER_TOKEN


@pytest.mark.parametrize("threshold", [0.85, 0.9])
def test_no_kill_before_the_score_reaches_the_threshold(threshold: float) -> None:
    """With the window at 0 a loop is killed at the first verdict at or over the
    threshold: not at the first confirmed one (which scores about 0.84)."""
    first_confirmed = _held_from(LOOP, 0.0)
    at_threshold = _held_from(LOOP, threshold)
    assert at_threshold > first_confirmed, "the threshold must be past the first verdict"
    evidence = _kill(KillPolicy(threshold=threshold, window_s=0.0, budget_tokens=10**6))
    assert evidence["score"] >= threshold
    assert evidence["chars"] == at_threshold


SUITE = f"""
[suite]
name = "loops"
verifier = {{ kind = "includes" }}

[[task]]
id = "answer-loop"
input = "Add the numbers."
target = "42"
scripted = [{{ text = "{SENTENCE}", repeat = 600 }}]
"""


def test_a_kill_percent_and_a_budget_given_as_options_are_the_rule(
    pytester: pytest.Pytester,
) -> None:
    """``--agentbench-loop-kill 90 --agentbench-loop-kill-tokens 300`` through a real run:
    the kill comes 1200 characters (300 tokens) after the score first reached 0.90, not
    300 characters after, and not after the first confirmed verdict at 0.8x."""
    pytester.makefile(".toml", bench_loops=SUITE)
    result = pytester.runpytest(
        "--agentbench",
        "--agentbench-loop-kill",
        "90",
        "--agentbench-loop-kill-tokens",
        "300",
        "--agentbench-loop-kill-seconds",
        "3600",
        "-p",
        "no:cacheprovider",
    )
    result.assert_outcomes(failed=1)
    run = (pytester.path / "agentbench-results" / "latest").resolve()
    (path,) = (run / "tasks").rglob("result.json")
    loop = json.loads(Path(path).read_text())["loop"]
    assert loop["rule"] == "token budget"
    assert loop["score"] >= 0.9
    start = _held_from(LOOP, 0.9)
    # the scripted stream's deltas need not end where the analysis points are
    assert start + 300 * CHARS_PER_TOKEN <= loop["chars"] < start + 300 * CHARS_PER_TOKEN + 256
