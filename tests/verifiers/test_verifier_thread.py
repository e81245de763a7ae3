"""Verifications run in a daemon thread reused from task to task (one per rollout thread),
and a verifier stuck past its deadline keeps its thread: the next task gets a new one."""

from __future__ import annotations

import pytest

CONFTEST = """
import threading
import pytest
from pytest_agentbench.verifiers import FunctionVerifier, Verdict

THREADS = []  # the Thread objects themselves: kept alive, so each stays distinct
RELEASE = threading.Event()

def _judge(check):
    THREADS.append(threading.current_thread())
    if check.answer.strip() == "slow":
        RELEASE.wait(8)
    return Verdict(1.0 if check.answer.strip() == "ok" else 0.0)

@pytest.hookimpl
def pytest_agentbench_verifiers():
    return [FunctionVerifier("judge", _judge)]

def pytest_sessionfinish(session):
    names = {t.name for t in THREADS}
    print(f"\\nverifier threads: {len(set(THREADS))} for {len(THREADS)} verifications {names}")
"""


def _suite(answers: list[str]) -> str:
    tasks = "".join(
        f'[[task]]\nid = "t{i}"\ninput = "Say ok."\nscripted = ["{answer}"]\n'
        for i, answer in enumerate(answers)
    )
    return f'[suite]\nname = "v"\nverifier = {{ kind = "judge" }}\ntimeout_s = 1\n{tasks}'


def test_one_verifier_thread_serves_every_task_of_a_serial_run(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makefile(".toml", bench_v=_suite(["ok"] * 5))
    result = pytester.runpytest_subprocess(
        "--agentbench", "--agentbench-concurrency", "1", "-p", "no:cacheprovider", "-s"
    )
    result.assert_outcomes(passed=5)
    result.stdout.fnmatch_lines(["verifier threads: 1 for 5 verifications {'agentbench-verifier'}"])


def test_a_stuck_verifier_keeps_its_thread_and_the_next_task_gets_a_new_one(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makefile(".toml", bench_v=_suite(["ok", "slow", "ok", "ok"]))
    result = pytester.runpytest_subprocess(
        "--agentbench", "--agentbench-concurrency", "1", "-p", "no:cacheprovider", "-s"
    )
    result.assert_outcomes(passed=3, failed=1)
    result.stdout.fnmatch_lines(["verifier threads: 2 for 4 verifications *"])


def test_exact_and_includes_run_in_the_rollout_thread_itself() -> None:
    import threading
    import time
    from pathlib import Path

    from pytest_agentbench.runner import verification
    from pytest_agentbench.suites.task import Task
    from pytest_agentbench.verifiers.base import Check
    from pytest_agentbench.verifiers.text import EXACT, INCLUDES

    seen: list[object] = []

    def in_a_fresh_thread() -> None:
        task = Task(
            suite="s", id="t", index=0, path=Path("s.toml"), input="q", prompt="q", target="a"
        )
        for verifier in (EXACT, INCLUDES):
            verdict = verification.verify_by(verifier, Check("a", task, {}), time.monotonic() + 5)
            assert verdict is not None and verdict.reward == 1.0
        seen.append(getattr(verification.VerifierThread.local, "helper", None))

    worker = threading.Thread(target=in_a_fresh_thread)
    worker.start()
    worker.join()
    assert seen == [None], "no verifier thread was made for them"
