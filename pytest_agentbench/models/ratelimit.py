"""A request limit shared by every process of a run: requests in flight and requests per
minute, shrinking when the provider says "slow down" and growing back after successes.

One ``SharedLimit`` decides for the whole run. In a single process the model client asks
it directly (a lock and a condition: microseconds per request). Under xdist it lives in
the controller, which serves it to the workers over loopback (``ratelimit_remote``).

``LimitedClient`` wraps any ModelClient: each request holds a slot for its whole stream.
Put it inside the retrying client, so every attempt asks again and a retry's backoff
sleeps without holding a slot.
"""

from __future__ import annotations

import dataclasses
import math
import threading
import time
from collections.abc import Callable
from typing import Literal, Protocol

from pytest_agentbench.core.durations import seconds_text
from pytest_agentbench.core.fastclass import dataclass
from pytest_agentbench.core.stream import EventSink
from pytest_agentbench.core.urls import public_url
from pytest_agentbench.errors import ModelTimeout, RateLimited, TransportError
from pytest_agentbench.models.base import Generation, ModelClient, ModelRequest

Outcome = Literal["ok", "limited", "error"]

#: The whole-run pause after a rate limit that came without Retry-After (doubles while
#: rate limits keep coming without a success in between), and the cap on any pause.
BASE_PAUSE_S = 0.5
MAX_PAUSE_S = 60.0


class LimitTimeout(Exception):
    """No slot was granted before the caller's deadline."""


class LimitClosed(Exception):
    """The limit was closed (the run is stopping) or its service cannot be reached."""


@dataclass(frozen=True)
class Permit:
    """A granted slot. ``epoch`` is the window it was granted under (a rate limit shrinks
    the window once per epoch, however many requests of that epoch it hits); ``waited_s``
    is how long the grant took; ``handle`` belongs to the limit that granted it."""

    epoch: int
    waited_s: float = 0.0
    handle: object = None


class Limit(Protocol):
    """What LimitedClient needs: a slot per request, and how the request went."""

    def acquire(self, timeout_s: float | None) -> Permit: ...

    def release(
        self, permit: Permit, outcome: Outcome, retry_after_s: float | None = None
    ) -> None: ...

    def close(self) -> None: ...


class SharedLimit:
    """The run's limit; thread-safe.

    ``max_connections`` bounds requests in flight (None: no bound until a rate limit sets
    one); ``rpm`` paces grants at ``rpm / 60`` per second with no burst beyond one
    request, so any minute sees at most ``rpm + 1``. Adaptive (AIMD): the first rate
    limit of an epoch halves the window and starts a new epoch; every rate limit pauses
    all grants for the provider's Retry-After (else ``BASE_PAUSE_S``, doubling while no
    success comes between); after ``window`` successes of the current epoch the window
    grows by one, back up to ``max_connections`` (or, with none set, to unbounded once it
    is back where the first shrink found it).
    """

    def __init__(
        self,
        max_connections: int | None = None,
        rpm: float | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if max_connections is not None and max_connections < 1:
            raise ValueError(f"max_connections must be >= 1, got {max_connections}")
        if rpm is not None and not rpm > 0:
            raise ValueError(f"rpm must be > 0, got {rpm}")
        self.max_connections = max_connections
        self.rpm = rpm
        self._rate = rpm / 60 if rpm is not None else None
        self._clock = clock
        self._cond = threading.Condition()
        self._window = max_connections
        self._ceiling = max_connections
        self._in_flight = 0
        self._epoch = 0
        self._successes = 0
        self._streak = 0
        self._paused_until = -math.inf
        self._tokens = 1.0
        self._refilled = clock()
        self._closed = False
        self._counts = {"granted": 0, "rate_limited": 0, "shrinks": 0, "max_in_flight": 0}

    def describe(self) -> str:
        parts = []
        if self.max_connections is not None:
            parts.append(f"max {self.max_connections} in flight")
        if self.rpm is not None:
            parts.append(f"{self.rpm:g} requests/min")
        return ", ".join(parts) or "adaptive only"

    def stats(self) -> dict[str, int | None]:
        """Counters for reports and tests: the window now, requests in flight now and at
        most, grants, rate limits seen, and how often the window shrank."""
        with self._cond:
            return {"window": self._window, "in_flight": self._in_flight, **self._counts}

    def try_acquire(self) -> Permit | float | None:
        """A Permit when a slot is free now; else how long to wait (seconds until a pause
        ends or a token is due), or None when only a release can free a slot."""
        with self._cond:
            return self._try(self._clock())

    def acquire(self, timeout_s: float | None) -> Permit:
        """Wait for a slot; raises LimitTimeout after ``timeout_s`` (None: no limit) and
        LimitClosed once ``close`` was called."""
        start = self._clock()
        deadline = start + timeout_s if timeout_s is not None else None
        with self._cond:
            while True:
                now = self._clock()
                got = self._try(now)
                if isinstance(got, Permit):
                    return dataclasses.replace(got, waited_s=now - start)
                if deadline is not None:
                    if now >= deadline:
                        raise LimitTimeout(
                            f"no slot within {seconds_text(timeout_s or 0)} s ({self.describe()})"
                        )
                    got = deadline - now if got is None else min(got, deadline - now)
                self._cond.wait(got)

    def release(self, permit: Permit, outcome: Outcome, retry_after_s: float | None = None) -> None:
        """Give the slot back and say how the request went: ``limited`` (429/529) shrinks
        and pauses, ``ok`` may grow the window, ``error`` changes nothing."""
        with self._cond:
            self._in_flight = max(0, self._in_flight - 1)
            if outcome == "limited":
                self._back_off(permit.epoch, retry_after_s)
                self._cond.notify_all()
                return
            if outcome == "ok":
                self._grow(permit.epoch)
            free = self._free()
            if free:
                self._cond.notify(free)

    def close(self) -> None:
        """Refuse every waiting and later acquire (LimitClosed)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def _free(self) -> int:
        if self._window is None:
            return 1 << 30
        return max(0, self._window - self._in_flight)

    def _try(self, now: float) -> Permit | float | None:
        if self._closed:
            raise LimitClosed("the run is stopping")
        if now < self._paused_until:
            return self._paused_until - now
        if not self._free():
            return None
        if self._rate is not None:
            self._tokens = min(1.0, self._tokens + (now - self._refilled) * self._rate)
            self._refilled = now
            if self._tokens < 1.0 - 1e-9:
                return (1.0 - self._tokens) / self._rate
            self._tokens -= 1.0
        self._in_flight += 1
        self._counts["granted"] += 1
        self._counts["max_in_flight"] = max(self._counts["max_in_flight"], self._in_flight)
        return Permit(self._epoch)

    def _back_off(self, epoch: int, retry_after_s: float | None) -> None:
        self._counts["rate_limited"] += 1
        if epoch == self._epoch:
            if self._window is None:
                self._ceiling = self._in_flight + 1
            base = self._window if self._window is not None else self._ceiling or 1
            self._window = max(1, base // 2)
            self._epoch += 1
            self._successes = 0
            self._streak += 1
            self._counts["shrinks"] += 1
        pause = retry_after_s
        if pause is None:
            pause = BASE_PAUSE_S * 2 ** max(0, self._streak - 1)
        until = self._clock() + min(max(pause, 0.0), MAX_PAUSE_S)
        self._paused_until = max(self._paused_until, until)

    def _grow(self, epoch: int) -> None:
        self._streak = 0
        if self._window is None or epoch != self._epoch:
            return
        self._successes += 1
        if self._successes >= self._window:
            self._successes = 0
            self._window += 1
            if self._ceiling is None or self._window >= self._ceiling:
                self._window = self.max_connections


class LimitedClient:
    """A ModelClient whose every request holds a slot of ``limit`` for its whole stream.

    Time spent waiting for a slot counts toward the request's ``timeout_s`` (the task's
    clock runs while it queues); a request that gets no slot in time raises ModelTimeout
    saying so. A 429/529 (RateLimited) is reported to the limit, which slows the whole
    run; the error itself is raised as it is, for the retrying client outside."""

    def __init__(self, inner: ModelClient, limit: Limit, *, label: str = "") -> None:
        self.inner = inner
        self.spec = inner.spec
        self.limit = limit
        self.label = label or "the run's shared request limit"
        self._endpoint = public_url(str(getattr(inner, "base_url", "") or ""))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.inner!r})"

    def close(self) -> None:
        self.limit.close()
        self.inner.close()

    def generate(self, request: ModelRequest, on_event: EventSink | None = None) -> Generation:
        endpoint = self._endpoint
        try:
            permit = self.limit.acquire(request.timeout_s)
        except LimitTimeout:
            raise ModelTimeout(
                f"{endpoint or self.spec.label}: not sent: no request slot free within "
                f"{seconds_text(request.timeout_s or 0)} s under {self.label}",
                endpoint=endpoint,
            ) from None
        except LimitClosed as exc:
            raise TransportError(
                f"{endpoint or self.spec.label}: not sent: {exc}", endpoint=endpoint
            ) from None
        if permit.waited_s and request.timeout_s is not None:
            left = max(request.timeout_s - permit.waited_s, 0.001)
            request = dataclasses.replace(request, timeout_s=left)
        outcome: Outcome = "error"
        retry_after: float | None = None
        try:
            generation = self.inner.generate(request, on_event)
            outcome = "ok"
            return generation
        except RateLimited as exc:
            outcome = "limited"
            value = getattr(exc, "retry_after", None)
            if isinstance(value, int | float) and not isinstance(value, bool):
                retry_after = float(value)
            raise
        finally:
            self.limit.release(permit, outcome, retry_after)
