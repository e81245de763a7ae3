"""HTTP pieces every model client shares: deadlines, Retry-After, error messages, URLs."""

from __future__ import annotations

import contextlib
import email.utils
import heapq
import json
import socket
import threading
import time
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx

from pytest_agentbench.errors import (
    ModelError,
    ModelTimeout,
    ProviderError,
    RateLimited,
    TransportError,
)

CONNECT_TIMEOUT_S = 10.0
RATE_LIMIT_STATUSES = (429, 529)
ERROR_BODY_LIMIT = 65536
DETAIL_LIMIT = 300


def public_url(url: str) -> str:
    """The URL without user:password, fit for messages and artifacts."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))


def retry_after_seconds(headers: httpx.Headers) -> float | None:
    """Seconds the server asks us to wait (``retry-after-ms``, ``Retry-After`` as seconds or
    an HTTP date); None when it did not say."""
    millis = headers.get("retry-after-ms")
    if millis is not None:
        try:
            return max(float(millis) / 1000, 0.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(when.timestamp() - time.time(), 0.0)


def error_detail(text: str) -> str:
    """The provider's own error message when the body has one, else the body; one line."""
    detail = text
    try:
        body = json.loads(text)
    except ValueError:
        body = None
    if isinstance(body, Mapping):
        error = body.get("error")
        if isinstance(error, Mapping) and error.get("message"):
            detail = str(error["message"])
        elif isinstance(error, str):
            detail = error
        elif body.get("message"):
            detail = str(body["message"])
        elif body.get("detail"):
            detail = str(body["detail"])
    detail = " ".join(detail.split()) or "(empty body)"
    return detail if len(detail) <= DETAIL_LIMIT else detail[: DETAIL_LIMIT - 1] + "…"


class _DeadlineClock:
    """One daemon thread for every watchdog of the process: a heap of deadlines, so a
    request costs a heap push, not a thread of its own (at 64+ requests in flight, a
    timer thread per request cost more CPU than the request)."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, Watchdog]] = []
        self._wake = threading.Condition()
        self._count = 0
        self._thread: threading.Thread | None = None

    def add(self, deadline: float, watchdog: Watchdog) -> None:
        with self._wake:
            self._count += 1
            heapq.heappush(self._heap, (deadline, self._count, watchdog))
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="agentbench-deadlines", daemon=True
                )
                self._thread.start()
            self._wake.notify()

    def _run(self) -> None:
        while True:
            with self._wake:
                while not self._heap:
                    self._wake.wait()
                deadline, _, watchdog = self._heap[0]
                delay = deadline - time.monotonic()
                if delay > 0:
                    self._wake.wait(delay)
                    continue
                heapq.heappop(self._heap)
            watchdog.fire()


_CLOCK = _DeadlineClock()


class Watchdog:
    """Shuts the response's socket at the deadline, unblocking a read stuck in recv."""

    def __init__(self, deadline: float | None) -> None:
        self.deadline = deadline
        self.fired = False
        self._lock = threading.Lock()
        self._finished = False
        self._socket: socket.socket | None = None

    def arm(self, response: httpx.Response) -> None:
        stream = response.extensions.get("network_stream")
        sock = stream.get_extra_info("socket") if stream is not None else None
        if self.deadline is None or not isinstance(sock, socket.socket):
            return
        self._socket = sock
        _CLOCK.add(self.deadline, self)

    def fire(self) -> None:
        """Called at the deadline: shut the socket unless the request already finished."""
        with self._lock:
            if self._finished or self._socket is None:
                return
            self.fired = True
            with contextlib.suppress(OSError):
                self._socket.shutdown(socket.SHUT_RDWR)

    def finish(self) -> None:
        with self._lock:
            self._finished = True
            self._socket = None


def timeout_for(deadline: float | None) -> httpx.Timeout:
    """httpx timeouts for a request that must finish by ``deadline`` (monotonic)."""
    if deadline is None:
        return httpx.Timeout(None, connect=CONNECT_TIMEOUT_S)
    remaining = max(deadline - time.monotonic(), 0.001)
    return httpx.Timeout(remaining, connect=min(CONNECT_TIMEOUT_S, remaining))


class ErrorMapping:
    """How every client turns HTTP failures into our error tree. Mixed into a client that
    has ``spec`` (its label names the model) and ``public_endpoint`` (no credentials);
    ``idle_timeout_s``, when the client has one, names the idle-timeout case."""

    spec: Any
    public_endpoint: str

    def _status_error(self, response: httpx.Response) -> ProviderError:
        """ProviderError (RateLimited for 429/529) with the provider's own message and
        ``retry_after`` from the response headers."""
        raw = bytearray()
        for chunk in response.iter_bytes():
            raw += chunk
            if len(raw) >= ERROR_BODY_LIMIT:
                break
        status = response.status_code
        kind = RateLimited if status in RATE_LIMIT_STATUSES else ProviderError
        error = kind(
            f"{self.spec.label}: HTTP {status} from {self.public_endpoint}: "
            f"{error_detail(raw.decode('utf-8', 'replace'))}",
            endpoint=self.public_endpoint,
            status=status,
        )
        error.retry_after = retry_after_seconds(response.headers)  # type: ignore[attr-defined]
        return error

    def _timeout_error(self, request: Any) -> ModelTimeout:
        return ModelTimeout(
            f"{self.spec.label}: no complete reply from {self.public_endpoint} within the "
            f"{request.timeout_s:g} s deadline",
            endpoint=self.public_endpoint,
        )

    def _transport_error(
        self, exc: httpx.HTTPError, request: Any, deadline: float | None, fired: bool
    ) -> ModelError:
        past_deadline = deadline is not None and time.monotonic() >= deadline - 0.001
        if fired or (isinstance(exc, httpx.TimeoutException) and past_deadline):
            return self._timeout_error(request)
        idle = getattr(self, "idle_timeout_s", None)
        if isinstance(exc, httpx.ReadTimeout) and idle is not None:
            return ModelTimeout(
                f"{self.spec.label}: no byte from {self.public_endpoint} for "
                f"{idle:g} s (the idle timeout)",
                endpoint=self.public_endpoint,
            )
        if isinstance(exc, httpx.TimeoutException):
            what = "could not connect" if isinstance(exc, httpx.ConnectTimeout) else "timed out"
            return TransportError(
                f"{self.spec.label}: {what} to {self.public_endpoint} "
                f"within {CONNECT_TIMEOUT_S:g} s",
                endpoint=self.public_endpoint,
            )
        if isinstance(exc, httpx.ConnectError):
            what = f"cannot connect to {self.public_endpoint}"
        else:
            what = f"the connection to {self.public_endpoint} broke"
        detail = " ".join(str(exc).split()) or type(exc).__name__
        return TransportError(f"{self.spec.label}: {what}: {detail}", endpoint=self.public_endpoint)


def attach_partial(error: ModelError, partial: Any) -> ModelError:
    """Give ``error`` the contract every client keeps: ``partial`` (what arrived, or None)
    and ``retry_after`` (None unless the server said)."""
    error.partial = partial  # type: ignore[attr-defined]
    if not hasattr(error, "retry_after"):
        error.retry_after = None  # type: ignore[attr-defined]
    return error


def _ignore(event: Any) -> None:
    return None


class ProtocolClient(ErrorMapping):
    """The request life every protocol client shares: build the body, POST it, map the
    HTTP status, arm the deadline watchdog, read the stream or the body, and turn any
    failure into our error tree with what arrived kept as ``partial``. Exceptions raised by
    ``on_event`` propagate unchanged (that is how a caller cancels a stream).

    A subclass supplies ``endpoint``, ``_http``, ``build_body``, ``_new_received``,
    ``_read_stream``, ``_read_body``, ``_with_partial`` and ``_generation``."""

    endpoint: str
    _http: httpx.Client

    def _connect(
        self, spec: Any, endpoint: str, headers: Mapping[str, str], trust_env: bool
    ) -> None:
        """Set the endpoint and open the one keep-alive HTTP/1.1 client of this model."""
        self.spec = spec
        self.endpoint = endpoint
        self.public_endpoint = public_url(endpoint)
        self._http = httpx.Client(
            headers={"user-agent": "pytest-agentbench", **headers},
            http1=True,
            http2=False,
            trust_env=trust_env,
            limits=httpx.Limits(max_connections=512, max_keepalive_connections=128),
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.spec.label!r}, {self.public_endpoint!r})"

    def prepare(self, tasks: Any) -> None:
        """Nothing to prepare for a real provider."""

    def close(self) -> None:
        self._http.close()

    def _assemble(
        self,
        *,
        text: str,
        thinking: str,
        tool_calls: tuple[Any, ...],
        finish_reason: Any,
        usage: Any,
        native_usage: Any,
        native_finish: Mapping[str, Any],
        status: int | None,
        body: Mapping[str, Any],
        started: float,
        error: str | None,
    ) -> Any:
        """The Generation of a request, with its trajectory entry: the request body and
        the reply as received (``native_finish`` holds the protocol's own finish fields)."""
        from pytest_agentbench.models.base import Generation

        elapsed = time.monotonic() - started
        reply: dict[str, Any] = {
            "status": status,
            "text": text,
            "thinking": thinking,
            "tool_calls": [
                {"id": call.id, "name": call.name, "arguments": call.raw_arguments}
                for call in tool_calls
            ],
            **native_finish,
            "usage": native_usage,
        }
        if error is not None:
            reply["error"] = error
        return Generation(
            text=text,
            thinking=thinking,
            tool_calls=tool_calls,
            finish_reason=finish_reason,
            usage=usage,
            usage_native=native_usage,
            exchange={
                "request": {"url": self.public_endpoint, "body": body},
                "response": reply,
                "elapsed_s": round(elapsed, 3),
            },
            elapsed_s=elapsed,
        )

    def request_headers(self, request: Any) -> dict[str, str]:
        """Headers specific to one request (none here; the scripted clients add some)."""
        return {}

    def _timeouts(self, deadline: float | None) -> httpx.Timeout:
        return timeout_for(deadline)

    def generate(self, request: Any, on_event: Any = None) -> Any:
        """One request, no retries (RetryingClient adds them)."""
        body = self.build_body(request)  # type: ignore[attr-defined]
        started = time.monotonic()
        deadline = started + request.timeout_s if request.timeout_s is not None else None
        received = self._new_received()  # type: ignore[attr-defined]
        watchdog = Watchdog(deadline)
        emit = on_event or _ignore
        try:
            with self._http.stream(
                "POST",
                self.endpoint,
                json=body,
                headers=self.request_headers(request),
                timeout=self._timeouts(deadline),
            ) as response:
                received.status = response.status_code
                if response.status_code >= 400:
                    raise self._status_error(response)
                watchdog.arm(response)
                if request.stream:
                    self._read_stream(response, received, emit)  # type: ignore[attr-defined]
                else:
                    self._read_body(response, received, emit)  # type: ignore[attr-defined]
        except ModelError as exc:
            error = self._timeout_error(request) if watchdog.fired else exc
            raise self._with_partial(error, received, body, started) from None  # type: ignore[attr-defined]
        except httpx.HTTPError as exc:
            error = self._transport_error(exc, request, deadline, watchdog.fired)
            raise self._with_partial(error, received, body, started) from exc  # type: ignore[attr-defined]
        finally:
            watchdog.finish()
        return self._generation(received, body, started)  # type: ignore[attr-defined]
