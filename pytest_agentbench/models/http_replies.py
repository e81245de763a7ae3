"""How a model's HTTP reply is judged before it is read: an error status, a timeout or a
broken connection into our error tree (with the provider's own message and Retry-After),
the reply's media type, whether it reads as a stream, and the partial contract every
client keeps on an error."""

from __future__ import annotations

import email.utils
import json
import time
from collections.abc import Mapping

from pytest_agentbench.core.durations import seconds_text
from pytest_agentbench.errors import (
    RATE_LIMIT_STATUSES,
    ModelError,
    ModelTimeout,
    ProviderError,
    RateLimited,
    TransportError,
)
from pytest_agentbench.models.base import Generation, ModelRequest, ModelSpec
from pytest_agentbench.models.connections import CONNECT_TIMEOUT_S
from pytest_agentbench.models.overflow import context_overflow, error_object, overflow_error
from pytest_agentbench.models.wire import (
    ConnectError,
    ConnectTimeout,
    Headers,
    ReadTimeout,
    Response,
    WireError,
    WireTimeout,
)

ERROR_BODY_LIMIT = 65536
DETAIL_LIMIT = 300


def retry_after_seconds(headers: Headers | Mapping[str, str]) -> float | None:
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


class ErrorMapping:
    """How every client turns HTTP failures into our error tree. Mixed into a client that
    has ``spec`` (its label names the model) and ``public_endpoint`` (no credentials);
    ``idle_timeout_s``, when the client has one, names the idle-timeout case."""

    spec: ModelSpec
    public_endpoint: str

    def _status_error(self, response: Response) -> ProviderError:
        """ProviderError (RateLimited for 429/529) with the provider's own message and
        ``retry_after`` from the response headers."""
        raw = bytearray()
        for chunk in response.iter_bytes():
            raw += chunk
            if len(raw) >= ERROR_BODY_LIMIT:
                break
        status = response.status_code
        text = raw.decode("utf-8", "replace")
        counts = context_overflow(error_object(text), text)
        if counts is not None:
            return overflow_error(
                self.spec.label, self.public_endpoint, status, counts, error_detail(text)
            )
        kind = RateLimited if status in RATE_LIMIT_STATUSES else ProviderError
        detail = error_detail(text)
        error = kind(
            f"{self.spec.label}: HTTP {status} from {self.public_endpoint}: {detail}",
            endpoint=self.public_endpoint,
            status=status,
            detail=detail,
        )
        error.retry_after = retry_after_seconds(response.headers)
        return error

    def _timeout_error(self, request: ModelRequest) -> ModelTimeout:
        return ModelTimeout(
            f"{self.spec.label}: no complete reply from {self.public_endpoint} within the "
            f"{seconds_text(request.timeout_s or 0)} s deadline",
            endpoint=self.public_endpoint,
        )

    def _transport_error(
        self, exc: WireError, request: ModelRequest, deadline: float | None, fired: bool
    ) -> ModelError:
        past_deadline = deadline is not None and time.monotonic() >= deadline - 0.001
        if fired or (isinstance(exc, WireTimeout) and past_deadline):
            return self._timeout_error(request)
        idle = getattr(self, "idle_timeout_s", None)
        if isinstance(exc, ReadTimeout) and idle is not None:
            return ModelTimeout(
                f"{self.spec.label}: no byte from {self.public_endpoint} for "
                f"{seconds_text(idle)} s (the idle timeout)",
                endpoint=self.public_endpoint,
            )
        if isinstance(exc, WireTimeout):
            what = "could not connect" if isinstance(exc, ConnectTimeout) else "timed out"
            return TransportError(
                f"{self.spec.label}: {what} to {self.public_endpoint} "
                f"within {CONNECT_TIMEOUT_S:g} s",
                endpoint=self.public_endpoint,
            )
        if isinstance(exc, ConnectError):
            what = f"cannot connect to {self.public_endpoint}"
        else:
            what = f"the connection to {self.public_endpoint} broke"
        detail = " ".join(str(exc).split()) or type(exc).__name__
        return TransportError(f"{self.spec.label}: {what}: {detail}", endpoint=self.public_endpoint)


def media_type(response: Response) -> str:
    """The response's media type, lower case, without parameters ("" when none)."""
    content_type = response.headers.get("content-type", "")
    return content_type.partition(";")[0].strip().lower()


def _is_json(media: str) -> bool:
    return media == "application/json" or media.endswith("+json")


_SSE_STARTS = (b"data:", b"event:", b"id:", b":")


def reads_as_stream(response: Response, asked: bool) -> bool:
    """Whether to read the reply as an SSE stream: a streamed request unless one JSON
    document came back; a non-streamed one only when the server sent SSE (said so, and
    the body, read whole, starts like it: a JSON body mislabelled as a stream stays a
    body)."""
    media = media_type(response)
    if asked:
        return not _is_json(media)
    if media != "text/event-stream":
        return False
    return response.read().lstrip().startswith(_SSE_STARTS)


class EmptyStream(TransportError):
    """A streamed reply (HTTP 200) that ended without one event: nothing arrived, not
    even the reason. ``ask_unstreamed`` (errors.py) is set where asking the same request
    again unstreamed can learn why (see ``ProtocolClient._may_overflow``)."""


def attach_partial(
    error: ModelError, partial: Generation | None, waited_s: float = 0.0
) -> ModelError:
    """Give ``error`` the contract every client keeps: ``partial`` (what arrived, or None),
    ``retry_after`` (None unless the server said) and ``waited_s`` (seconds its request
    waited in the server's queue: not the model's time)."""
    error.partial = partial
    error.waited_s = waited_s
    return error
