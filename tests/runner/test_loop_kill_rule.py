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


def test_a_reply_that_arrives_whole_is_judged_by_the_same_budget() -> None:
    """One event holding the whole loop (an unstreamed reply): nothing is raised while it
    is read (there is nothing to cut), and ``check`` then raises with the reply; the
    kill falls at the piece where the streamed rule would have killed it."""
    from pytest_agentbench.core.usage import Usage
    from pytest_agentbench.models.base import Generation

    budget = 300
    policy = KillPolicy(threshold=0.8, window_s=1e9, budget_tokens=budget)
    streamed = _kill(policy)
    guard = LoopGuard(policy, clock=lambda: 0.0)
    guard(StreamEvent("text", LOOP))  # no LoopKilled while the reply is read
    assert guard.answer == LOOP  # all of it kept: it was paid for whole
    reply = Generation(text=LOOP, usage=Usage(input=10, output=3600))
    with pytest.raises(LoopKilled) as info:
        guard.check(reply)
    evidence = info.value.evidence
    assert info.value.whole is reply
    assert evidence["rule"] == "whole reply"
    assert evidence["period"] == streamed["period"]
    start = _held_from(LOOP, 0.8)
    assert start + budget * CHARS_PER_TOKEN <= evidence["chars"] < start + budget * 4 + 256
    assert "(the reply arrived whole)" in str(info.value)


def test_a_long_reply_without_a_loop_is_not_killed_whole() -> None:
    import random

    words = [
        "apple",
        "river",
        "stone",
        "cloud",
        "seven",
        "paper",
        "orange",
        "window",
        "garden",
        "silver",
    ]
    pick = random.Random(5).choice
    text = " ".join(pick(words) for _ in range(3000))  # 20 KB, no cycle
    guard = LoopGuard(KillPolicy(threshold=0.8, window_s=0.0, budget_tokens=1), clock=lambda: 0.0)
    guard(StreamEvent("text", text))
    assert guard.killed is None
    from pytest_agentbench.core.usage import Usage
    from pytest_agentbench.models.base import Generation

    reply = Generation(text=text, usage=Usage())
    assert guard.check(reply) is reply


def test_an_unstreamed_looping_reply_ends_loop_killed_with_its_own_usage(
    pytester: pytest.Pytester,
) -> None:
    """--agentbench-no-stream: the same looping reply a stream would have cut ends the
    attempt loop_killed (before, it was verified like any answer), and the usage is the
    provider's for the whole reply, not an estimate."""
    pytester.makefile(
        ".toml",
        bench_loops=SUITE.replace(
            "repeat = 600 }",
            "repeat = 600, usage = { prompt_tokens = 9, completion_tokens = 3600 } }",
        ),
    )
    result = pytester.runpytest("--agentbench", "--agentbench-no-stream", "-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*loop killed: period * in answer (the reply arrived whole)*"])
    run = (pytester.path / "agentbench-results" / "latest").resolve()
    (path,) = (run / "tasks").rglob("result.json")
    data = json.loads(Path(path).read_text())
    assert data["outcome"] == "loop_killed"
    assert data["loop"]["rule"] == "whole reply"
    assert data["usage"]["output"] == 3600 and not data["usage"].get("recovered")
