"""One thread that does the file system work of the rollouts in flight.

A rollout's files (its folder, ``trajectory.json``, ``verifier/reward.json``,
``result.json``: two ``mkdir``s and three atomic writes) cost little CPU in Python but a
few hundred microseconds in the kernel, and every call lets the GIL go. From 128 rollout
threads at once those calls contend in the file system and hand the GIL on dozens of
times a rollout: measured, the writes alone took plain threads from 0.95 to 0.7 of their
own speed at 128 in flight (docs/scale.md, "The fourth pass"). Here one thread writes
them, in the order they were handed in, while the rollout threads go on to their next
model call; the kernel's part runs on another core meanwhile.

Nothing is reported before it is on disk: the item waits for its task's files
(``wait``), and an error writing them is raised there, as it was raised from the rollout
before. An item whose files are still queued when it asks writes them itself, in the
waiting thread, rather than wait for the writer to reach them (at 128 in flight the
writer waits for the GIL at each of its calls, and the items' waits held the run back:
docs/scale.md). ``close`` writes whatever is still queued (an interrupted run loses no
finished rollout) and then runs later writes in the caller's own thread.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable


class FileWriter:
    """Runs write jobs in one daemon thread, first in, first out, each under a key (the
    item's node id) that ``wait`` waits for. Started on the first job."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queued = threading.Condition(self._lock)  # the writer waits here for a job
        self._written = threading.Condition(self._lock)  # ``wait`` and ``close`` wait here
        self._jobs: deque[tuple[str, Callable[[], None]]] = deque()
        #: jobs handed in and not yet waited for, by key; a finished one's error or None
        self._pending: dict[str, int] = {}
        self._errors: dict[str, BaseException] = {}
        self._thread: threading.Thread | None = None
        self._running: str | None = None  # the key of the job the writer runs, if any
        self._closed = False

    def submit(self, key: str, job: Callable[[], None]) -> None:
        """Run ``job`` on the writer thread; once closed, here and now (its error raised)."""
        with self._lock:
            if not self._closed:
                self._pending[key] = self._pending.get(key, 0) + 1
                self._jobs.append((key, job))
                if self._thread is None:
                    self._thread = threading.Thread(
                        target=self._run, name="agentbench-files", daemon=True
                    )
                    self._thread.start()
                else:
                    self._queued.notify()
                return
        job()

    def wait(self, key: str) -> None:
        """Return once every job handed in under ``key`` is done; raise the first error of
        one (then forgotten). A key with no job returns at once. The key's jobs still
        queued are taken from the writer and run here, in order, after the one it runs."""
        mine: list[Callable[[], None]] = []
        with self._lock:
            if self._pending.get(key):
                others: deque[tuple[str, Callable[[], None]]] = deque()
                for queued in self._jobs:
                    if queued[0] == key:
                        mine.append(queued[1])
                    else:
                        others.append(queued)
                self._jobs = others
                self._pending[key] -= len(mine)
            while self._pending.get(key):
                self._written.wait()
            self._pending.pop(key, None)
            error = self._errors.pop(key, None)
        for job in mine:
            try:
                job()
            except BaseException as exc:
                error = error or exc
        if error is not None:
            raise error

    def _run(self) -> None:
        while True:
            with self._lock:
                while not self._jobs and not self._closed:
                    self._queued.wait()
                if not self._jobs:
                    return
                key, job = self._jobs.popleft()
                self._running = key
            error: BaseException | None = None
            try:
                job()
            except BaseException as exc:  # handed to whoever waits for the key
                error = exc
            with self._lock:
                self._running = None
                if error is not None and key not in self._errors:
                    self._errors[key] = error
                self._pending[key] -= 1
                self._written.notify_all()

    def close(self) -> None:
        """Write what is queued, stop the thread; later jobs run in their caller."""
        with self._lock:
            self._closed = True
            self._queued.notify()
            while self._jobs or self._running is not None:
                self._written.wait()
