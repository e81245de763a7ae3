"""Rollouts in flight: a bounded pool that lets rollouts run ahead of the items waiting
for them, so wall time is spent waiting on the model N requests at a time, not one."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any


class RolloutPool:
    """Runs submitted jobs on at most ``size`` threads, keyed so each is started once.

    ``result(key)`` waits for one job. ``close()`` cancels every job not started yet and
    returns without waiting for running ones (their clients are closed by the caller, which
    makes them end promptly)."""

    def __init__(self, size: int) -> None:
        self.size = max(1, size)
        self._executor = ThreadPoolExecutor(self.size, thread_name_prefix="agentbench-rollout")
        self._futures: dict[str, Future[Any]] = {}
        self._lock = threading.Lock()
        self._closed = False

    def submit(self, key: str, job: Callable[[], Any]) -> None:
        """Start ``job`` under ``key`` unless it was submitted already or the pool closed."""
        with self._lock:
            if key in self._futures or self._closed:
                return
            self._futures[key] = self._executor.submit(job)

    def submitted(self, key: str) -> bool:
        with self._lock:
            return key in self._futures

    def result(
        self,
        key: str,
        job: Callable[[], Any],
        on_wait: Callable[[], None] | None = None,
        interval_s: float = 0.25,
    ) -> Any:
        """The result of the job under ``key`` (submitted now when it was not yet); the
        job's own exception is raised here. ``on_wait`` is called every ``interval_s``
        while waiting (the live status line). A finished job's future is forgotten, so a
        long run keeps only what is in flight."""
        self.submit(key, job)
        with self._lock:
            future = self._futures.get(key)
        if future is None:  # the pool closed before this job could start
            return job()
        try:
            while on_wait is not None:
                try:
                    return future.result(timeout=interval_s)
                except TimeoutError:
                    on_wait()
            return future.result()
        finally:
            with self._lock:
                self._futures.pop(key, None)

    def close(self) -> None:
        with self._lock:
            self._closed = True
        self._executor.shutdown(wait=False, cancel_futures=True)
