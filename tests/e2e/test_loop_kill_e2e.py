"""Live loop kills through the real scripted server: killed mid-stream with the evidence
kept, recovered thinking loops, counting loops, legitimate repetition left alone."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

SENTENCE = "I should double-check the total once more before answering. "
COUNTING = "".join(f"Step {i}: add one to {i} to get {i + 1}.\\n" for i in range(1, 400))
LEGIT = (
    "=" * 80
    + "\\n| id | value |\\n|----|-------|\\n"
    + "".join(f"| {i} | {i * i} |\\n" for i in range(40))
    + "zeros = ["
    + ", ".join(["0"] * 100)
    + "]\\ndone"
)

SUITE = f"""
[suite]
name = "loops"
verifier = {{ kind = "includes" }}

[[task]]
id = "answer-loop"
input = "Add the numbers."
target = "42"
scripted = [{{ text = "{SENTENCE}", repeat = 400 }}]

[[task]]
id = "thinking-recovers"
input = "Add the numbers."
target = "42"
scripted = [{{ thinking = "{SENTENCE * 30}", text = "The total is 42." }}]

[[task]]
id = "counting-loop"
input = "Count."
target = "done"
scripted = ["{COUNTING}"]

[[task]]
id = "legit-structure"
input = "Print the report."
target = "done"
scripted = ["{LEGIT}"]
"""


def results(pytester: pytest.Pytester) -> dict[str, dict]:
    run = (pytester.path / "agentbench-results" / "latest").resolve()
    return {
        p.parent.name.split("[")[0]: json.loads(p.read_text())
        for p in (run / "tasks").rglob("result.json")
    }


def test_loops_are_killed_live_and_legitimate_repetition_is_not(
    pytester: pytest.Pytester,
) -> None:
    pytester.makefile(".toml", bench_loops=SUITE)
    result = pytester.runpytest("--agentbench", "-v", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2, failed=2)
    found = results(pytester)

    killed = found["answer-loop"]
    assert killed["outcome"] == "loop_killed"
    loop = killed["loop"]
    assert loop["channel"] == "answer" and loop["period"] == len(SENTENCE)
    assert loop["score"] >= 0.8 and loop["rule"] == "token budget"
    answer = killed["attempts"][0]["answer"]
    assert answer.startswith(SENTENCE) and len(answer) < len(SENTENCE) * 400  # cut mid-way
    assert killed["attempts"][0]["usage"]["recovered"] is True

    counting = found["counting-loop"]
    assert counting["outcome"] == "loop_killed"
    assert counting["loop"]["numeric"] is True

    recovered = found["thinking-recovers"]
    assert recovered["outcome"] == "passed"
    assert recovered["loop"]["recovered"] is True

    legit = found["legit-structure"]
    assert legit["outcome"] == "passed"
    assert legit["attempts"][0]["loop"]["channels"]["answer"]["state"] != "looping"

    result.stdout.fnmatch_lines(
        [
            "*::answer-loop LOOP KILLED*",
            f"✗ loops::answer-loop: *loop killed: period {len(SENTENCE)} ×* in answer at *",
        ]
    )
    ctrf = json.loads(
        ((pytester.path / "agentbench-results" / "latest").resolve() / "ctrf.json").read_text()
    )
    by_name = {t["name"].split("::")[-1]: t for t in ctrf["results"]["tests"]}
    assert by_name["answer-loop"]["rawStatus"] == "loop_killed"
    assert by_name["answer-loop"]["status"] == "failed"
    assert by_name["answer-loop"]["extra"]["pytest-agentbench.rollout"]["loop"]["period"] == len(
        SENTENCE
    )


def test_kill_zero_keeps_detection_without_killing(pytester: pytest.Pytester) -> None:
    pytester.makefile(".toml", bench_loops=SUITE)
    result = pytester.runpytest(
        "--agentbench", "--agentbench-loop-kill", "0", "-k", "answer", "-p", "no:cacheprovider"
    )
    result.assert_outcomes(failed=1, deselected=3)
    record = results(pytester)["answer-loop"]
    assert record["outcome"] == "failed"
    assert record["attempts"][0]["answer"] == SENTENCE * 400
    assert record["attempts"][0]["loop"]["channels"]["answer"]["state"] == "looping"


def test_the_window_kills_a_slow_stream_after_the_loop_held_long_enough(
    pytester: pytest.Pytester,
) -> None:
    pytester.makefile(
        ".toml",
        bench_slow=f"""
[suite]
verifier = {{ kind = "includes" }}
[[task]]
id = "slow-loop"
input = "x"
target = "42"
scripted = [{{ text = "{SENTENCE}", repeat = 400, chunk_size = 64, chunk_delay_s = 0.004 }}]
""",
    )
    result = pytester.runpytest(
        "--agentbench",
        "--agentbench-loop-kill-seconds",
        "0.3",
        "--agentbench-loop-kill-tokens",
        "1000000",
        "-p",
        "no:cacheprovider",
    )
    result.assert_outcomes(failed=1)
    loop = results(pytester)["slow-loop"]["loop"]
    assert loop["rule"] == "window"
    assert loop["held_s"] >= 0.3
    assert loop["killed_s"] - loop["detected_s"] >= 0.3


def test_a_kill_in_a_repair_round_keeps_the_first_attempt(pytester: pytest.Pytester) -> None:
    pytester.makefile(
        ".toml",
        bench_repair=f"""
[suite]
repairs = 2
verifier = {{ kind = "number" }}
[[task]]
id = "repair-then-loop"
input = "2 + 2?"
target = 4
scripted = ["5", {{ text = "{SENTENCE}", repeat = 400 }}, "4"]
""",
    )
    result = pytester.runpytest("--agentbench", "-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    record = results(pytester)["repair-then-loop"]
    assert record["outcome"] == "loop_killed"
    assert record["attempts_used"] == 2
    assert record["attempts"][0]["answer"] == "5"
    assert record["first_attempt_reward"] == 0
    assert record["loop"]["attempt"] == 2


def test_an_example_suite_shows_a_live_kill_and_a_repair() -> None:
    suite = Path(__file__).resolve().parents[2] / "example_suites" / "bench_reasoning_loops.toml"
    text = suite.read_text()
    assert "repeat" in text and "repairs" in text
