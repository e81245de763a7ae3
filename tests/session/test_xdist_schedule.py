"""The xdist scheduler agentbench uses with ``--dist load``: every worker keeps enough items
queued to fill its rollouts in flight, where xdist's own sizing lets a worker's queue
shrink to two items (two rollouts in flight, whatever the concurrency)."""

from __future__ import annotations

from typing import Any

import pytest
from xdist.scheduler import LoadScheduling

from pytest_agentbench.session.pytest_compat import deep_load_scheduler

pytest_plugins = ["pytester"]

TASKS = 400
DEPTH = 33


class Worker:
    """The part of xdist's WorkerController a scheduler talks to."""

    def __init__(self, name: str) -> None:
        self.gateway = type("Gateway", (), {"id": name})()
        self.shutting_down = False
        self.queue: list[int] = []

    def send_runtest_some(self, indices: list[int]) -> None:
        self.queue.extend(indices)

    def send_runtest_all(self) -> None:
        raise AssertionError("not expected here")

    def shutdown(self) -> None:
        self.shutting_down = True


def drive(scheduler: Any) -> list[int]:
    """Run a whole session through ``scheduler`` with two workers that finish their
    queues in turn (each item taking 0.2 s, like a slow model); the shortest queue a
    worker had whenever items were still waiting to be sent."""
    workers = [Worker("gw0"), Worker("gw1")]
    names = [f"bench_s.toml::t{i}" for i in range(TASKS)]
    for worker in workers:
        scheduler.add_node(worker)
    for worker in workers:
        scheduler.add_node_collection(worker, names)
    scheduler.schedule()
    shortest: list[int] = []
    while scheduler.pending or any(worker.queue for worker in workers):
        for worker in workers:
            if worker.queue:
                if scheduler.pending:
                    shortest.append(len(scheduler.node2pending[worker]))
                scheduler.mark_test_complete(worker, worker.queue.pop(0), duration=0.2)
    return shortest


@pytest.fixture
def config(pytester: pytest.Pytester) -> pytest.Config:
    return pytester.parseconfig("--tx", "2*popen")


def test_every_worker_keeps_a_pool_worth_of_items_queued(config: pytest.Config) -> None:
    scheduler = deep_load_scheduler(config, None, depth=DEPTH)
    assert scheduler is not None
    shortest = drive(scheduler)
    assert min(shortest) >= DEPTH - 1  # the one just taken off the queue runs now


def test_xdists_own_load_scheduler_lets_the_queue_run_dry(config: pytest.Config) -> None:
    """The control: what the deep scheduler fixes (if xdist ever stops doing this, the
    deep scheduler is no longer needed)."""
    shortest = drive(LoadScheduling(config, None))
    assert min(shortest) < DEPTH // 4


def test_every_task_is_sent_exactly_once(config: pytest.Config) -> None:
    scheduler = deep_load_scheduler(config, None, depth=DEPTH)
    workers = [Worker("gw0"), Worker("gw1")]
    names = [f"bench_s.toml::t{i}" for i in range(TASKS)]
    for worker in workers:
        scheduler.add_node(worker)
        scheduler.add_node_collection(worker, names)
    scheduler.schedule()
    done: list[int] = []
    while scheduler.pending or any(w.queue for w in workers):
        for worker in workers:
            if worker.queue:
                index = worker.queue.pop(0)
                done.append(index)
                scheduler.mark_test_complete(worker, index, duration=0.01)
    assert sorted(done) == list(range(TASKS))
    assert all(worker.shutting_down for worker in workers)
