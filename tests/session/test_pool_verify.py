"""A rollout that is verifying does not count against ``--agentbench-concurrency``: the
pool starts the next rollout's generation meanwhile (runner/pool.py, runner/rollout.py)."""

from __future__ import annotations

import threading
import time

import pytest

# The verifiers of tasks "first" and "second" wait until the run's scripted server has
# been asked for task "third"'s reply, and pass only when it was. A run that counts a
# verifying rollout against concurrency 2 never asks for "third" while both verify: the
# waits run out (no hang) and both fail.
CONFTEST = """
import time

import threading
import time

import pytest

from pytest_agentbench.session.stash import STATE_KEY
from pytest_agentbench.verifiers import FunctionVerifier, Verdict

CONFIGS = []


def pytest_configure(config):
    CONFIGS.append(config)


def _asked_for(task_id):
    server = CONFIGS[-1].stash[STATE_KEY].services.server
    return any(str(entry.get("key") or "").endswith(task_id) for entry in server.requests)


def _after_other(check):
    other = check.options.get("other")
    waited_until = time.monotonic() + check.options.get("timeout_s", 0)
    while other and not _asked_for(other) and time.monotonic() < waited_until:
        time.sleep(0.01)
    seen = not other or _asked_for(other)
    return Verdict(1.0 if seen else 0.0,
                   feedback="" if seen else f"{other} was not generated meanwhile")


@pytest.hookimpl
def pytest_agentbench_verifiers():
    # a timeout_s option marks a verifier that runs a sandboxed command (as python_tests
    # does): only those step aside; an in-process one keeps its place in the pool
    schema = {"type": "object", "additionalProperties": False,
              "properties": {"other": {"type": "string"}, "timeout_s": {"type": "number"}}}
    return [FunctionVerifier("after_other", _after_other, schema)]
"""

SUITE = """
[suite]
timeout_s = 60
[[task]]
id = "first"
input = "One."
scripted = ["one"]
verifier = { kind = "after_other", other = "third", timeout_s = 8 }
[[task]]
id = "second"
input = "Two."
scripted = ["two"]
verifier = { kind = "after_other", other = "third", timeout_s = 8 }
[[task]]
id = "third"
input = "Three."
scripted = ["three"]
verifier = { kind = "after_other" }
"""


def test_the_next_rollout_generates_while_the_others_verify(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makefile(".toml", bench_pair=SUITE)
    result = pytester.runpytest(
        "--agentbench", "--agentbench-concurrency", "2", "-p", "no:cacheprovider", "-v"
    )
    result.assert_outcomes(passed=3)
    # pytest's order and report are kept
    result.stdout.fnmatch_lines(["*::first PASSED*", "*::second PASSED*", "*::third PASSED*"])


def test_a_job_stepped_aside_frees_its_place_and_waits_for_one_to_come_back() -> None:
    from pytest_agentbench.runner.pool import RolloutPool, step_aside, step_back

    pool = RolloutPool(1, ahead=4)
    second_started = threading.Event()
    second_may_end = threading.Event()
    order: list[str] = []

    def first() -> str:
        step_aside()
        assert second_started.wait(10), "the next job did not start while one stood aside"
        second_may_end.set()
        step_back()  # the place is the second job's until it ends
        order.append("first back")
        return "first"

    def second() -> str:
        second_started.set()
        assert second_may_end.wait(10)
        time.sleep(0.05)  # first may try to come back meanwhile; it must wait
        order.append("second done")
        return "second"

    try:
        pool.plan("a", first)
        pool.plan("b", second)
        assert pool.result("a", first) == "first"
        assert pool.result("b", second) == "second"
        assert order == ["second done", "first back"]
    finally:
        pool.close()
