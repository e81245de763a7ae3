"""Rollouts in flight: a bounded pool that lets rollouts run ahead of the items waiting
for them, so wall time is spent waiting on the model N requests at a time, not one.

This is the one place that starts and stops rollout threads. The whole concurrency model
of one process, in one page:

Threads. pytest's main thread runs the items, one at a time, in order. The rollout
threads (``agentbench-rollout-N``, daemons) are started here, on demand, and each runs
planned jobs (one rollout plus its files, session/execution.py) until the pool closes. At most
``--agentbench-concurrency`` jobs count at once: a rollout that starts a non-trivial
verification calls ``step_aside`` (runner/rollout.py) and counts again only at its next
model call (``step_back``, a repair round) or not at all (its files are written after),
so another thread starts the next rollout's generation meanwhile. A model call waits on
the network, a verification on a core: the verifications are bounded apart, one per CPU
slot machine-wide (sandbox/cpuslots.py, across threads, xdist workers and runs), and the
look-ahead (``default_ahead``: 2 x concurrency + the slots) bounds how many rollouts are
started and not reported, so threads are at most concurrency + look-ahead.

Four more kinds of thread serve them, none of which runs a rollout: one file writer per
process (``agentbench-files``, artifacts/file_writer.py) that writes the files of the
rollouts run here, in order, while their threads go on to the next model call (the item
waits for its files: session/inflight.py); one deadline clock
per process (``agentbench-deadlines``, models/deadline.py) that shuts the socket of a
request past its deadline; the scripted server's threads
(scripted/server.py, in the serial process or xdist controller only); and under xdist
with a rate limit, the controller's limit service (``agentbench-limit``,
models/ratelimit_remote.py) answering the workers over loopback TCP.

Why threads and not one asyncio loop: measured (bench/concurrency.py, docs/scale.md).
Against the same server at 64 and 128 in flight, threads with one httpx client each
reach plain threads' wall time; one event loop with an ``httpx.AsyncClient`` per task
lane took 1.4-1.9 times as long and ~40 % more CPU per request, and one pooled
``AsyncClient`` 6-12 times as long. Blocking code in threads is also what the verifiers,
the sandbox and the file writes are anyway.

Who waits on whom. The main thread waits in ``RolloutPool.result`` for the item it is on
(session/inflight.py plans the next items first; the live line is redrawn while it waits),
then for that item's files on the file writer, which waits on nothing but the disk. A
rollout thread waits on the model (its own connections per thread, models/connections.py), on
the run's rate limit (models/ratelimit.py, or the controller's over TCP), on its
verifier's subprocess, and briefly on the run's make-once locks (the client, a suite's
``prepare``, the run folder: session/services.py, session/run.py), and in ``step_back`` for a place
among the counted jobs (freed by another job's end or step aside; ``close`` frees it).
Nothing waits on a rollout thread but ``result`` and ``step_back``; no rollout thread
waits on the main thread.

xdist. Each worker is a process with its own pool, planning only what the controller
sent it (pytest_compat.worker_queue), and the controller's scheduler keeps each worker's
queue deep enough to fill its pool (pytest_compat.deep_load_scheduler). A verifier that
kills its worker is named by the marks it left on disk (session/workers.py).

Stop paths. At the end of a session, however it ends (all items run, ``-x``, Ctrl-C,
SIGTERM, which plugin.py turns into Ctrl-C), ``RunState.close`` (run.py) closes this
pool first: jobs not started are dropped, idle threads return, running ones are not
waited for; the file writer writes what finished rollouts queued (later ones write their
own). It then closes the model client (every thread's connections: a rollout
still running fails promptly and its result is never collected), the scripted server
and the limit service (waiters on the limit are released). A rollout past its deadline
(the task's ``timeout_s``, or pytest-timeout's limit, session/timeouts.py) is ended by the
deadline clock and recorded as a ``timeout``. A first Ctrl-C or SIGTERM while the
reports are written is held until they are done; a second one interrupts (finish.py).
"""

from __future__ import annotations

import sys
import threading
from collections import deque
from collections.abc import Callable
from typing import TypeVar, cast

from pytest_agentbench.sandbox.cpuslots import slot_count

#: A job's result, as ``result()`` hands it back.
R = TypeVar("R")


class RolloutPool:
    """Runs planned jobs, in the order they were planned, at most ``size`` at a time.

    A thread that finishes a job takes the next planned one itself, so the number in
    flight stays at ``size`` however slowly the caller collects results (pytest reports
    items one at a time, in order, from its main thread). At most ``ahead`` jobs may be
    started and not yet collected: that bounds the memory held by finished results and
    the work done in vain when the run stops early.

    A job that calls ``step_aside()`` (a rollout about to verify) stops counting against
    ``size`` until it calls ``step_back()`` (its next model call) or ends: another thread
    may start the next planned job meanwhile. A thread stepping back waits for a free
    place before any new job starts. So at most ``size`` jobs are counted at once, and
    at most ``size + ahead`` threads exist.

    ``result(key)`` waits for one job (planning it first, at the front, when it was not
    planned). ``close()`` drops every job not started yet and returns without waiting for
    running ones (their clients are closed by the caller, which ends them promptly)."""

    def __init__(self, size: int, ahead: int | None = None) -> None:
        self.size = max(1, size)
        self.ahead = max(self.size, ahead if ahead is not None else default_ahead(self.size))
        self._lock = threading.Lock()
        self._work = threading.Condition(self._lock)  # workers wait here for a job
        self._done = threading.Condition(self._lock)  # result() waits here
        self._plan: deque[tuple[str, Callable[[], object]]] = deque()
        self._known: set[str] = set()  # planned, running or finished, not yet collected
        self._finished: dict[str, tuple[bool, object]] = {}
        self._running: set[str] = set()
        self._uncollected = 0  # started and not yet collected
        self._awaited: str | None = None
        self._threads: list[threading.Thread] = []
        self._idle = 0
        self._counted = 0  # running jobs that count against size (not stepped aside)
        self._returning = 0  # jobs waiting in step_back() for a place
        self._place = threading.Condition(self._lock)  # step_back() waits here
        self._closed = False
        #: the interpreter's switch interval before the first thread raised it (None:
        #: not raised, see ``_raise_switch_interval``)
        self._switch_before: float | None = None

    def plan(self, key: str, job: Callable[[], object]) -> None:
        """Queue ``job`` under ``key`` unless it is known already or the pool closed."""
        with self._lock:
            if key in self._known or self._closed:
                return
            self._known.add(key)
            self._plan.append((key, job))
            self._wake_worker()

    def submitted(self, key: str) -> bool:
        with self._lock:
            return key in self._known

    def _wake_worker(self) -> None:
        """With the lock held: a worker for the next planned job, waking an idle one
        or starting a thread when every thread runs a job and fewer than ``size`` count."""
        if self._idle:
            self._work.notify()
        elif self._counted < self.size and len(self._threads) == len(self._running):
            thread = threading.Thread(
                target=self._worker,
                name=f"agentbench-rollout-{len(self._threads)}",
                daemon=True,
            )
            self._threads.append(thread)
            if len(self._threads) == 2:
                self._raise_switch_interval()
            thread.start()

    def _may_start(self) -> bool:
        """With the lock held: whether a worker may take the next planned job. The job a
        caller waits for may always start (it is at the front of the plan)."""
        if not self._plan or self._counted >= self.size or self._returning:
            return False
        return self._uncollected < self.ahead or self._plan[0][0] == self._awaited

    def _worker(self) -> None:
        while True:
            with self._lock:
                while not self._closed and not self._may_start():
                    self._idle += 1
                    self._work.wait()
                    self._idle -= 1
                if self._closed:
                    return
                key, job = self._plan.popleft()
                self._uncollected += 1
                self._running.add(key)
                self._counted += 1
                if self._may_start():
                    self._wake_worker()  # planned ones that the others left
            _current.pool, _current.counted = self, True
            try:
                outcome: tuple[bool, object] = (True, job())
            except BaseException as exc:  # handed to the caller of result()
                outcome = (False, exc)
            with self._lock:
                self._running.discard(key)
                if _current.counted:
                    self._free_place()
                _current.pool = None
                self._finished[key] = outcome
                if key == self._awaited:
                    self._done.notify_all()

    def _free_place(self) -> None:
        """With the lock held: the calling job stops counting against ``size``; a job
        stepping back takes the place first, else the next planned job."""
        self._counted -= 1
        _current.counted = False
        if self._returning:
            self._place.notify()
        elif self._plan:
            self._wake_worker()

    def _step_aside(self) -> None:
        with self._lock:
            if _current.counted:
                self._free_place()

    def _step_back(self) -> None:
        with self._lock:
            if _current.counted:
                return
            self._returning += 1
            try:
                while self._counted >= self.size and not self._closed:
                    self._place.wait()
            finally:
                self._returning -= 1
            self._counted += 1
            _current.counted = True
            if not self._returning and self._counted < self.size and self._plan:
                self._wake_worker()

    def result(
        self,
        key: str,
        job: Callable[[], R],
        on_wait: Callable[[], None] | None = None,
        interval_s: float = 0.25,
    ) -> R:
        """The result of the job under ``key``; the job's own exception is raised here.
        ``job`` is the one planned under ``key`` (the same rollout): its result is ``R``.
        ``on_wait`` is called every ``interval_s`` while waiting (the live status line).
        A collected result is forgotten, so a long run keeps only what is ahead."""
        with self._lock:
            closed = False
            if self._closed and key not in self._finished and key not in self._running:
                closed = True
            else:
                self._front(key, job)
                self._awaited = key
                try:
                    while key not in self._finished:
                        if self._closed and key not in self._running:
                            closed = True  # dropped from the plan by close()
                            break
                        self._done.wait(interval_s if on_wait is not None else None)
                        if key not in self._finished and on_wait is not None:
                            self._lock.release()
                            try:
                                on_wait()
                            finally:
                                self._lock.acquire()
                finally:
                    self._awaited = None
            if not closed:
                ok, value = self._finished.pop(key)
                self._known.discard(key)
                self._uncollected -= 1
                if self._plan and self._idle:
                    self._work.notify()
        if closed:  # the pool closed before this job could start
            return job()
        if not ok:
            assert isinstance(value, BaseException)
            raise value
        return cast(R, value)  # planned under ``key``: a result of the same job

    def _front(self, key: str, job: Callable[[], object]) -> None:
        """With the lock held: make sure ``key`` runs next if it has not started."""
        if key in self._finished:
            return
        if key in self._known:
            for index, (planned, _) in enumerate(self._plan):
                if planned == key:
                    del self._plan[index]
                    break
            else:
                return  # running
        self._known.add(key)
        self._plan.appendleft((key, job))
        if self._idle:
            self._work.notify_all()  # the one free to start it may not be the first woken
        else:
            self._wake_worker()

    def _raise_switch_interval(self) -> None:
        """With a second rollout thread: the GIL is handed on every ``SWITCH_INTERVAL_S``
        rather than the interpreter's 5 ms while this pool runs (``close`` puts it back).
        With dozens of runnable threads the default made a convoy: every forced hand-off
        is a futex wake and a context switch (at 128 in flight, ~90 voluntary switches
        per rollout and about as much system CPU as user CPU; docs/scale.md has the
        figures before and after). A thread that blocks (on its socket, a lock, a file)
        still hands the GIL on at once, so waits on the model are not lengthened."""
        before = sys.getswitchinterval()
        if before < SWITCH_INTERVAL_S:
            self._switch_before = before
            sys.setswitchinterval(SWITCH_INTERVAL_S)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._plan.clear()
            self._work.notify_all()
            self._done.notify_all()
            self._place.notify_all()
            before, self._switch_before = self._switch_before, None
        if before is not None and sys.getswitchinterval() == SWITCH_INTERVAL_S:
            sys.setswitchinterval(before)  # (unless someone else changed it since)


#: The GIL's switch interval while a pool runs more than one rollout thread (the
#: interpreter's default is 0.005 s): see ``RolloutPool._raise_switch_interval``.
SWITCH_INTERVAL_S = 0.02

#: The pool and standing of the job this thread runs (unset outside a pool's thread).
_current = threading.local()


def default_ahead(size: int) -> int:
    """Jobs that may be started and not yet collected: ``size`` counted ones and as many
    again finished or in the queue, plus one verifying per CPU slot (sandbox/cpuslots.py)
    so that stepping aside can keep every core busy."""
    return 2 * size + slot_count()


def in_pool() -> bool:
    """Whether this thread runs a pool's job (a rollout running ahead of its item)."""
    return getattr(_current, "pool", None) is not None


def step_aside() -> None:
    """The job running in this thread stops counting against its pool's size (it is
    about to verify: a core, not the model). Nothing outside a pool's thread."""
    pool: RolloutPool | None = getattr(_current, "pool", None)
    if pool is not None:
        pool._step_aside()


def step_back() -> None:
    """The job running in this thread counts against its pool's size again, waiting for
    a place (its next model call). Nothing outside a pool's thread or when it counts."""
    pool: RolloutPool | None = getattr(_current, "pool", None)
    if pool is not None:
        pool._step_back()
