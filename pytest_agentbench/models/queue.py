"""Time a request spends queued at its server is not the model's time, where the server
serves one request at a time.

A server that serves one request at a time (llama-cpp-python, Ollama by default) keeps the
others waiting, and says nothing while they wait: a streamed request gets its response
headers at once and its first event only when its turn comes; an unstreamed one gets
nothing until its reply is done. With the run's default concurrency of 8, the last of
eight requests waits for the seven before it, and a deadline counted from the moment it
was sent turned such waits into model timeouts.

Crediting that wait everywhere has a price: against a server that is stuck (accepts and
never answers) every request looks queued behind the one before it, so the i-th request
ended after about i times the timeout. So the queue is credited only where the server
serves one request at a time:

- *declared* (``ServerQueue(serial=True)``: ``--agentbench-serial-server``), or
- *seen*: a reply began only when another had ended (a request that was in flight while
  another's reply ran began its own with no other reply running, or within ``GRACE_S``
  of that reply's end), and no two replies have yet run side by side for longer than
  ``GRACE_S``. Two replies running together show a server that serves in parallel:
  from then on nothing more is credited (what was credited stays).

Until the server is seen to queue, every request's own clock runs from the moment it was
sent: the task's timeout bounds its wall time, as it does for any server that is stuck or
serves in parallel.

Where the queue is credited, a request's clock stops while it is *blocked* before its
reply begins (the first event of a stream, the response of an unstreamed request): while
a request sent earlier to the same server (by this process) is still in flight, or while
another one's reply is being received. The wait is bounded (``wait_limit_s``): a request
still blocked then is a QueueTimeout (a harness error, never the model's timeout). Blocked
time is tracked from the start, so a server seen to queue has its requests' waits so far
credited at once.

Every event (a request sent, a reply begun, a request over) costs O(1) under the queue's
lock: only the oldest request in flight can change between blocked and free, and the
listeners are told only while the queue is credited.

``ServerQueue`` is one client's view of its server; each request takes a ``Place`` in it.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Literal

#: The most a request waits behind others before its reply begins: ten times its own
#: deadline, and never less than ten minutes (the requests ahead of it end by their own
#: deadlines, so a queue drains unless the server is stuck).
WAIT_FACTOR = 10.0
WAIT_MIN_S = 600.0
#: How far apart a reply's end and the next one's beginning may be seen (two threads read
#: them) and still count as one after the other; two replies running together for longer
#: show a server that serves in parallel.
GRACE_S = 0.25

#: How the server serves, as far as this process knows: ``declared`` and ``seen`` (one at a
#: time: the queue is credited), ``unknown`` (nothing seen yet), ``parallel`` (two replies
#: ran side by side: nothing more is credited).
Serving = Literal["declared", "seen", "unknown", "parallel"]


def wait_limit_s(timeout_s: float) -> float:
    """How long a request with ``timeout_s`` of model time may wait in its server's queue."""
    return max(WAIT_MIN_S, WAIT_FACTOR * timeout_s)


#: Told the instant its own time is counted from (``sent`` plus the time credited to
#: the queue) when a request stops being blocked, or None when it becomes blocked.
Listener = Callable[[float | None], None]


class Place:
    """One request's place in its server's queue. ``origin`` is the instant its own time
    is counted from while it is not blocked (None while it is); ``waited_s`` is the time
    credited to the queue so far (0 unless the server is seen or declared to queue)."""

    __slots__ = (
        "_listener",
        "_queue",
        "begun",
        "begun_at",
        "blocked_since",
        "credited",
        "sent",
        "ticket",
    )

    def __init__(self, queue: ServerQueue, ticket: int, sent: float) -> None:
        self._queue = queue
        self.ticket = ticket
        self.sent = sent
        self.begun = False
        self.begun_at = 0.0
        #: Blocked time so far (closed stretches), and the start of the current one.
        self.credited = 0.0
        self.blocked_since: float | None = None
        self._listener: Listener | None = None

    @property
    def origin(self) -> float | None:
        if not self._queue.crediting:
            return self.sent + self._queue.kept(self)
        return None if self.blocked_since is not None else self.sent + self.credited

    @property
    def blocked(self) -> bool:
        """Whether its clock is stopped now (only ever where the queue is credited)."""
        return self.blocked_since is not None and self._queue.crediting

    @property
    def waited_s(self) -> float:
        """Seconds credited to the queue (a stretch still going counts up to now)."""
        queue = self._queue
        if not queue.crediting:
            return queue.kept(self)
        since = self.blocked_since
        return self.credited + (time.monotonic() - since if since is not None else 0.0)

    def began(self) -> float | None:
        """The reply began: the request is never blocked again (and its reply keeps the
        others blocked). Returns its origin when this call unblocked it, else None."""
        return self._queue.begin(self)

    def listen(self, listener: Listener) -> float | None:
        """Call ``listener`` whenever the request becomes blocked or free (from the
        thread that changed it); returns its origin now (None: blocked)."""
        return self._queue.listen(self, listener)

    def leave(self) -> None:
        """The request is over (answered, failed or cancelled)."""
        self._queue.leave(self)


class ServerQueue:
    """The requests of one client in flight to its server, in the order they were sent.
    ``serial=True`` declares that the server serves one request at a time."""

    def __init__(self, serial: bool = False) -> None:
        self._lock = threading.Lock()
        self._places: OrderedDict[int, Place] = OrderedDict()  # the order sent
        self._next = 0
        self.serving: Serving = "declared" if serial else "unknown"
        self._busy = 0  # replies begun and not over
        self._last_end = float("-inf")  # when the last begun reply was over
        self._last_begun: Place | None = None
        self._overlap_since: float | None = None  # two replies or more running since
        #: What each place was credited when crediting stopped (parallel seen).
        self._kept: dict[int, float] = {}
        self._credited_told = serial  # the listeners know that the queue is credited

    def __len__(self) -> int:
        with self._lock:
            return len(self._places)

    @property
    def crediting(self) -> bool:
        return self.serving in ("declared", "seen")

    def declare_serial(self) -> None:
        """The server serves one request at a time (the user said so): credit its queue."""
        with self._lock:
            self.serving = "declared"
            told = self._news()
        self._tell(told)

    def kept(self, place: Place) -> float:
        return self._kept.get(place.ticket, 0.0) if self._kept else 0.0

    def join(self) -> Place:
        """A place for a request sent now: blocked when anything is in flight before it."""
        now = time.monotonic()
        with self._lock:
            place = Place(self, self._next, now)
            self._next += 1
            if self._places:
                place.blocked_since = now
            self._places[place.ticket] = place
        return place

    def listen(self, place: Place, listener: Listener) -> float | None:
        with self._lock:
            place._listener = listener
            return place.origin

    def begin(self, place: Place) -> float | None:
        with self._lock:
            if place.begun:
                return None
            now = time.monotonic()
            self._observe(now)
            was_blocked = place.blocked
            if self._busy == 0 and place.sent < self._last_end and self.serving == "unknown":
                # it was in flight when another reply ended, and began with none running
                self.serving = "seen"
            place.begun = True
            place.begun_at = now
            self._busy += 1
            if self._busy >= 2 and self._overlap_since is None:
                self._overlap_since = now
            self._last_begun = place
            told = self._settle(now, place) + self._news()
            origin = place.origin if was_blocked and self.crediting else None
        self._tell(told)
        return origin

    def leave(self, place: Place) -> None:
        with self._lock:
            if self._places.pop(place.ticket, None) is None:
                return
            place._listener = None
            now = time.monotonic()
            if place.begun:
                self._observe(now)
                latest = self._last_begun
                if (
                    self._busy == 2
                    and latest is not None
                    and latest is not place
                    and latest.begun_at > place.begun_at
                    and now - latest.begun_at <= GRACE_S
                    and self.serving == "unknown"
                ):
                    # the next reply was read a moment before this one's end: one after
                    # the other all the same (two threads read them)
                    self.serving = "seen"
                self._busy -= 1
                self._last_end = now
                if self._busy < 2:
                    self._overlap_since = None
            if self._kept:
                self._kept.pop(place.ticket, None)
            told = self._settle(now, place) + self._news()
        self._tell(told)

    def _observe(self, now: float) -> None:
        """Two replies have run side by side past the grace: the server serves in
        parallel, so nothing more is credited (what was is kept)."""
        since = self._overlap_since
        if since is None or now - since <= GRACE_S or self.serving in ("declared", "parallel"):
            return
        was = self.serving
        self.serving = "parallel"
        if was == "seen":
            for ticket, one in self._places.items():
                stretch = now - one.blocked_since if one.blocked_since is not None else 0.0
                if one.credited + stretch > 0:
                    self._kept[ticket] = one.credited + stretch

    def _news(self) -> list[tuple[Listener, float | None]]:
        """When crediting began or ended at this event, every listener is told where its
        clock stands now (once per change: O(requests in flight), at most twice a run)."""
        if self._credited_told == self.crediting:
            return []
        self._credited_told = self.crediting
        return [
            (one._listener, one.origin)
            for one in self._places.values()
            if one._listener is not None
        ]

    def _settle(self, now: float, changed: Place) -> list[tuple[Listener, float | None]]:
        """After ``changed`` began or left: its own stretch closes, and the oldest request
        in flight (the only other one whose state can change) is blocked or freed. The
        listeners to tell, with what (none while nothing is credited)."""
        told: list[tuple[Listener, float | None]] = []
        if changed.blocked_since is not None:
            changed.credited += now - changed.blocked_since
            changed.blocked_since = None
            if changed._listener is not None and self.crediting:
                told.append((changed._listener, changed.origin))
        if not self._places:
            return told
        front = next(iter(self._places.values()))
        if front.begun:
            return told
        blocked = self._busy > 0
        if blocked and front.blocked_since is None:
            front.blocked_since = now
            if front._listener is not None and self.crediting:
                told.append((front._listener, None))
        elif not blocked and front.blocked_since is not None:
            front.credited += now - front.blocked_since
            front.blocked_since = None
            if front._listener is not None and self.crediting:
                told.append((front._listener, front.origin))
        return told

    @staticmethod
    def _tell(told: list[tuple[Listener, float | None]]) -> None:
        for listener, origin in told:
            listener(origin)
