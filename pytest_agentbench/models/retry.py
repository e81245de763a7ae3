"""Retries of failed model requests: which failures, how long to wait, when to give up.

A retry is only safe when the failed attempt delivered nothing: a reply that already
streamed text, thinking or a tool call is not replayed (the caller has seen it, the
loop watch has judged it), so that failure is raised with what arrived kept. Every retry
is recorded where the trajectory keeps it: ``exchange["retries"]`` of the Generation
returned, or ``retries`` of the error finally raised.

A stream that ended without one event where the same request unstreamed may say why
(``ModelError.ask_unstreamed``: llama-cpp-python's answer to a prompt past its context) is
asked so once, at once, as the next attempt: it counts in ``max_attempts`` like any
retry, so a server that answers every request with an empty 200 costs what it did before
(four requests), and a context overflow it learns is never retried.
"""

from __future__ import annotations

import dataclasses
import math
import random
import threading
import time
from collections.abc import Callable

from pytest_agentbench.core.fastclass import dataclass
from pytest_agentbench.core.jsontypes import JsonObject, JsonValue
from pytest_agentbench.core.outcome import retries_made
from pytest_agentbench.core.stream import EventSink
from pytest_agentbench.errors import (
    ContextOverflow,
    ModelError,
    ProviderError,
    QueueTimeout,
    TransportError,
)
from pytest_agentbench.models.base import Generation, ModelClient, ModelRequest

#: Statuses worth another try: timeouts, conflicts, too early, rate limits, server and
#: gateway errors, Cloudflare's 522/524, Anthropic's 529 overloaded.
RETRYABLE_STATUSES = frozenset({408, 409, 425, 429, 500, 502, 503, 504, 522, 524, 529})


@dataclass(frozen=True)
class RetryPolicy:
    """When and how long to retry.

    ``max_attempts`` counts the first attempt. A wait is full-jitter exponential (uniform
    in ``[0, min(max_delay_s, base_delay_s * 2**(n-1))]`` before the n-th retry) but never
    shorter than the server's Retry-After, itself capped at ``retry_after_cap_s``.
    ``deadline_s`` bounds the whole call: no wait that would end past it begins.
    """

    max_attempts: int = 4
    base_delay_s: float = 0.5
    max_delay_s: float = 30.0
    retry_after_cap_s: float = 60.0
    deadline_s: float | None = None
    statuses: frozenset[int] = RETRYABLE_STATUSES

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError(f"max_attempts must be >= 1, got {self.max_attempts}")
        for name in ("base_delay_s", "max_delay_s", "retry_after_cap_s"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.deadline_s is not None and self.deadline_s <= 0:
            raise ValueError(f"deadline_s must be > 0, got {self.deadline_s}")
        object.__setattr__(self, "statuses", frozenset(self.statuses))

    def retryable(self, error: ModelError) -> bool:
        """True for a failure worth another attempt: a retryable status or a broken
        connection, and nothing delivered yet. Never a timeout (ModelTimeout is neither),
        a context overflow (the same conversation overflows again, even when an older
        llama.cpp says so with a 500) nor any other 4xx."""
        if delivered(error) or isinstance(error, ContextOverflow | QueueTimeout):
            return False
        if isinstance(error, ProviderError):
            return error.status in self.statuses
        return isinstance(error, TransportError)

    def backoff_s(self, retry: int, retry_after: float | None, rng: random.Random) -> float:
        """The wait before the ``retry``-th retry (1-based)."""
        ceiling = min(self.max_delay_s, self.base_delay_s * 2 ** (retry - 1))
        wait = rng.uniform(0.0, ceiling)
        if retry_after is not None:
            wait = max(wait, min(retry_after, self.retry_after_cap_s))
        return wait


def delivered(error: BaseException) -> bool:
    """Whether the failed attempt already delivered content (text, thinking, a tool call),
    or handed part of its reply on (a relayed request)."""
    if getattr(error, "relayed", False):
        return True
    partial = getattr(error, "partial", None)
    return isinstance(partial, Generation) and bool(
        partial.text or partial.thinking or partial.tool_calls
    )


class RetryingClient:
    """A ModelClient that retries another one (any protocol) under a RetryPolicy.

    The request's ``timeout_s`` is the budget of the whole call: each attempt gets what
    is left of it, and no wait begins that would end past it (or past the policy's
    deadline); then the last error is raised. Errors raised by ``on_event`` (how a caller
    cancels a stream) pass through untouched. The sink may see events of an attempt that
    failed before delivering content (a role chunk, usage) before the retry's events.

    A raised error carries ``retries`` (a list, empty when none happened); when there
    were some, its message ends with what happened, e.g. ``(gave up after 4 attempts)``.
    ``close`` wakes a sleeping retry at once; that call then raises its last error.

    ``clock`` (seconds, monotonic) and ``sleep`` (wait that many seconds) default to the
    real ones; tests pass a fake pair to check the waits without spending them. With a
    ``sleep`` given, ``close`` is seen when it returns.
    """

    def __init__(
        self,
        inner: ModelClient,
        policy: RetryPolicy | None = None,
        *,
        rng: random.Random | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], object] | None = None,
    ) -> None:
        self.inner = inner
        self.spec = inner.spec
        self.policy = policy or RetryPolicy()
        self._rng = rng or random.Random()
        self._clock = clock
        self._sleep = sleep
        self._closed = threading.Event()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.inner!r}, {self.policy!r})"

    def close(self) -> None:
        self._closed.set()
        self.inner.close()

    def generate(self, request: ModelRequest, on_event: EventSink | None = None) -> Generation:
        started = self._clock()
        budget_end = started + request.timeout_s if request.timeout_s is not None else None
        policy_end = self._policy_end(started)
        retries: list[JsonObject] = []
        attempt = 1
        current = request
        waited = 0.0  # seconds the attempts waited in the server's queue: not the budget's
        asking = False  # this attempt asks an empty stream's request again unstreamed
        asked = False  # ... and one did: the empty streams are not asked about again
        while True:
            try:
                generation = self.inner.generate(current, on_event)
            except ModelError as error:
                if asking:
                    _asked_again(error)
                queued = error.waited_s
                waited += queued
                error.waited_s = waited
                if budget_end is not None:
                    budget_end += queued  # queued time is not spent from the budget
                ends = [t for t in (budget_end, policy_end) if t is not None]
                deadline = min(ends) if ends else None
                stop = self._stop_reason(error, attempt, retries)
                wait = 0.0
                # ask unstreamed where it may learn why a stream was empty, or once more
                # where the connection it was asked on broke before any answer (the
                # server closes it after its empty stream)
                ask = (not asked and error.ask_unstreamed) or (asking and error.status is None)
                if stop is None and not ask:
                    wait = self.policy.backoff_s(attempt, _retry_after(error), self._rng)
                    if deadline is not None and self._clock() + wait >= deadline:
                        stop = (
                            f"gave up after {_attempts(attempt)}: a retry in {wait:.2f} s "
                            "would pass the deadline"
                        )
                if stop is None and self._wait(wait):
                    stop = "retry cancelled: the client was closed"
                if stop is not None:
                    _finish(error, retries, stop)
                    raise
                entry: JsonObject = {
                    "attempt": attempt,
                    "status": error.status,
                    "error": str(error),
                    "waited_s": math.ceil(wait * 1000) / 1000,
                }
                if ask:  # the next attempt asks why, unstreamed: not a retry of the task
                    entry["asked_unstreamed"] = True
                retries.append(entry)
                attempt += 1
                asked, asking = asked or ask, ask
                current = request if not ask else dataclasses.replace(request, stream=False)
                if budget_end is not None:
                    current = dataclasses.replace(
                        current, timeout_s=max(budget_end - self._clock(), 0.001)
                    )
                continue
            exchange: JsonObject = {**generation.exchange, "retries": _as_json(retries)}
            if asking:
                reply = exchange.get("response")
                if isinstance(reply, dict):
                    exchange["response"] = {**reply, "streamed": False, "after_empty_stream": True}
            return dataclasses.replace(
                generation, exchange=exchange, waited_s=waited + generation.waited_s
            )

    def _wait(self, seconds: float) -> bool:
        """Wait before a retry; True when ``close`` came first (or during it)."""
        if self._sleep is None:
            return self._closed.wait(seconds)
        self._sleep(seconds)
        return self._closed.is_set()

    def _policy_end(self, started: float) -> float | None:
        deadline_s = self.policy.deadline_s
        return started + deadline_s if deadline_s is not None else None

    def _stop_reason(
        self, error: ModelError, attempt: int, retries: list[JsonObject]
    ) -> str | None:
        """Why ``error`` ends the call (None: retry it). Not retryable after retries says
        so; not retryable at the first attempt says nothing."""
        if self._closed.is_set():
            return "retry cancelled: the client was closed" if retries else ""
        if not self.policy.retryable(error):
            count = retries_made(retries)
            return f"after {count} {'retry' if count == 1 else 'retries'}" if count else ""
        if attempt >= self.policy.max_attempts:
            return f"gave up after {_attempts(attempt)}" if retries else ""
        return None


ASKED_AGAIN = "after an empty stream, asked again without streaming"


def _asked_again(error: ModelError) -> None:
    """The error of a request asked again unstreamed after an empty stream says so."""
    if error.args and ASKED_AGAIN not in str(error.args[0]):
        error.args = (f"{error.args[0]} ({ASKED_AGAIN})", *error.args[1:])


def _attempts(count: int) -> str:
    return f"{count} attempt{'s' if count != 1 else ''}"


def _retry_after(error: ModelError) -> float | None:
    value = getattr(error, "retry_after", None)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _finish(error: ModelError, retries: list[JsonObject], note: str) -> None:
    """Record the retries on the error (and its partial) and say in its message why the
    retrying stopped."""
    error.retries = list(retries)
    partial = error.partial
    if isinstance(partial, Generation):
        exchange: JsonObject = {**partial.exchange, "retries": _as_json(retries)}
        error.partial = dataclasses.replace(partial, exchange=exchange)
    if note and error.args:
        error.retry_note = note
        error.args = (f"{error.args[0]} ({note})", *error.args[1:])


def _as_json(retries: list[JsonObject]) -> list[JsonValue]:
    """The retry entries as a JSON list (a copy: the caller's list stays its own)."""
    return list[JsonValue](retries)
