"""A circuit breaker: stop sending requests that can only fail the same way.

A wrong key, a model name the server does not know, a request shape it rejects: such
errors do not go away by asking again, and a suite of a thousand tasks would otherwise
make a thousand doomed requests (and bury the one line that explains them). After
``threshold`` identical permanent errors in a row the breaker opens and stays open for
the rest of the run; every later request fails at once with ``CircuitOpen`` naming the
first of those errors.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable

from pytest_agentbench.core.stream import EventSink
from pytest_agentbench.errors import CircuitOpen, ContextOverflow, ModelError, ProviderError
from pytest_agentbench.models.base import Generation, ModelClient, ModelRequest
from pytest_agentbench.models.retry import RETRYABLE_STATUSES

_VARYING = re.compile(r"[A-Za-z0-9_\-]*\d[A-Za-z0-9_\-]*")


def error_shape(error: ModelError) -> tuple[str, int | None, str]:
    """What makes two errors "identical": their kind, status and message, with every word
    holding a digit (counts, ports, request ids) masked, so ``HTTP 401 … request
    req_8f3a`` and ``HTTP 401 … request req_77c1`` are the same error."""
    return type(error).__name__, error.status, _VARYING.sub("#", str(error))


class CircuitBreaker:
    """Counts identical permanent errors in a row; thread-safe.

    Permanent: a ProviderError whose status is not in ``retryable_statuses`` (400, 401,
    403, 404, 422, …), except a ContextOverflow: it belongs to one conversation, not to
    the model or the key, so it neither counts nor restarts the count. A success, or any
    other failure (a timeout, a broken connection, a rate limit, a different permanent
    error), restarts the count; the different permanent error starts the new one. Once
    open it stays open; ``opened_reason`` says why (None while closed).
    """

    def __init__(
        self, threshold: int = 5, *, retryable_statuses: Iterable[int] = RETRYABLE_STATUSES
    ) -> None:
        if threshold < 1:
            raise ValueError(f"threshold must be >= 1, got {threshold}")
        self.threshold = threshold
        self.retryable_statuses = frozenset(retryable_statuses)
        self._lock = threading.Lock()
        self._shape: tuple[str, int | None, str] | None = None
        self._first: ModelError | None = None
        self._count = 0
        self._opened_reason: str | None = None

    @property
    def opened_reason(self) -> str | None:
        """``not sent: 5 identical errors in a row: <the first error>``, or None."""
        with self._lock:
            return self._opened_reason

    @property
    def is_open(self) -> bool:
        return self.opened_reason is not None

    def permanent(self, error: ModelError) -> bool:
        return (
            isinstance(error, ProviderError)
            and error.status is not None
            and error.status not in self.retryable_statuses
        )

    def check(self) -> None:
        """Raise CircuitOpen (with the first error's endpoint) when open."""
        with self._lock:
            reason, first = self._opened_reason, self._first
        if reason is not None:
            raise CircuitOpen(reason, endpoint=first.endpoint if first else "")

    def record_success(self) -> None:
        with self._lock:
            if self._opened_reason is None:
                self._shape, self._first, self._count = None, None, 0

    def record_failure(self, error: ModelError) -> None:
        with self._lock:
            if self._opened_reason is not None or isinstance(error, ContextOverflow):
                return
            if not self.permanent(error):
                self._shape, self._first, self._count = None, None, 0
                return
            shape = error_shape(error)
            if shape != self._shape:
                self._shape, self._first, self._count = shape, error, 0
            self._count += 1
            if self._count >= self.threshold:
                self._opened_reason = (
                    f"not sent: {self._count} identical errors in a row: {self._first}"
                )


class BreakerClient:
    """A ModelClient that asks a CircuitBreaker before each request and tells it how the
    request went. Wrap it around the retrying client (``BreakerClient(RetryingClient(c),
    breaker)``), so one task's retries count once. Errors raised by ``on_event`` (a
    cancelled stream) tell the breaker nothing."""

    def __init__(self, inner: ModelClient, breaker: CircuitBreaker) -> None:
        self.inner = inner
        self.spec = inner.spec
        self.breaker = breaker

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.inner!r})"

    def close(self) -> None:
        self.inner.close()

    def generate(self, request: ModelRequest, on_event: EventSink | None = None) -> Generation:
        self.breaker.check()
        try:
            generation = self.inner.generate(request, on_event)
        except ModelError as error:
            self.breaker.record_failure(error)
            raise
        self.breaker.record_success()
        return generation
