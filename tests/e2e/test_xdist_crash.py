"""A verifier that kills its own xdist worker leaves the run complete: that task is a
harness error with a reason, a task that was merely in flight beside it runs again, and
the reports are whole, with sane durations, and accepted by check-ctrf."""

from __future__ import annotations

import json
import re

import pytest
from ctrf_support import assert_ctrf_accepted

CONFTEST = """
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

# 40 tasks over two workers: xdist sends each a first batch of 5 (t0-t4, t5-t9).
# t0 kills its worker while it is that worker's current item. t7 kills the other one
# while that worker still waits on t5 (slow), running t7 ahead: xdist blames t5.
CURRENT_KILLER, AHEAD_KILLER, SLOW = "t0", "t7", "t5"


def suite() -> str:
    tasks = []
    for i in range(40):
        killer = f"t{i}" in (CURRENT_KILLER, AHEAD_KILLER)
        answer = "die" if killer else "ok"
        # the others reach their verifiers well after the killers ended their workers:
        # a task being verified when its worker dies cannot be told from the killer
        delay = 2.0 if f"t{i}" == SLOW else 0.0 if killer else 0.3
        tasks.append(
            f'[[task]]\nid = "t{i}"\ninput = "q"\ntarget = "ok"\n'
            f'scripted = [{{ text = "{answer}", delay_s = {delay} }}]\n'
        )
    return '[suite]\nname = "fragile"\nverifier = { kind = "fragile" }\n' + "".join(tasks)


@pytest.mark.slow
def test_a_worker_killed_by_a_verifier_leaves_the_run_complete(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makefile(".toml", bench_fragile=suite())
    result = pytester.runpytest_subprocess("--agentbench", "-n", "2", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*1 rerun*"])  # t5, interrupted by t7, ran again

    run = (pytester.path / "agentbench-results" / "latest").resolve()
    ctrf = json.loads((run / "ctrf.json").read_text())
    summary = ctrf["results"]["summary"]
    tests = {t["name"].rpartition("::")[2]: t for t in ctrf["results"]["tests"]}
    assert sorted(tests) == sorted(f"t{i}" for i in range(40))
    errors = {name: t for name, t in tests.items() if t["status"] != "passed"}
    assert sorted(errors) == sorted([CURRENT_KILLER, AHEAD_KILLER])
    for test in errors.values():
        assert test["status"] == "other" and test["rawStatus"] == "harness_error"
    # the killer xdist blamed and the one it sent to another worker (refused there, not
    # verified again) read the same: one reason, naming the worker each one took down
    messages = {re.sub(r"gw\d+", "gwN", test["message"]) for test in errors.values()}
    assert messages == {
        "harness error: xdist worker gwN crashed while verifying this task: "
        "a verifier or plugin exited, or it was killed"
    }

    wall_ms = summary["stop"] - summary["start"]
    for test in tests.values():
        assert 0 <= test["duration"] <= wall_ms
        if "start" in test:
            assert summary["start"] <= test["start"] <= test["stop"] <= summary["stop"]
    assert tests[SLOW]["duration"] >= 2000  # its rerun, measured like any task

    totals = json.loads((run / "summary.json").read_text())["totals"]
    assert totals["tasks"] == 40
    assert_ctrf_accepted(run / "ctrf.json")
