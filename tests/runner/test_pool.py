"""RolloutPool: rollouts run ahead of the items that collect them, bounded two ways (in
flight, and started-but-uncollected), in plan order, and close() drops what has not
started."""

from __future__ import annotations

import sys
import threading
import time

import pytest

from pytest_agentbench.runner.pool import RolloutPool

WAIT_S = 10.0


class Jobs:
    """Jobs that record when they start and can be held until released."""

    def __init__(self, hold: bool = False) -> None:
        self.started: list[str] = []
        self.running = 0
        self.most_running = 0
        self.gate = threading.Event()
        if not hold:
            self.gate.set()
        self.changed = threading.Condition()

    def job(self, key: str):
        def run() -> str:
            with self.changed:
                self.started.append(key)
                self.running += 1
                self.most_running = max(self.most_running, self.running)
                self.changed.notify_all()
            assert self.gate.wait(WAIT_S)
            with self.changed:
                self.running -= 1
                self.changed.notify_all()
            return f"done {key}"

        return run

    def wait_started(self, count: int) -> None:
        with self.changed:
            assert self.changed.wait_for(lambda: len(self.started) >= count, WAIT_S), (
                f"only {self.started} started"
            )

    def settle(self) -> list[str]:
        """What has started once nothing more starts for a moment."""
        seen = -1
        while seen != len(self.started):
            seen = len(self.started)
            time.sleep(0.2)
        return list(self.started)


def test_jobs_run_ahead_of_collection_up_to_the_look_ahead() -> None:
    pool = RolloutPool(2, ahead=5)
    jobs = Jobs()
    try:
        for i in range(12):
            pool.plan(f"k{i}", jobs.job(f"k{i}"))
        jobs.wait_started(5)
        # nothing collected: finished jobs free their threads, which take the next plan
        # entries themselves, until five are started and uncollected
        assert jobs.settle() == [f"k{i}" for i in range(5)]
        assert pool.result("k0", jobs.job("k0")) == "done k0"
        jobs.wait_started(6)
        assert jobs.settle() == [f"k{i}" for i in range(6)]
        for i in range(1, 12):
            assert pool.result(f"k{i}", jobs.job(f"k{i}")) == f"done k{i}"
        assert jobs.started == [f"k{i}" for i in range(12)]  # plan order, each once
    finally:
        pool.close()


def test_never_more_in_flight_than_the_size() -> None:
    pool = RolloutPool(3, ahead=10)
    jobs = Jobs(hold=True)
    try:
        for i in range(8):
            pool.plan(f"k{i}", jobs.job(f"k{i}"))
        jobs.wait_started(3)
        assert len(jobs.settle()) == 3
        jobs.gate.set()
        results = [pool.result(f"k{i}", jobs.job(f"k{i}")) for i in range(8)]
        assert results == [f"done k{i}" for i in range(8)]
        assert jobs.most_running == 3
    finally:
        pool.close()


def test_a_job_awaited_out_of_plan_runs_even_when_the_look_ahead_is_used_up() -> None:
    pool = RolloutPool(2, ahead=2)
    jobs = Jobs()
    try:
        for i in range(4):
            pool.plan(f"k{i}", jobs.job(f"k{i}"))
        jobs.wait_started(2)
        jobs.settle()
        got: list[str] = []
        waiter = threading.Thread(target=lambda: got.append(pool.result("x", jobs.job("x"))))
        waiter.start()
        waiter.join(WAIT_S)
        assert got == ["done x"]
        assert jobs.started[:3] == ["k0", "k1", "x"]  # before the rest of the plan
    finally:
        pool.close()


def test_an_unplanned_key_is_run_next_and_its_result_returned() -> None:
    pool = RolloutPool(1)
    jobs = Jobs()
    try:
        assert pool.result("solo", jobs.job("solo")) == "done solo"
        assert not pool.submitted("solo")  # collected results are forgotten
    finally:
        pool.close()


def test_a_jobs_exception_is_raised_by_result() -> None:
    pool = RolloutPool(2)

    def boom() -> None:
        raise ValueError("verifier exploded")

    try:
        pool.plan("bad", boom)
        with pytest.raises(ValueError, match="verifier exploded"):
            pool.result("bad", boom)
    finally:
        pool.close()


def test_close_drops_what_has_not_started_and_a_caller_runs_it_itself() -> None:
    pool = RolloutPool(1, ahead=1)
    jobs = Jobs(hold=True)
    pool.plan("k0", jobs.job("k0"))
    pool.plan("k1", jobs.job("k1"))
    jobs.wait_started(1)
    pool.close()
    jobs.gate.set()
    assert jobs.settle() == ["k0"]  # k1 never started in the pool
    assert pool.result("k1", lambda: "inline") == "inline"
    assert pool.result("k0", jobs.job("k0")) == "done k0"  # a running job still ends


def test_the_switch_interval_is_raised_while_two_threads_run_and_restored_at_close() -> None:
    """One rollout thread leaves the interpreter's switch interval alone; from the second
    one the GIL is handed on every SWITCH_INTERVAL_S (fewer forced hand-offs among many
    threads), and close() puts back what it was."""
    from pytest_agentbench.runner.pool import SWITCH_INTERVAL_S

    before = sys.getswitchinterval()
    assert before < SWITCH_INTERVAL_S
    seen: list[float] = []

    def job() -> None:
        seen.append(sys.getswitchinterval())

    alone = RolloutPool(1)
    alone.plan("a", job)
    alone.result("a", job)
    alone.close()
    assert seen == [before]
    pool = RolloutPool(2)
    jobs = Jobs(hold=True)
    for key in ("a", "b"):
        pool.plan(key, jobs.job(key))
    with jobs.changed:
        assert jobs.changed.wait_for(lambda: jobs.running == 2, WAIT_S)
    assert sys.getswitchinterval() == SWITCH_INTERVAL_S
    jobs.gate.set()
    assert pool.result("a", jobs.job("a")) == "done a"
    pool.close()
    assert sys.getswitchinterval() == before
