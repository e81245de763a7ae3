"""The task items this process runs, and the rollouts running ahead of them.

pytest runs items one at a time from its main thread; with ``--agentbench-concurrency``
above 1 (or the live status line on) the item asks ``record_for`` for its record, which
also plans the rollouts of the next items on the pool (runner/pool.py, which explains
the threads). Only pytest's main thread calls in here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Literal, Protocol

import pytest

from pytest_agentbench.artifacts.file_writer import FileWriter
from pytest_agentbench.runner.pool import RolloutPool, in_pool

if TYPE_CHECKING:
    from pytest_agentbench.config.settings import Settings
    from pytest_agentbench.core.task_record import TaskRecord
    from pytest_agentbench.report.live import LiveStatus, StatusWriter
    from pytest_agentbench.session.pytest_compat import WorkerInteractor


class Queued(Protocol):
    """A task item as the pool sees it (``items.TaskItem`` is one): its node id, and its
    rollout, which the pool may run ahead on another thread."""

    @property
    def nodeid(self) -> str: ...

    def rollout_record(self) -> TaskRecord:
        """Run the item's rollout (or make its stand-in record) and return its record."""
        ...


class InFlight:
    """Owns the queue of task items, the rollout pool and the live status line."""

    def __init__(self, config: pytest.Config, settings: Settings, is_worker: bool) -> None:
        self.config = config
        self.settings = settings
        self.is_worker = is_worker
        self.queue: list[Queued] = []
        self.positions: dict[str, int] = {}
        self.pool: RolloutPool | None = None
        #: writes the files of the rollouts that run ahead (artifacts/file_writer.py)
        self.files = FileWriter()
        self.live: LiveStatus | None = None
        self.status: StatusWriter | None = None
        self._planned_to = 0
        #: xdist's worker interactor; False once looked for and not found
        self._interactor: WorkerInteractor | Literal[False] | None = None
        #: set when the run stops (-x, Ctrl-C, SIGTERM, the end): a rollout still running
        #: then ends because its client was closed under it
        self.closing = False

    def set_queue(self, items: Sequence[Queued]) -> None:
        """The task items this process will run, in pytest's order (after selection)."""
        self.queue = list(items)
        self.positions = {item.nodeid: i for i, item in enumerate(items)}
        # concurrency 1 stays strictly serial: one task at a time, nothing run ahead
        wants_pool = self.settings.concurrency > 1 and len(items) > 1
        if (wants_pool or self.live is not None) and self.pool is None and items:
            self.pool = RolloutPool(self.settings.concurrency)

    def record_for(self, item: Queued) -> TaskRecord:
        """The record of ``item``'s rollout, its files on disk. With a pool, the rollouts
        of the next items in the queue are planned too: the pool keeps its size in flight
        and runs at most ``pool.ahead`` uncollected; ``item.rollout_record()`` runs one."""
        pool = self.pool
        if pool is None or item.nodeid not in self.positions:
            return item.rollout_record()
        record = self._collect(pool, item)
        self.files.wait(item.nodeid)  # (an error writing them is raised here)
        return record

    def write(self, key: str, job: Callable[[], None]) -> None:
        """Write a rollout's files: on the file writer when a pool's thread runs the
        rollout (``record_for`` waits for them), else here and now."""
        if in_pool():
            self.files.submit(key, job)
        else:
            job()

    def _collect(self, pool: RolloutPool, item: Queued) -> TaskRecord:
        for ahead in self._following(item, pool.ahead):
            pool.plan(ahead.nodeid, ahead.rollout_record)
        status, live = self.status, self.live
        if status is None or live is None:
            record: TaskRecord = pool.result(item.nodeid, item.rollout_record)
            return record

        def show() -> None:
            status.show(live.line(item.nodeid))

        try:
            record = pool.result(item.nodeid, item.rollout_record, on_wait=show)
            return record
        finally:
            status.clear()

    def _following(self, item: Queued, size: int) -> list[Queued]:
        """``item`` and the items after it that may run ahead, ``size`` in all: in a
        worker only what xdist sent this worker (never session.items, which another
        worker runs too); else the next items of the queue not planned yet."""
        if self.is_worker and isinstance(item, pytest.Item):
            from pytest_agentbench.session.pytest_compat import find_interactor, worker_queue

            if self._interactor is None:
                self._interactor = find_interactor(self.config) or False
            queue = worker_queue(self.config, self._interactor or None, item, size)
            positions = self.positions
            return [self.queue[positions[o.nodeid]] for o in queue if o.nodeid in positions]
        start = self.positions[item.nodeid]
        end = start + size
        following = self.queue[max(start, self._planned_to) : end]
        self._planned_to = max(self._planned_to, end)
        return following

    def close(self) -> None:
        """Drop the rollouts not started yet (see RolloutPool.close)."""
        self.closing = True
        if self.pool is not None:
            self.pool.close()
        self.files.close()  # what finished rollouts left queued is written
