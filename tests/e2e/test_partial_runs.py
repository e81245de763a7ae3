"""A run that did not cover every planned task says so, and how many it covers, in every
report; a session in which no task ran writes nothing; a signal while the run ends leaves
complete reports and no traceback. Real pytest runs against the real scripted server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

SUITE = """
[suite]
name = "p"
verifier = { kind = "number" }
repairs = 0

[[task]]
id = "first"
input = "1"
target = 1
scripted = ["2"]

[[task]]
id = "second"
input = "2"
target = 2
scripted = ["2"]

[[task]]
id = "third"
input = "3"
target = 3
scripted = ["3"]
"""

ARGS = ("--agentbench", "-p", "no:cacheprovider", "--agentbench-markdown", "summary.md")


def run_reports(pytester: pytest.Pytester) -> tuple[dict[str, Any], dict[str, Any], str]:
    run = (pytester.path / "agentbench-results" / "latest").resolve()
    summary = json.loads((run / "summary.json").read_text(encoding="utf-8"))
    ctrf = json.loads((run / "ctrf.json").read_text(encoding="utf-8"))
    markdown = (pytester.path / "summary.md").read_text(encoding="utf-8")
    return summary, ctrf, markdown


def assert_partial(pytester: pytest.Pytester, result: Any, covered: int, why: str) -> None:
    line = f"partial: {covered} of 3 tasks ({why})"
    result.stdout.fnmatch_lines([f"{line} — the score covers these only"])
    summary, ctrf, markdown = run_reports(pytester)
    assert summary["partial"] is True
    coverage = summary["coverage"]
    assert (coverage["tasks"], coverage["planned"]) == (covered, 3)
    run_extra = ctrf["results"]["environment"]["extra"]["pytest-agentbench.run"]
    assert run_extra["partial"] is True
    assert run_extra["coverage"] == coverage
    assert markdown.startswith(f"## agentbench — {line} · ")


def test_a_keyword_selection_is_a_partial_run(pytester: pytest.Pytester) -> None:
    pytester.makefile(".toml", bench_p=SUITE)
    result = pytester.runpytest(*ARGS, "-k", "second or third")
    result.assert_outcomes(passed=2, deselected=1)
    assert_partial(pytester, result, 2, "1 deselected")


def test_exitfirst_is_a_partial_run(pytester: pytest.Pytester) -> None:
    pytester.makefile(".toml", bench_p=SUITE)
    result = pytester.runpytest(*ARGS, "-x")
    result.assert_outcomes(failed=1)
    assert_partial(pytester, result, 1, "stopping after 1 failures")


@pytest.mark.slow
def test_an_interrupted_run_is_partial(pytester: pytest.Pytester) -> None:
    pytester.makefile(".toml", bench_p=SUITE)
    pytester.makeconftest(
        """
def pytest_runtest_logreport(report):
    if report.when == "teardown" and report.nodeid.endswith("::second"):
        raise KeyboardInterrupt
"""
    )
    result = pytester.runpytest_subprocess(*ARGS, timeout=120)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    assert_partial(pytester, result, 2, "interrupted")


def test_a_whole_run_is_not_partial(pytester: pytest.Pytester) -> None:
    pytester.makefile(".toml", bench_p=SUITE)
    result = pytester.runpytest(*ARGS)
    result.assert_outcomes(passed=2, failed=1)
    assert "partial:" not in result.stdout.str()
    summary, ctrf, markdown = run_reports(pytester)
    assert summary["partial"] is False
    assert ctrf["results"]["environment"]["extra"]["pytest-agentbench.run"]["partial"] is False
    assert summary["coverage"]["tasks"] == summary["coverage"]["planned"] == 3
    assert "partial:" not in markdown and "**Partial" not in markdown


@pytest.mark.parametrize(
    "args", [("--collect-only",), ("--collect-only", "-q"), ("-k", "nothing-matches")]
)
def test_a_session_where_no_task_runs_writes_nothing(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, args: tuple[str, ...]
) -> None:
    pytester.makefile(".toml", bench_p=SUITE)
    first = pytester.runpytest("--agentbench", "-p", "no:cacheprovider")
    first.assert_outcomes(passed=2, failed=1)
    results = pytester.path / "agentbench-results"
    before = sorted(p.name for p in results.iterdir())
    latest = (results / "latest").resolve()
    step = pytester.path / "step-summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(step))
    pytester.runpytest("--agentbench", "-p", "no:cacheprovider", *args)
    assert sorted(p.name for p in results.iterdir()) == before
    assert (results / "latest").resolve() == latest
    assert not step.exists()
    again = pytester.runpytest("--agentbench", "-p", "no:cacheprovider", "--agentbench-resume")
    again.assert_outcomes(passed=2, failed=1)
    again.stdout.fnmatch_lines(["3 task(s) resumed from the earlier run (not sent again)"])


def test_a_failed_collection_writes_nothing(pytester: pytest.Pytester) -> None:
    pytester.makefile(".toml", bench_p=SUITE, bench_broken="[[task]]\nid = 3\n")
    result = pytester.runpytest("--agentbench", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    assert not (pytester.path / "agentbench-results").exists()


@pytest.mark.slow
def test_a_signal_while_the_summary_is_written_leaves_complete_reports(
    pytester: pytest.Pytester,
) -> None:
    pytester.makefile(".toml", bench_p=SUITE)
    pytester.makeconftest(
        """
import os
import signal

def pytest_terminal_summary(terminalreporter):
    terminalreporter.write_line("conftest: sending SIGINT")
    os.kill(os.getpid(), signal.SIGINT)
    terminalreporter.write_line("conftest: still writing")
"""
    )
    result = pytester.runpytest_subprocess(*ARGS, timeout=120)
    out = result.stdout.str() + result.stderr.str()
    assert "Traceback" not in out and "KeyboardInterrupt" not in out
    result.stdout.fnmatch_lines(
        [
            "conftest: sending SIGINT",
            "conftest: still writing",
            "agentbench: SIGINT while the run was ending; the reports above are complete",
        ]
    )
    result.stdout.fnmatch_lines(["3 tasks: 2 passed, 1 failed", "results: agentbench-results/*"])
    assert result.ret == pytest.ExitCode.INTERRUPTED
    summary, ctrf, markdown = run_reports(pytester)
    assert summary["totals"]["tasks"] == len(summary["tasks"]) == 3
    assert ctrf["results"]["summary"]["tests"] == 3
    assert markdown.startswith("## agentbench — 3 tasks")
    assert Path(summary["tasks"][0]["rollout_dir"]).is_dir()


def test_a_task_skipped_by_its_mark_does_not_make_the_run_partial(
    pytester: pytest.Pytester,
) -> None:
    pytester.makefile(
        ".toml",
        bench_p=SUITE + '\n[[task]]\nid = "later"\ninput = "4"\n'
        'target = 4\nscripted = ["4"]\nmarks = ["skip"]\n',
    )
    result = pytester.runpytest(*ARGS)
    result.assert_outcomes(passed=2, failed=1, skipped=1)
    assert "partial:" not in result.stdout.str()
    summary, _, _ = run_reports(pytester)
    assert summary["partial"] is False
    assert (summary["coverage"]["skipped"], summary["coverage"]["planned"]) == (1, 4)


def test_pytest_split_groups_are_partial_alone_and_whole_merged(
    pytester: pytest.Pytester,
) -> None:
    import subprocess
    import sys

    pytester.makefile(".toml", bench_p=SUITE)
    runs = []
    for group in ("1", "2"):
        out = f"group{group}"
        result = pytester.runpytest(
            "--agentbench",
            "--agentbench-out",
            out,
            "-p",
            "no:cacheprovider",
            "--splits",
            "2",
            "--group",
            group,
        )
        result.stdout.fnmatch_lines(["partial: * of 3 tasks (* deselected)*"])
        runs.append(str((pytester.path / out / "latest").resolve()))

    def merged(*names: str) -> dict[str, Any]:
        out = pytester.path / "merged"
        done = subprocess.run(
            [sys.executable, "-m", "pytest_agentbench", "merge", *names, "--out", str(out)],
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        return json.loads((out / "summary.json").read_text(encoding="utf-8"))

    whole = merged(*runs)
    assert whole["partial"] is False
    assert (whole["coverage"]["tasks"], whole["coverage"]["planned"]) == (3, 3)
    one = merged(runs[0])
    assert one["partial"] is True
    assert one["coverage"]["planned"] == 3


CRASH_CONFTEST = """
import os

import pytest

from pytest_agentbench.verifiers.base import FunctionVerifier, Verdict


def judge(check):
    if check.answer == "die":
        os._exit(1)
    return Verdict(1.0 if check.answer == check.task.target else 0.0)


@pytest.hookimpl
def pytest_agentbench_verifiers():
    return [FunctionVerifier("fragile", judge)]
"""


@pytest.mark.slow
def test_a_worker_crash_that_ends_the_run_early_is_partial(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(CRASH_CONFTEST)
    tasks = "".join(
        f'[[task]]\nid = "t{i}"\ninput = "q"\ntarget = "ok"\nscripted = ["{answer}"]\n'
        for i, answer in enumerate(["ok", "die", "ok"])
    )
    pytester.makefile(
        ".toml", bench_p='[suite]\nname = "p"\nverifier = { kind = "fragile" }\n' + tasks
    )
    result = pytester.runpytest_subprocess(
        *ARGS,
        "-n",
        "1",
        "--max-worker-restart",
        "0",
        "--agentbench-concurrency",
        "1",
        timeout=180,
    )
    assert_partial(pytester, result, 2, "1 selected but not run")
    summary, _, _ = run_reports(pytester)
    assert {t["task_id"]: t["outcome"] for t in summary["tasks"]} == {
        "t0": "passed",
        "t1": "harness_error",
    }
