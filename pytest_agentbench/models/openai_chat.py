"""OpenAI Chat Completions over httpx: hosted OpenAI and every compatible local server
(vLLM, llama.cpp, Ollama ``/v1``, LM Studio), streaming (SSE) and not.

One ``httpx.Client`` per model client keeps connections alive across requests. A
request's ``timeout_s`` is its total wall time: httpx timeouts bound connecting and the
wait for the first byte, and a watchdog closes the socket at the deadline so a stream
that stalls mid-way fails on time too.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx

from pytest_agentbench.errors import (
    ModelError,
    ModelTimeout,
    ProviderError,
    RateLimited,
    TransportError,
)
from pytest_agentbench.models.base import (
    EventSink,
    FinishReason,
    Generation,
    ModelRequest,
    ModelSpec,
    StreamEvent,
)
from pytest_agentbench.models.http import (
    CONNECT_TIMEOUT_S,
    ERROR_BODY_LIMIT,
    RATE_LIMIT_STATUSES,
    Watchdog,
    error_detail,
    public_url,
    retry_after_seconds,
    timeout_for,
)
from pytest_agentbench.models.sse import SSEEvent, SSEParser
from pytest_agentbench.models.usage import count, normalise_chat_usage, recovered_usage

_FINISH_REASONS: dict[str, FinishReason] = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "content_filter": "content_filter",
}


def map_finish_reason(native: Any) -> FinishReason | None:
    """The provider's finish reason in the closed set; None when none was reported."""
    if not native:
        return None
    return _FINISH_REASONS.get(str(native), "other")


@dataclass
class _Received:
    """What has arrived so far for one request (kept for the partial on failure)."""

    status: int | None = None
    text: list[str] = field(default_factory=list)
    thinking: list[str] = field(default_factory=list)
    finish: str | None = None
    usage: dict[str, Any] | None = None
    done: bool = False

    @property
    def anything(self) -> bool:
        return bool(self.text or self.thinking or self.usage or self.finish)


class OpenAIChatClient:
    """A ModelClient for ``POST {base_url}/chat/completions``.

    ``generate`` raises ProviderError (RateLimited for 429/529; ``retry_after`` holds the
    server's Retry-After in seconds or None), TransportError, or ModelTimeout; each carries
    ``partial``: a Generation of what arrived before the failure, or None. The API key is
    sent as ``Authorization: Bearer`` and appears nowhere else.
    """

    def __init__(
        self,
        spec: ModelSpec,
        base_url: str,
        api_key: str | None = None,
        *,
        extra_headers: Mapping[str, str] | None = None,
        trust_env: bool = True,
    ) -> None:
        self.spec = spec
        self.base_url = base_url.rstrip("/")
        self.endpoint = f"{self.base_url}/chat/completions"
        self.public_endpoint = public_url(self.endpoint)
        headers = {"user-agent": "pytest-agentbench", **(extra_headers or {})}
        if api_key:
            headers["authorization"] = f"Bearer {api_key}"
        self._http = httpx.Client(
            headers=headers,
            http1=True,
            http2=False,
            trust_env=trust_env,
            limits=httpx.Limits(max_connections=512, max_keepalive_connections=128),
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.spec.label!r}, {self.public_endpoint!r})"

    def prepare(self, tasks: Iterable[Any]) -> None:
        """Nothing to prepare for a real provider."""

    def close(self) -> None:
        self._http.close()

    def build_body(self, request: ModelRequest) -> dict[str, Any]:
        """The Chat Completions request body for ``request``."""
        messages: list[dict[str, Any]] = []
        if request.system:
            messages.append({"role": "system", "content": request.system})
        messages.extend(dict(message) for message in request.messages)
        body: dict[str, Any] = {"model": self.spec.model, "messages": messages}
        if request.max_tokens is not None:
            body["max_tokens"] = request.max_tokens
        body["stream"] = request.stream
        if request.stream:
            body["stream_options"] = {"include_usage": True}
        return body

    def request_headers(self, request: ModelRequest) -> dict[str, str]:
        """Headers specific to one request (none here; the scripted client adds some)."""
        return {}

    def generate(self, request: ModelRequest, on_event: EventSink | None = None) -> Generation:
        return self._attempt(request, on_event)

    def _attempt(self, request: ModelRequest, on_event: EventSink | None) -> Generation:
        """One request, no retries. Exceptions raised by ``on_event`` propagate unchanged
        (that is how a caller cancels a stream)."""
        body = self.build_body(request)
        started = time.monotonic()
        deadline = started + request.timeout_s if request.timeout_s is not None else None
        received = _Received()
        watchdog = Watchdog(deadline)
        emit = on_event or (lambda event: None)
        try:
            with self._http.stream(
                "POST",
                self.endpoint,
                json=body,
                headers=self.request_headers(request),
                timeout=timeout_for(deadline),
            ) as response:
                received.status = response.status_code
                if response.status_code >= 400:
                    raise self._status_error(response)
                watchdog.arm(response)
                if request.stream:
                    self._read_stream(response, received, emit)
                else:
                    self._read_json(response, received, emit)
        except ModelError as exc:
            error = self._timeout_error(request) if watchdog.fired else exc
            raise self._with_partial(error, received, body, started) from None
        except httpx.HTTPError as exc:
            error = self._transport_error(exc, request, deadline, watchdog.fired)
            raise self._with_partial(error, received, body, started) from exc
        finally:
            watchdog.finish()
        return self._generation(received, body, started)

    def _read_stream(self, response: httpx.Response, received: _Received, emit: EventSink) -> None:
        parser = SSEParser()
        for chunk in response.iter_bytes():
            for event in parser.feed(chunk):
                if not received.done:
                    self._on_stream_event(event, received, emit)
        if not received.done and received.finish is None:
            raise TransportError(
                f"{self.spec.label}: the stream from {self.public_endpoint} ended before "
                "its finish (no finish_reason, no [DONE])",
                endpoint=self.public_endpoint,
                status=received.status,
            )

    def _on_stream_event(self, event: SSEEvent, received: _Received, emit: EventSink) -> None:
        data = event.data.strip()
        if data == "[DONE]":
            received.done = True
            return
        chunk = self._decode(data, "stream event")
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            received.usage = usage
            emit(StreamEvent("usage", data=usage))
        choices = chunk.get("choices")
        choice = choices[0] if isinstance(choices, list) and choices else None
        if not isinstance(choice, Mapping):
            return
        delta = choice.get("delta")
        if isinstance(delta, Mapping):
            self._take_message(delta, received, emit)
        if choice.get("finish_reason"):
            self._take_finish(choice["finish_reason"], received, emit)

    def _read_json(self, response: httpx.Response, received: _Received, emit: EventSink) -> None:
        """A non-streamed completion; its parts are emitted once each, like a stream would."""
        completion = self._decode(response.read().decode("utf-8", "replace"), "response")
        choices = completion.get("choices")
        choice = choices[0] if isinstance(choices, list) and choices else None
        choice = choice if isinstance(choice, Mapping) else {}
        message = choice.get("message")
        if isinstance(message, Mapping):
            self._take_message(message, received, emit)
        usage = completion.get("usage")
        if isinstance(usage, dict):
            received.usage = usage
            emit(StreamEvent("usage", data=usage))
        if choice.get("finish_reason"):
            self._take_finish(choice["finish_reason"], received, emit)
        received.done = True

    @staticmethod
    def _take_message(message: Mapping[str, Any], received: _Received, emit: EventSink) -> None:
        """Thinking (``reasoning_content``, or ``reasoning`` as vLLM/Ollama name it), text."""
        thinking = message.get("reasoning_content") or message.get("reasoning")
        if isinstance(thinking, str) and thinking:
            received.thinking.append(thinking)
            emit(StreamEvent("thinking", thinking))
        content = message.get("content")
        if isinstance(content, str) and content:
            received.text.append(content)
            emit(StreamEvent("text", content))

    @staticmethod
    def _take_finish(native: Any, received: _Received, emit: EventSink) -> None:
        received.finish = str(native)
        emit(StreamEvent("finish", data={"finish_reason": map_finish_reason(received.finish)}))

    def _decode(self, data: str, what: str) -> dict[str, Any]:
        """Parse one JSON object from the provider; an ``error`` object becomes an error."""
        try:
            obj = json.loads(data)
        except ValueError:
            obj = None
        if not isinstance(obj, dict):
            raise TransportError(
                f"{self.spec.label}: malformed {what} from {self.public_endpoint}: "
                f"{error_detail(data)}",
                endpoint=self.public_endpoint,
            )
        error = obj.get("error")
        if error:
            code = count(error.get("code")) if isinstance(error, Mapping) else None
            kind = RateLimited if code in RATE_LIMIT_STATUSES else ProviderError
            raise kind(
                f"{self.spec.label}: error in the {what} from {self.public_endpoint}: "
                f"{error_detail(data)}",
                endpoint=self.public_endpoint,
                status=code,
            )
        return obj

    def _status_error(self, response: httpx.Response) -> ProviderError:
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

    def _timeout_error(self, request: ModelRequest) -> ModelTimeout:
        return ModelTimeout(
            f"{self.spec.label}: no complete reply from {self.public_endpoint} within the "
            f"{request.timeout_s:g} s deadline",
            endpoint=self.public_endpoint,
        )

    def _transport_error(
        self, exc: httpx.HTTPError, request: ModelRequest, deadline: float | None, fired: bool
    ) -> ModelError:
        past_deadline = deadline is not None and time.monotonic() >= deadline - 0.001
        if fired or (isinstance(exc, httpx.TimeoutException) and past_deadline):
            return self._timeout_error(request)
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

    def _with_partial(
        self, error: ModelError, received: _Received, body: dict[str, Any], started: float
    ) -> ModelError:
        partial = None
        if received.anything:
            partial = self._generation(received, body, started, error=str(error))
        error.partial = partial  # type: ignore[attr-defined]
        if not hasattr(error, "retry_after"):
            error.retry_after = None  # type: ignore[attr-defined]
        return error

    def _generation(
        self,
        received: _Received,
        body: dict[str, Any],
        started: float,
        error: str | None = None,
    ) -> Generation:
        text = "".join(received.text)
        thinking = "".join(received.thinking)
        if received.usage is not None:
            usage = normalise_chat_usage(received.usage)
        else:
            usage = recovered_usage(text, thinking)
        elapsed = time.monotonic() - started
        reply: dict[str, Any] = {
            "status": received.status,
            "text": text,
            "thinking": thinking,
            "finish_reason": received.finish,
            "usage": received.usage,
        }
        if error is not None:
            reply["error"] = error
        return Generation(
            text=text,
            thinking=thinking,
            finish_reason=map_finish_reason(received.finish),
            usage=usage,
            usage_native=received.usage,
            exchange={
                "request": {"url": self.public_endpoint, "body": body},
                "response": reply,
                "elapsed_s": round(elapsed, 3),
            },
            elapsed_s=elapsed,
        )
