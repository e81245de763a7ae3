"""OpenAI Chat Completions: hosted OpenAI and every compatible local server (vLLM,
llama.cpp, Ollama ``/v1``, LM Studio), streaming (SSE) and not.

Keep-alive connections per thread carry the requests (models/connections.py). A
request's ``timeout_s`` is its total wall time: its timeouts bound connecting and the
wait for the first byte, and a watchdog closes the socket at the deadline so a stream
that stalls mid-way fails on time too. Inline ``<think>…</think>`` at the start of the
content (local reasoning models) is split into the thinking channel.
"""

from __future__ import annotations

from collections.abc import Mapping

from pytest_agentbench.core.jsontypes import JsonObject, JsonValue
from pytest_agentbench.core.stream import EventSink, StreamEvent
from pytest_agentbench.errors import (
    RATE_LIMIT_STATUSES,
    ProviderError,
    RateLimited,
)
from pytest_agentbench.models.base import FinishReason, ModelRequest, ModelSpec, ToolCall
from pytest_agentbench.models.chat_format import (
    ChatReceived,
    chat_messages,
    chat_tools,
    map_finish_reason,
)
from pytest_agentbench.models.connections import timeout_for
from pytest_agentbench.models.http import ProtocolClient
from pytest_agentbench.models.http_replies import error_detail
from pytest_agentbench.models.overflow import context_overflow, overflow_error
from pytest_agentbench.models.sampling_wire import apply_sampling
from pytest_agentbench.models.think import ThinkSplitter
from pytest_agentbench.models.usage import count, normalise_chat_usage
from pytest_agentbench.models.wire import Response, Timeout


class OpenAIChatClient(ProtocolClient[ChatReceived]):
    """A ModelClient for ``POST {base_url}/chat/completions``.

    ``generate`` raises ProviderError (RateLimited for 429/529; ``retry_after`` holds the
    server's Retry-After in seconds or None), TransportError, or ModelTimeout; each carries
    ``partial``: a Generation of what arrived before the failure, or None. The API key is
    sent as ``Authorization: Bearer`` and appears nowhere else. ``split_think=False``
    keeps inline ``<think>`` blocks in the answer text. ``idle_timeout_s`` fails a request
    (ModelTimeout) when no byte arrives for that long, the first byte included.
    """

    def __init__(
        self,
        spec: ModelSpec,
        base_url: str,
        api_key: str | None = None,
        *,
        extra_headers: Mapping[str, str] | None = None,
        trust_env: bool = True,
        split_think: bool = True,
        idle_timeout_s: float | None = None,
    ) -> None:
        self.split_think = split_think
        self.idle_timeout_s = idle_timeout_s
        self.base_url = base_url.rstrip("/")
        headers = dict(extra_headers or {})
        if api_key:
            headers["authorization"] = f"Bearer {api_key}"
        self._connect(spec, f"{self.base_url}/chat/completions", headers, trust_env)

    def build_body(self, request: ModelRequest) -> JsonObject:
        """The Chat Completions request body for ``request``."""
        messages: list[JsonValue] = []
        if request.system:
            messages.append({"role": "system", "content": request.system})
        messages.extend(chat_messages(request.messages))
        body: JsonObject = {"model": self.spec.model, "messages": messages}
        if request.tools:
            body["tools"] = chat_tools(request.tools)
        if request.max_tokens is not None:
            body["max_tokens"] = request.max_tokens
        if request.response_schema is not None:
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {
                    "name": "reply",
                    "schema": dict(request.response_schema),
                    "strict": True,
                },
            }
        body["stream"] = request.stream
        if request.stream:
            body["stream_options"] = {"include_usage": True}
        return apply_sampling("chat", body, request.sampling)

    def _new_received(self) -> ChatReceived:
        return ChatReceived(ThinkSplitter() if self.split_think else None)

    STREAM_FINISH = "no finish_reason, no [DONE]"

    def _stream_ended(self, received: ChatReceived, emit: EventSink) -> None:
        received.flush(emit)

    def _stream_finished(self, received: ChatReceived) -> bool:
        return received.done or received.finish is not None

    def _on_stream_event(
        self, event_type: str, data: str, received: ChatReceived, emit: EventSink
    ) -> None:
        """One event's data: a ``chat.completion.chunk`` (JSON-decoded, so objects are
        dicts) or ``[DONE]``."""
        data = data.strip()
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
        if not isinstance(choice, dict):
            return
        delta = choice.get("delta")
        finish = choice.get("finish_reason")
        if isinstance(delta, dict):
            received.take_message(delta, emit)
            if usage is None and not finish:
                received.learn_slot(data, chunk, delta)
        if finish:
            self._take_finish(finish, received, emit)

    def _read_body(self, response: Response, received: ChatReceived, emit: EventSink) -> None:
        """A non-streamed completion; its parts are emitted once each, like a stream would."""
        completion = self._decode(response.read().decode("utf-8", "replace"), "response")
        choices = completion.get("choices")
        choice = choices[0] if isinstance(choices, list) and choices else None
        choice = choice if isinstance(choice, Mapping) else {}
        message = choice.get("message")
        if isinstance(message, Mapping):
            received.take_message(message, emit)
        received.flush(emit)
        usage = completion.get("usage")
        if isinstance(usage, dict):
            received.usage = usage
            emit(StreamEvent("usage", data=usage))
        if choice.get("finish_reason"):
            self._take_finish(choice["finish_reason"], received, emit)
        received.done = True

    @staticmethod
    def _take_finish(native: JsonValue, received: ChatReceived, emit: EventSink) -> None:
        received.flush(emit)
        received.finish = str(native)
        emit(StreamEvent("finish", data={"finish_reason": map_finish_reason(received.finish)}))

    def _decode(self, data: str, what: str) -> JsonObject:
        """Parse one JSON object from the provider; an ``error`` object becomes an error."""
        obj = self._json_object(data, what)
        error = obj.get("error")
        if error:
            code = count(error.get("code")) if isinstance(error, Mapping) else None
            overflow = context_overflow(error, data)
            if overflow is not None:
                raise overflow_error(
                    self.spec.label, self.public_endpoint, code, overflow, error_detail(data)
                )
            kind = RateLimited if code in RATE_LIMIT_STATUSES else ProviderError
            raise kind(
                f"{self.spec.label}: error in the {what} from {self.public_endpoint}: "
                f"{error_detail(data)}",
                endpoint=self.public_endpoint,
                status=code,
            )
        return obj

    def _timeouts(self, deadline: float | None) -> Timeout:
        timeout = timeout_for(deadline)
        idle = self.idle_timeout_s
        if idle is None or (timeout.read is not None and timeout.read <= idle):
            return timeout
        return Timeout(timeout.connect, idle, timeout.write, timeout.pool)

    @staticmethod
    def _settle(received: ChatReceived) -> None:
        """Text held back by the think splitter belongs to the partial reply too."""
        received.flush(lambda event: None)

    def _tool_calls(self, received: ChatReceived) -> tuple[ToolCall, ...]:
        return received.tool_calls()

    def _finish_reason(
        self, received: ChatReceived, tool_calls: tuple[ToolCall, ...]
    ) -> FinishReason | None:
        return map_finish_reason(received.finish)

    def _native_finish(self, received: ChatReceived, finish: FinishReason | None) -> JsonObject:
        return {"finish_reason": received.finish}

    _normalise_usage = staticmethod(normalise_chat_usage)
