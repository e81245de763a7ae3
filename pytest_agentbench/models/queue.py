"""Time a request spends queued at its server is not the model's time.

A server that serves one request at a time (llama-cpp-python, Ollama by default) keeps the
others waiting, and says nothing while they wait: a streamed request gets its response
headers at once and its first event only when its turn comes; an unstreamed one gets
nothing until its reply is done. With the run's default concurrency of 8, the last of
eight requests waits for the seven before it, and a deadline counted from the moment it
was sent turned such waits into model timeouts.

So until its reply begins (the first event of a stream, the response of an unstreamed
request), a request's clock stops while it is *blocked*: while a request sent earlier to
the same server (by this process) is still in flight, or while another one's reply is
being received (the server is visibly busy with someone else, whatever order it serves
in). A request sent when nothing else is in flight is never blocked, exactly as before;
on a server that serves in parallel, replies begin at once, so little is ever credited;
on a server that queues, a request waits while others are served, and that time goes to
the queue. The wait is bounded (``wait_limit_s``): a request still blocked then is a
QueueTimeout (a harness error, never the model's timeout).

``ServerQueue`` is one client's view of its server; each request takes a ``Place`` in it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

#: The most a request waits behind others before its reply begins: ten times its own
#: deadline, and never less than ten minutes (the requests ahead of it end by their own
#: deadlines, so a queue drains unless the server is stuck).
WAIT_FACTOR = 10.0
WAIT_MIN_S = 600.0


def wait_limit_s(timeout_s: float) -> float:
    """How long a request with ``timeout_s`` of model time may wait in its server's queue."""
    return max(WAIT_MIN_S, WAIT_FACTOR * timeout_s)


#: Told the instant its own time is counted from (``sent`` plus the time credited to
#: the queue) when a request stops being blocked, or None when it becomes blocked.
Listener = Callable[[float | None], None]


class Place:
    """One request's place in its server's queue. ``origin`` is the instant its own time
    is counted from while it is not blocked (None while it is); ``waited_s`` is the time
    credited to the queue so far."""

    __slots__ = ("_listener", "_queue", "begun", "blocked_since", "credited", "sent", "ticket")

    def __init__(self, queue: ServerQueue, ticket: int, sent: float) -> None:
        self._queue = queue
        self.ticket = ticket
        self.sent = sent
        self.begun = False
        self.credited = 0.0
        self.blocked_since: float | None = None
        self._listener: Listener | None = None

    @property
    def origin(self) -> float | None:
        return None if self.blocked_since is not None else self.sent + self.credited

    @property
    def blocked(self) -> bool:
        return self.blocked_since is not None

    @property
    def waited_s(self) -> float:
        """Seconds credited to the queue (a stretch still going counts up to now)."""
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
    """The requests of one client in flight to its server, in the order they were sent."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._places: dict[int, Place] = {}  # insertion order: the order sent
        self._next = 0

    def __len__(self) -> int:
        with self._lock:
            return len(self._places)

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
            was_blocked = place.blocked
            place.begun = True
            told = self._settle(time.monotonic())
            origin = place.origin if was_blocked else None
        self._tell(told)
        return origin

    def leave(self, place: Place) -> None:
        with self._lock:
            if self._places.pop(place.ticket, None) is None:
                return
            place._listener = None
            told = self._settle(time.monotonic())
        self._tell(told)

    def _settle(self, now: float) -> list[tuple[Listener, float | None]]:
        """Block or free every request whose reply has not begun (under the lock); the
        listeners to tell, with what."""
        told: list[tuple[Listener, float | None]] = []
        busy = sum(1 for place in self._places.values() if place.begun)
        for index, place in enumerate(self._places.values()):
            blocked = not place.begun and (index > 0 or busy > 0)
            if blocked and place.blocked_since is None:
                place.blocked_since = now
                if place._listener is not None:
                    told.append((place._listener, None))
            elif not blocked and place.blocked_since is not None:
                place.credited += now - place.blocked_since
                place.blocked_since = None
                if place._listener is not None:
                    told.append((place._listener, place.origin))
        return told

    @staticmethod
    def _tell(told: list[tuple[Listener, float | None]]) -> None:
        for listener, origin in told:
            listener(origin)
