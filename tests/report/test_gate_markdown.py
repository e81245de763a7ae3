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
    assert "| gate | scripted | 4 | 3 | 1 | 0 | 0.750 | 0.301–0.954 | 0.750 | 0.301–0.954 |" in text
    assert "Score 0.750 ± 0.217 (n=4, 95 % CI 0.301–0.954) · first try 0.750" in text
    assert "- ✗ `gate::d` — reward 0" in text
    # each bullet names the task's folder relative to the run folder, never the runner's path
    bullet = next(line for line in text.splitlines() if line.startswith("- ✗ `gate::d`"))
    assert bullet.endswith(" (`tasks/gate/d[scripted]`)"), bullet
    assert str(pytester.path) not in bullet
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


def test_the_gate_can_judge_the_intervals_lower_bound(pytester: pytest.Pytester) -> None:
    make(pytester)
    args = ("--agentbench", "--agentbench-min-score", "0.5", "-p", "no:cacheprovider")
    result = pytester.runpytest(*args, "--agentbench-markdown", "summary.md")
    assert result.ret == 0, "the point score 0.750 clears 0.5"
    result = pytester.runpytest(
        *args, "--agentbench-gate-on", "lower", "--agentbench-markdown", "summary.md"
    )
    assert result.ret == 1, "3 of 4 is not enough evidence of 0.5: the lower bound is 0.301"
    result.stdout.fnmatch_lines(
        ["gate ✗ run: 95 % CI lower bound 0.301 < 0.5 (score 0.750)", "gate: FAILED"]
    )
    gate = summary(pytester)["gate"]
    check = gate["checks"][0]
    lower = summary(pytester)["totals"]["stats"]["score"]["lo"]
    assert (check["on"], check["score"], check["point"]) == ("lower", lower, 0.75)
    assert summary(pytester)["settings"]["gate_on"] == "lower"
    assert "run 0.301 (95 % CI lower bound) (min 0.5)" in (pytester.path / "summary.md").read_text()


def test_gate_on_from_the_ini_file_also_gates_a_suite(pytester: pytest.Pytester) -> None:
    make(pytester, suite_extra="min_score = 0.3")
    pytester.makeini("[pytest]\nagentbench_gate_on = lower\n")
    result = pytester.runpytest("--agentbench", "-p", "no:cacheprovider")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["gate ✓ gate [[]scripted]: 95 % CI lower bound 0.301 ≥ 0.3 *"])
    pytester.makeini("[pytest]\nagentbench_gate_on = upper\n")
    result = pytester.runpytest("--agentbench", "-p", "no:cacheprovider")
    assert result.ret != 0
    result.stderr.fnmatch_lines(["*agentbench gate on: expected one of point, lower, got 'upper'*"])


REPAIRS = """
[suite]
name = "fix"
verifier = { kind = "exact" }
repairs = 2
[[task]]
id = "first"
input = "say a"
target = "a"
scripted = ["a"]
[[task]]
id = "second"
input = "say b"
target = "b"
scripted = ["x", "b"]
[[task]]
id = "third"
input = "say c"
target = "c"
scripted = ["x", "y", "c"]
[[task]]
id = "never"
input = "say d"
target = "d"
scripted = ["x", "y", "z"]
"""


def test_markdown_shows_the_repair_curve(pytester: pytest.Pytester) -> None:
    pytester.makefile(".toml", bench_fix=REPAIRS)
    pytester.runpytest("--agentbench", "--agentbench-markdown", "s.md", "-p", "no:cacheprovider")
    totals = summary(pytester)["totals"]
    curve = totals["repair_curve"]
    assert [(r["round"], r["score"]["value"], r["new_passes"]) for r in curve] == [
        (0, 0.25, 1),
        (1, 0.5, 1),
        (2, 0.75, 1),
    ]
    assert sum(r["tokens"] for r in curve) == totals["usage"]["total"]
    text = (pytester.path / "s.md").read_text()
    assert "| round | score | 95 % CI | n | new passes | tokens |" in text
    low, high = curve[2]["score"]["lo"], curve[2]["score"]["hi"]
    assert f"| 2 | 0.750 | {low:.3f}–{high:.3f} | 4 | 1 | {curve[2]['tokens']} |" in text
    assert "Score 0.750 ± 0.217 (n=4, 95 % CI 0.301–0.954) · first try 0.250" in text
