"""Comparing a run with a baseline run: the paired comparison function, and real runs
with --agentbench-baseline through pytester and the scripted provider."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from records_support import make_record

from pytest_agentbench import schemas
from pytest_agentbench.core.paired import mcnemar_exact
from pytest_agentbench.core.task_record import TaskRecord
from pytest_agentbench.report.compare import compare_records

N_TASKS = 8


def record(task: str, outcome: str, reward: float | None = None, model: str = "m") -> TaskRecord:
    if reward is None:
        reward = 1.0 if outcome == "passed" else (None if outcome == "harness_error" else 0.0)
    return make_record(suite="s", task_id=task, model=model, outcome=outcome, reward=reward)


def test_a_planted_regression_is_significant_and_listed() -> None:
    before = [record(f"t{i}", "passed") for i in range(10)]
    after = [record(f"t{i}", "failed" if i < 7 else "passed") for i in range(10)]
    found = compare_records(before, after)
    assert found.metric == "pass" and found.test == "McNemar exact"
    assert found.paired == 10 and found.excluded == 0
    assert found.p_value == mcnemar_exact(0, 7)
    assert found.difference.value == pytest.approx(-0.7)
    assert found.verdict == "worse" and found.significant
    assert found.regressions == tuple(f"s::t{i}" for i in range(7))
    assert "worse (significant at 0.05)" in found.words()


def test_equal_runs_and_mixed_changes_are_inconclusive_without_a_margin() -> None:
    """Without a margin nothing is called a tie: "no difference seen" is not evidence of
    none, and the words say what would decide it."""
    same = [record(f"t{i}", "passed" if i % 2 else "failed") for i in range(10)]
    tie = compare_records(same, same)
    assert tie.verdict == "inconclusive" and tie.p_value == 1.0 and tie.difference.value == 0
    assert "inconclusive — no difference seen; a margin" in tie.words()
    assert "smallest detectable difference ±" in tie.words()
    assert "tie" not in tie.words() and "within noise" not in tie.words()
    # one regression and one improvement: listed, but no difference
    after = list(same)
    after[0], after[1] = replace(same[0], outcome="passed"), replace(same[1], outcome="failed")
    mixed = compare_records(same, after)
    assert mixed.verdict == "inconclusive"
    assert mixed.regressions == ("s::t1",) and mixed.improvements == ("s::t0",)


def test_harness_errors_and_unpaired_tasks_are_excluded_and_counted() -> None:
    before = [record("a", "passed"), record("b", "harness_error"), record("c", "passed")]
    after = [record("a", "failed"), record("b", "passed"), record("c", "harness_error")]
    after.append(record("new", "passed"))
    found = compare_records(before, after)
    assert found.paired == 1 and found.excluded == 2
    assert found.only_first == 0 and found.only_second == 1
    assert found.regressions == ("s::a",)  # c is a harness error now: no regression
    assert "2 task(s) excluded: a harness error on either side" in found.notes()


def test_rewards_use_the_sign_test_and_a_paired_bootstrap() -> None:
    before = [record(f"t{i}", "failed", 0.5) for i in range(8)]
    after = [record(f"t{i}", "failed", 0.75) for i in range(8)]
    found = compare_records(before, after)
    assert found.metric == "reward" and found.test == "sign test"
    assert found.difference.method == "paired-bootstrap"
    assert found.difference.value == pytest.approx(0.25)
    assert found.verdict == "better"  # 8 of 8 up: p = 2/256


def test_nothing_paired_says_so() -> None:
    found = compare_records([record("a", "passed")], [record("b", "passed")])
    assert found.verdict == "none" and found.p_value is None
    assert "no task ran on both sides" in found.words()


def suite(replies: list[str]) -> str:
    tasks = "".join(
        f'[[task]]\nid = "t{i}"\ninput = "say ok"\ntarget = "ok"\nscripted = [{reply}]\n'
        for i, reply in enumerate(replies)
    )
    return f'[suite]\nname = "base"\nverifier = {{ kind = "exact" }}\n\n{tasks}'


OK = '"ok"'
WRONG = '"no"'
OUTAGE = '{ text = "ok", error = { status = 503, times = 50, retry_after = 0 } }'


def run(pytester: pytest.Pytester, replies: list[str], out: str, *args: str) -> Any:
    pytester.makefile(".toml", bench_base=suite(replies))
    return pytester.runpytest(
        "--agentbench",
        "--agentbench-out",
        out,
        "--agentbench-max-retries",
        "0",
        "-p",
        "no:cacheprovider",
        *args,
    )


def summary_of(pytester: pytest.Pytester, out: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((pytester.path / out / "latest" / "summary.json").read_text())
    return data


def baseline_dir(pytester: pytest.Pytester) -> str:
    return os.path.realpath(pytester.path / "before" / "latest")


def test_a_regression_against_a_baseline_run_is_flagged_and_can_fail_the_run(
    pytester: pytest.Pytester,
) -> None:
    run(pytester, [OK] * N_TASKS, "before").assert_outcomes(passed=N_TASKS)
    now = [WRONG] * 6 + [OK, OUTAGE]
    result = run(
        pytester,
        now,
        "after",
        "--agentbench-baseline",
        baseline_dir(pytester),
        "--agentbench-markdown",
        "summary.md",
    )
    result.stdout.fnmatch_lines(
        [
            "against the baseline *",
            "this run vs baseline: pass rate -0.857 over 7 paired task(s)*McNemar exact "
            "p=0.0312): worse (significant at 0.05)",
            "  (1 task(s) excluded: a harness error on either side)",
            "  6 regression(s), passed in baseline and not in this run: base::t0, base::t1, "
            "base::t2, base::t3, base::t4, base::t5",
        ]
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # the failed tasks alone
    data = summary_of(pytester, "after")
    schemas.validate("summary", data)
    (compared,) = data["baseline"]["comparisons"]
    assert compared["verdict"] == "worse" and compared["excluded"] == 1
    assert compared["regressions"] == [f"base::t{i}" for i in range(6)]
    assert data["baseline"]["run_id"] == os.path.basename(baseline_dir(pytester))
    markdown = (pytester.path / "summary.md").read_text()
    assert "### Against the baseline" in markdown
    assert "6 regression(s): `base::t0`" in markdown

    # gated on the baseline and not on failures: only the regression fails the run
    gated = run(
        pytester,
        now,
        "gated",
        "--agentbench-baseline",
        baseline_dir(pytester),
        "--agentbench-min-score",
        "0",
        "--agentbench-errors-as-failures",
        "--agentbench-fail-on-regression",
    )
    assert gated.ret == pytest.ExitCode.TESTS_FAILED
    ungated = run(
        pytester,
        now,
        "ungated",
        "--agentbench-baseline",
        baseline_dir(pytester),
        "--agentbench-min-score",
        "0",
        "--agentbench-errors-as-failures",
    )
    assert ungated.ret == pytest.ExitCode.OK


def test_the_same_results_against_the_baseline_are_inconclusive_then_equivalent_with_a_margin(
    pytester: pytest.Pytester,
) -> None:
    replies = [OK] * 4 + [WRONG] * 4
    run(pytester, replies, "before")
    result = run(
        pytester,
        replies,
        "after",
        "--agentbench-baseline",
        baseline_dir(pytester),
        "--agentbench-fail-on-regression",
        "--agentbench-min-score",
        "0",
    )
    result.stdout.fnmatch_lines(
        [
            "this run vs baseline: pass rate +0.000 over 8 paired task(s)*: "
            "inconclusive — no difference seen; a margin (--agentbench-margin) would test "
            "equivalence; smallest detectable difference ±*"
        ]
    )
    assert "regression(s)" not in result.stdout.str()
    assert result.ret == pytest.ExitCode.OK
    (compared,) = summary_of(pytester, "after")["baseline"]["comparisons"]
    assert compared["verdict"] == "inconclusive" and compared["regressions"] == []


def test_a_baseline_that_is_not_a_run_folder_is_a_clear_error(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    pytester.makefile(".toml", bench_base=suite([OK]))
    missing = tmp_path / "nowhere"
    result = pytester.runpytest("--agentbench", "--agentbench-baseline", str(missing))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [f"*--agentbench-baseline: {missing} does not exist; expected an earlier run folder*"]
    )
    result = pytester.runpytest("--agentbench", "--agentbench-baseline", str(tmp_path))
    result.stderr.fnmatch_lines(
        [f"*--agentbench-baseline: {tmp_path} is not a run folder: it holds neither summary.json*"]
    )
    (tmp_path / "summary.json").write_text('{"run_id": "x"}')
    result = pytester.runpytest("--agentbench", "--agentbench-baseline", str(tmp_path))
    result.stderr.fnmatch_lines(["*summary.json: not a pytest-agentbench summary*tasks list*"])


def test_fail_on_regression_without_a_baseline_is_a_usage_error(
    pytester: pytest.Pytester,
) -> None:
    pytester.makefile(".toml", bench_base=suite([OK]))
    result = pytester.runpytest("--agentbench", "--agentbench-fail-on-regression")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*--agentbench-fail-on-regression compares with a baseline: give --agentbench-baseline*"]
    )
