"""Score gate, exit status, Markdown summary and the -v status words, through real runs."""

from __future__ import annotations

import json

import pytest

SUITE = """
[suite]
name = "gate"
verifier = {{ kind = "exact" }}
{suite_extra}
[[task]]
id = "a"
input = "say a"
target = "a"
scripted = ["a"]
[[task]]
id = "b"
input = "say b"
target = "b"
scripted = ["b"]
[[task]]
id = "c"
input = "say c"
target = "c"
scripted = ["c"]
[[task]]
id = "d"
input = "say d"
target = "d"
scripted = ["{d_reply}"]
"""


def make(pytester: pytest.Pytester, d_reply: str = "x", suite_extra: str = "") -> None:
    pytester.makefile(".toml", bench_gate=SUITE.format(d_reply=d_reply, suite_extra=suite_extra))


def summary(pytester: pytest.Pytester) -> dict:
    run = (pytester.path / "agentbench-results" / "latest").resolve()
    return json.loads((run / "summary.json").read_text())


def test_without_a_gate_any_failed_task_fails_the_run(pytester: pytest.Pytester) -> None:
    make(pytester)
    result = pytester.runpytest("--agentbench", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert summary(pytester)["gate"] is None


@pytest.mark.parametrize(("threshold", "expected"), [("0.75", 0), ("0.76", 1)])
def test_min_score_gates_the_exit_status(
    pytester: pytest.Pytester, threshold: str, expected: int
) -> None:
    make(pytester)
    result = pytester.runpytest(
        "--agentbench", "--agentbench-min-score", threshold, "-p", "no:cacheprovider"
    )
    result.assert_outcomes(passed=3, failed=1)
    assert result.ret == expected
    mark, sign, verdict = ("✓", "≥", "passed") if expected == 0 else ("✗", "<", "FAILED")
    result.stdout.fnmatch_lines(
        [f"gate {mark} run: score 0.750 {sign} {float(threshold):g}", f"gate: {verdict}"]
    )
    gate = summary(pytester)["gate"]
    assert gate["ok"] is (expected == 0)
    assert summary(pytester)["exit_status"] == expected


def test_a_suite_min_score_gates_that_suite(pytester: pytest.Pytester) -> None:
    make(pytester, suite_extra="min_score = 0.9")
    result = pytester.runpytest("--agentbench", "-p", "no:cacheprovider")
    assert result.ret == 1
    result.stdout.fnmatch_lines(["gate ✗ gate [[]scripted]: score 0.750 < 0.9"])


@pytest.mark.slow
def test_harness_errors_fail_the_gate_unless_counted_as_failures(pytester: pytest.Pytester) -> None:
    pytester.makefile(
        ".toml",
        bench_err="""
[suite]
verifier = { kind = "exact" }
[[task]]
id = "ok"
input = "x"
target = "x"
scripted = ["x"]
[[task]]
id = "down"
input = "x"
target = "x"
scripted = [{ error = { status = 503, message = "maintenance" } }]
""",
    )
    result = pytester.runpytest(
        "--agentbench", "--agentbench-min-score", "0.5", "-p", "no:cacheprovider"
    )
    assert result.ret == 1
    result.stdout.fnmatch_lines(["gate ✓ run: score 1.000 ≥ 0.5", "gate ✗ 1 harness error(s)*"])
    result = pytester.runpytest(
        "--agentbench",
        "--agentbench-min-score",
        "0.5",
        "--agentbench-errors-as-failures",
        "-p",
        "no:cacheprovider",
    )
    assert result.ret == 0
    result.stdout.fnmatch_lines(["gate ✓ run: score 0.500 ≥ 0.5", "gate: passed"])
    assert summary(pytester)["totals"]["score"] == 0.5


def test_markdown_summary_goes_to_a_file_and_the_github_step_summary(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    step = pytester.path / "step-summary.md"
    step.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(step))
    make(pytester)
    pytester.runpytest(
        "--agentbench", "--agentbench-markdown", "out/summary.md", "-p", "no:cacheprovider"
    )
    text = (pytester.path / "out" / "summary.md").read_text()
    assert text.startswith("## agentbench — 4 tasks: 3 passed, 1 failed · score 0.750")
    assert "| gate | scripted | 4 | 3 | 1 | 0 | 0.750 | 0.750 |" in text
    assert "- ✗ `gate::d` — reward 0" in text
    assert "tasks/gate/d[scripted]" in text
    assert step.read_text() == "earlier step\n" + text


def test_verbose_words_show_reward_and_tokens(pytester: pytest.Pytester) -> None:
    make(pytester)
    result = pytester.runpytest("--agentbench", "-v", "-p", "no:cacheprovider")
    result.stdout.fnmatch_lines(
        [
            "*bench_gate.toml::a PASSED (reward 1 · * tokens)*",
            "*bench_gate.toml::d FAILED (reward 0 · * tokens)*",
        ]
    )
