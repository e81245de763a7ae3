"""Resume, retry of harness errors, and interrupts that leave valid partial reports."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from ctrf_support import assert_ctrf_accepted

SUITE = """
[suite]
name = "res"
verifier = {{ kind = "exact" }}
[[task]]
id = "ok"
input = "x"
target = "x"
scripted = ["x"]
[[task]]
id = "wrong"
input = "x"
target = "x"
scripted = ["y"]
[[task]]
id = "flaky-server"
input = "x"
target = "x"
scripted = [{flaky}]
"""
ERROR = '{ error = { status = 500, message = "down" } }'


def latest(pytester: pytest.Pytester) -> Path:
    return (pytester.path / "agentbench-results" / "latest").resolve()


def results(run: Path) -> dict[str, dict]:
    return {p.parent.name: json.loads(p.read_text()) for p in (run / "tasks").rglob("result.json")}


def test_resume_reports_finished_tasks_without_sending_them_again(
    pytester: pytest.Pytester,
) -> None:
    pytester.makefile(".toml", bench_res=SUITE.format(flaky=ERROR))
    first = pytester.runpytest("--agentbench", "-p", "no:cacheprovider")
    first.assert_outcomes(passed=1, failed=1, errors=1)
    run = latest(pytester)
    before = {name: r["started_at"] for name, r in results(run).items()}

    # the server would now answer the flaky task; a plain resume keeps its recorded error
    pytester.makefile(".toml", bench_res=SUITE.format(flaky='"x"'))
    again = pytester.runpytest(
        "--agentbench", "--agentbench-resume", "-v", "-p", "no:cacheprovider"
    )
    again.assert_outcomes(passed=1, failed=1, errors=1)
    again.stdout.fnmatch_lines(
        ["*::ok PASSED (reward 1 · * · resumed)*", "3 task(s) resumed from the earlier run*"]
    )
    assert latest(pytester) == run
    assert {name: r["started_at"] for name, r in results(run).items()} == before
    ctrf = json.loads((run / "ctrf.json").read_text())
    assert all(t.get("tags") == ["resumed"] for t in ctrf["results"]["tests"])

    retried = pytester.runpytest(
        "--agentbench", "--agentbench-retry-errors", "-p", "no:cacheprovider"
    )
    retried.assert_outcomes(passed=2, failed=1)
    after = results(run)
    assert after["flaky-server[scripted]"]["outcome"] == "passed"
    assert after["ok[scripted]"]["started_at"] == before["ok[scripted]"]


def test_changed_settings_are_not_resumed(pytester: pytest.Pytester) -> None:
    pytester.makefile(".toml", bench_res=SUITE.format(flaky='"x"'))
    pytester.runpytest("--agentbench", "-p", "no:cacheprovider")
    result = pytester.runpytest(
        "--agentbench",
        "--agentbench-resume",
        "--agentbench-max-tokens",
        "77",
        "-p",
        "no:cacheprovider",
    )
    assert "task(s) resumed" not in result.stdout.str()
    assert all(r["record"]["max_tokens"] == 77 for r in results(latest(pytester)).values())


def test_resume_of_a_missing_run_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makefile(".toml", bench_res=SUITE.format(flaky='"x"'))
    result = pytester.runpytest("--agentbench", "--agentbench-resume")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--agentbench-resume*not a run folder*no earlier run*"])


#: Thirty tasks that answer at once: the inner run is interrupted by its own conftest
#: (STOPPER) after the STOP_AFTER-th task has reported, so the counts are exact.
MANY = "".join(
    f'\n[[task]]\nid = "task-{i:02d}"\ninput = "x"\ntarget = "x"\nscripted = ["x"]\n'
    for i in range(30)
)
STOP_AFTER = 4
STOPPER = """
import os, signal
import pytest

reported = []

@pytest.hookimpl(trylast=True)  # after the plugin has taken the task's record
def pytest_runtest_logreport(report):
    stop = os.environ.get("STOP_AFTER_TASKS")
    if stop and report.when == "call":
        reported.append(report.nodeid)
        if len(reported) == int(stop):
            os.kill(os.getpid(), getattr(signal, os.environ["STOP_WITH"]))
"""


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_interrupt_leaves_valid_partial_reports_and_resume_finishes(
    pytester: pytest.Pytester, sig: signal.Signals
) -> None:
    """The run signals itself right after its 4th task reported (a conftest hook: no
    timer), one rollout at a time so none runs ahead: the partial reports hold exactly
    those 4 tasks, and resume reads exactly them back and runs the other 26."""
    pytester.makefile(".toml", bench_many='[suite]\nverifier = { kind = "exact" }\n' + MANY)
    pytester.makeconftest(STOPPER)
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "--agentbench",
        "--agentbench-concurrency",
        "1",
        "-p",
        "no:cacheprovider",
        "-p",
        "no:randomly",
        "-q",
    ]
    # The run is started with Ctrl-C's default handler: a child inherits an ignored
    # SIGINT (a test run started in the background by a non-interactive shell has one),
    # and Python then leaves it ignored, so the signal would do nothing.
    start = [
        sys.executable,
        "-c",
        "import signal, sys, pytest; signal.signal(signal.SIGINT, signal.default_int_handler); "
        "sys.argv[0] = 'pytest'; sys.exit(pytest.console_main())",
        *cmd[3:],
    ]
    stop = {"STOP_AFTER_TASKS": str(STOP_AFTER), "STOP_WITH": sig.name}
    interrupted = subprocess.run(
        start, cwd=pytester.path, capture_output=True, text=True, timeout=120,
        env={**os.environ, **stop},
    )  # fmt: skip
    output = interrupted.stdout + interrupted.stderr
    assert interrupted.returncode == pytest.ExitCode.INTERRUPTED, output
    run = (pytester.path / "agentbench-results" / "latest").resolve()
    summary = json.loads((run / "summary.json").read_text())
    assert summary["partial"] is True
    first = [f"task-{i:02d}" for i in range(STOP_AFTER)]
    assert [t["task_id"] for t in summary["tasks"]] == first
    assert summary["totals"]["tasks"] == STOP_AFTER
    assert summary["totals"]["outcomes"]["passed"] == STOP_AFTER
    assert sorted(p.parent.name for p in (run / "tasks").rglob("result.json")) == [
        f"{task}[scripted]" for task in first
    ]
    for path in run.rglob("*.json"):
        json.loads(path.read_text())  # nothing half-written
    ctrf = json.loads((run / "ctrf.json").read_text())
    assert ctrf["results"]["summary"]["tests"] == STOP_AFTER
    shutil.copy(run / "ctrf.json", pytester.path / "interrupted-ctrf.json")

    finish = subprocess.run(
        [*cmd, "--agentbench-resume"],
        cwd=pytester.path,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ},
    )
    assert finish.returncode == 0, finish.stdout
    summary = json.loads((run / "summary.json").read_text())
    assert summary["totals"]["tasks"] == summary["totals"]["outcomes"]["passed"] == 30
    assert summary["partial"] is False
    assert [t["task_id"] for t in summary["tasks"] if t.get("resumed")] == first
    assert f"{STOP_AFTER} task(s) resumed from the earlier run" in finish.stdout
    assert_ctrf_accepted(pytester.path / "interrupted-ctrf.json", run / "ctrf.json")
