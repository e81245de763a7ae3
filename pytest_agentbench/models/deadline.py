"""The deadline of a request in flight: one clock thread for the whole process shuts a
request's socket when its deadline passes, which ends even a read blocked in ``recv``."""

from __future__ import annotations

import contextlib
import heapq
import socket
import threading
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pytest_agentbench.models.wire import Response


class _DeadlineClock:
    """One daemon thread for every watchdog of the process: a heap of deadlines, so a
    request costs a heap push, not a thread of its own (at 64+ requests in flight, a
    timer thread per request cost more CPU than the request).

    The thread is woken only by a deadline earlier than every other (a later one changes
    nothing it waits for). A request that finishes leaves its entry behind until it is
    due; once most entries are such leftovers, the heap is rebuilt without them, so it
    holds about twice the requests in flight, not every request of the deadline window.
    One lock guards the heap and every watchdog's state."""

    PRUNE_MIN = 64

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, Watchdog]] = []
        self.lock = threading.Lock()
        self._wake = threading.Condition(self.lock)
        self._count = 0
        self.finished = 0  # entries of finished watchdogs still in the heap
        self._thread: threading.Thread | None = None

    def add(self, deadline: float, watchdog: Watchdog) -> None:
        with self.lock:
            heap = self._heap
            if self.finished >= self.PRUNE_MIN and self.finished * 2 >= len(heap):
                heap[:] = [entry for entry in heap if not entry[2].finished]
                heapq.heapify(heap)
                self.finished = 0
            self._count += 1
            earliest = not heap or deadline < heap[0][0]
            heapq.heappush(heap, (deadline, self._count, watchdog))
            watchdog.entries += 1
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="agentbench-deadlines", daemon=True
                )
                self._thread.start()
            elif earliest:
                self._wake.notify()

    def __len__(self) -> int:
        with self.lock:
            return len(self._heap)

    def _run(self) -> None:
        heap = self._heap
        with self.lock:
            while True:
                if not heap:
                    self._wake.wait()
                    continue
                deadline, _, watchdog = heap[0]
                delay = deadline - time.monotonic()
                if delay > 0:
                    self._wake.wait(delay)
                    continue
                heapq.heappop(heap)
                watchdog.entries -= 1
                if watchdog.finished:
                    self.finished -= 1
                elif deadline == watchdog.deadline:  # (an entry of a moved deadline is stale)
                    watchdog.fire()


_CLOCK = _DeadlineClock()


class Watchdog:
    """Shuts the response's socket at the deadline, unblocking a read stuck in recv."""

    __slots__ = ("_early", "_socket", "deadline", "entries", "finished", "fired")

    def __init__(self, deadline: float | None) -> None:
        self.deadline = deadline
        self.fired = False
        self.finished = False
        self.entries = 0  # its entries in the clock's heap (more than one once moved)
        self._socket: socket.socket | None = None
        self._early: list[socket.socket] | None = None

    def arm_early(self, sockets: list[socket.socket]) -> None:
        """Watch before the response's headers arrive: at the deadline, shut every socket
        in ``sockets`` (a list that may still grow: the connections of the one thread
        that sends this request, so only this request or idle connections are hit)."""
        if self.deadline is None:
            return
        with _CLOCK.lock:
            self._early = sockets
        _CLOCK.add(self.deadline, self)

    def arm(self, response: Response) -> None:
        """Watch ``response``'s socket (none: nothing to shut, nothing watched)."""
        if self.deadline is None:
            return
        sock = response.socket
        if sock is None:
            return
        with _CLOCK.lock:
            self._socket = sock
            queued = self.entries > 0  # armed early: its entry holds the deadline
        if not queued:
            _CLOCK.add(self.deadline, self)

    def move(self, deadline: float) -> None:
        """A new deadline, earlier or later (the request's own time began later than it
        was sent: models/queue.py). Before ``arm`` it is only remembered."""
        with _CLOCK.lock:
            self.deadline = deadline
            armed = (self._socket is not None or self._early is not None) and not self.finished
        if armed:
            _CLOCK.add(deadline, self)

    def fire(self) -> None:
        """Called by the clock, holding its lock, at the deadline of an unfinished
        request: shut its socket."""
        if self._socket is not None:
            sockets = [self._socket]
        elif self._early is not None:
            sockets = [sock for sock in self._early if sock.fileno() != -1]
        else:
            return
        self.fired = True
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def finish(self) -> None:
        """The request is over: the deadline no longer applies (its heap entry is left
        for the clock to drop)."""
        if self._socket is None and self._early is None:
            return
        with _CLOCK.lock:
            self.finished = True
            self._socket = self._early = None
            _CLOCK.finished += self.entries
