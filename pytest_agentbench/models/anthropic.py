"""Anthropic Messages (``POST /v1/messages``), streaming (named SSE events) and not,
with thinking blocks and tool use.

Same contract as the Chat Completions client: keep-alive connections
(models/connections.py); a request's ``timeout_s`` is its total wall time, enforced by
the request's timeouts up to the first byte and by a watchdog after it; every raised
ModelError carries ``partial`` and ``retry_after``.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import field

from pytest_agentbench.core.fastclass import dataclass
from pytest_agentbench.core.jsontypes import JsonObject, JsonValue
from pytest_agentbench.core.stream import EventSink, StreamEvent
from pytest_agentbench.errors import (
    RATE_LIMIT_STATUSES,
    ProviderError,
    RateLimited,
)
from pytest_agentbench.models.anthropic_format import anthropic_messages
from pytest_agentbench.models.base import (
    FinishReason,
    ModelRequest,
    ModelSpec,
    ToolCall,
    Usage,
)
from pytest_agentbench.models.event_json import StringSlot
from pytest_agentbench.models.http import ProtocolClient, ignore_events
from pytest_agentbench.models.http_replies import error_detail
from pytest_agentbench.models.sampling_wire import apply_sampling
from pytest_agentbench.models.think import Channel
from pytest_agentbench.models.usage import normalise_anthropic_usage, recovered_usage
from pytest_agentbench.models.wire import Response

DEFAULT_BASE_URL = "https://api.anthropic.com"
#: ``max_tokens`` is required by the API; this is sent when the request sets none.
DEFAULT_MAX_TOKENS = 4096
ANTHROPIC_VERSION = "2023-06-01"

_STOP_REASONS: dict[str, FinishReason] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "tool_use": "tool_calls",
    "refusal": "content_filter",
}

#: The status an error type stands for, for an ``error`` event inside a 200 stream.
_ERROR_STATUSES = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "overloaded_error": 529,
}


#: The fields of an event the client reads (the others may vary freely).
_SLOT_READS = ("type", "index", "delta", "error")


def map_stop_reason(native: JsonValue) -> FinishReason | None:
    """Anthropic's stop reason in the closed set; None when none was reported."""
    if not native:
        return None
    return _STOP_REASONS.get(str(native), "other")


@dataclass
class _ToolBlock:
    """A tool_use block: ``input`` as the block carried it (whole when not streamed, ``{}``
    at a streamed start), ``parts`` the streamed input_json_delta pieces."""

    position: int
    id: str
    name: str
    input: JsonValue = None
    parts: list[str] = field(default_factory=list)

    @property
    def raw(self) -> str:
        if self.parts or self.input is None:
            return "".join(self.parts)
        if isinstance(self.input, str):
            return self.input
        return json.dumps(self.input, ensure_ascii=False)

    def call(self) -> ToolCall:
        """The ToolCall; arguments None unless the input is a JSON object (a string
        ``input`` is malformed even when it holds JSON: the API sends an object)."""
        value = self.input
        if self.parts:
            try:
                value = json.loads(self.raw)
            except ValueError:
                value = None
        arguments = value if isinstance(value, dict) else None
        return ToolCall(self.id, self.name, arguments, self.raw)


@dataclass
class _Received:
    """What has arrived so far for one request (kept for the partial on failure).
    ``usage`` is message_start's usage updated by message_delta's (``final`` once it is)."""

    status: int | None = None
    text: list[str] = field(default_factory=list)
    thinking: list[str] = field(default_factory=list)
    tools: dict[int, _ToolBlock] = field(default_factory=dict)
    #: thinking / redacted_thinking blocks by index; a thinking block's text is in parts
    reasoning: dict[int, JsonObject] = field(default_factory=dict)
    reasoning_parts: dict[int, list[str]] = field(default_factory=dict)
    thinking_at: int | None = None
    stop_reason: str | None = None
    usage: JsonObject | None = None
    final: bool = False
    done: bool = False
    #: The stream's repeating text or thinking delta once learned, and its channel.
    slot: StringSlot | None = None
    slot_channel: Channel = "text"
    slot_tries: int = 0
    slot_previous: JsonObject | None = None

    @property
    def anything(self) -> bool:
        return bool(self.text or self.thinking or self.tools or self.usage or self.stop_reason)

    def tool_calls(self) -> tuple[ToolCall, ...]:
        return tuple(block.call() for block in self.tools.values())

    def reasoning_blocks(self) -> tuple[JsonObject, ...]:
        """The thinking and redacted_thinking blocks as the API sent them, in order."""
        blocks = []
        for index in sorted(self.reasoning):
            block = dict(self.reasoning[index])
            if block.get("type") == "thinking":
                block["thinking"] = "".join(self.reasoning_parts.get(index, ()))
            blocks.append(block)
        return tuple(blocks)

    def take_slot(self, piece: str, emit: EventSink) -> None:
        """The text of a delta that matched the slot: what its handling does."""
        if piece:
            channel = self.slot_channel
            (self.text if channel == "text" else self.thinking).append(piece)
            if channel == "thinking" and self.thinking_at in self.reasoning_parts:
                self.reasoning_parts[self.thinking_at].append(piece)
            if emit is not ignore_events:
                emit(StreamEvent(channel, piece))


class AnthropicClient(ProtocolClient[_Received]):
    """A ModelClient for ``POST {base_url}/v1/messages`` (``base_url`` like
    ``https://api.anthropic.com``; one ending in ``/v1`` works too).

    ``generate`` raises ProviderError (RateLimited for 429/529 and an ``overloaded_error``
    or ``rate_limit_error`` event mid-stream), TransportError, or ModelTimeout. The API key
    is sent as ``x-api-key`` and appears nowhere else.
    """

    def __init__(
        self,
        spec: ModelSpec,
        base_url: str,
        api_key: str | None = None,
        *,
        extra_headers: Mapping[str, str] | None = None,
        trust_env: bool = True,
        anthropic_version: str = ANTHROPIC_VERSION,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        headers = {"anthropic-version": anthropic_version}
        headers.update(extra_headers or {})
        if api_key:
            headers["x-api-key"] = api_key
        self._connect(spec, f"{self.base_url.removesuffix('/v1')}/v1/messages", headers, trust_env)

    def build_body(self, request: ModelRequest) -> JsonObject:
        """The Messages request body for ``request`` (tools without a description omit it).
        With a thinking budget and no max_tokens, the default limit leaves room for it (the
        API wants max_tokens above the budget)."""
        limit = request.max_tokens
        if limit is None:
            limit = DEFAULT_MAX_TOKENS + (request.sampling.thinking_budget or 0)
        body: JsonObject = {"model": self.spec.model, "max_tokens": limit}
        if request.system:
            body["system"] = request.system
        body["messages"] = anthropic_messages(request.messages)
        if request.tools:
            body["tools"] = [
                {
                    "name": tool.name,
                    **({"description": tool.description} if tool.description else {}),
                    "input_schema": dict(tool.parameters),
                }
                for tool in request.tools
            ]
        body["stream"] = request.stream
        return apply_sampling("anthropic", body, request.sampling)

    def _new_received(self) -> _Received:
        return _Received()

    STREAM_FINISH = "no message_delta stop_reason, no message_stop"

    def _stream_finished(self, received: _Received) -> bool:
        return received.done or received.stop_reason is not None

    def _on_stream_event(
        self, event_type: str, text: str, received: _Received, emit: EventSink
    ) -> None:
        """One event: its type and data (a JSON object once decoded, so objects are dicts)."""
        data = self._decode(text, f"{event_type} event")
        kind = data.get("type", event_type)
        index = data.get("index")
        if kind == "content_block_delta":
            delta = data.get("delta")
            if isinstance(delta, dict) and isinstance(index, int):
                self._take_delta(index, delta, received, emit)
                if received.slot_tries < StringSlot.TRIES:
                    self._learn_slot(text, data, delta, received)
        elif kind == "message_start":
            message = data.get("message")
            usage = message.get("usage") if isinstance(message, dict) else None
            if isinstance(usage, dict):
                received.usage = dict(usage)
                emit(StreamEvent("usage", data=dict(received.usage)))
        elif kind == "content_block_start":
            block = data.get("content_block")
            if isinstance(block, dict) and isinstance(index, int):
                self._take_block(index, block, received, emit)
        elif kind == "message_delta":
            usage = data.get("usage")
            if isinstance(usage, dict):
                received.usage = {**(received.usage or {}), **usage}
                received.final = True
                emit(StreamEvent("usage", data=dict(received.usage)))
            delta = data.get("delta")
            if isinstance(delta, dict) and delta.get("stop_reason"):
                self._take_stop(delta["stop_reason"], received, emit)
        elif kind == "message_stop":
            received.done = True

    def _read_body(self, response: Response, received: _Received, emit: EventSink) -> None:
        """A non-streamed message; its parts are emitted once each, like a stream would."""
        message = self._decode(response.read().decode("utf-8", "replace"), "response")
        content = message.get("content")
        for index, block in enumerate(content if isinstance(content, list) else ()):
            if isinstance(block, Mapping):
                self._take_block(index, block, received, emit)
        usage = message.get("usage")
        if isinstance(usage, Mapping):
            received.usage = dict(usage)
            received.final = True
            emit(StreamEvent("usage", data=dict(received.usage)))
        if message.get("stop_reason"):
            self._take_stop(message["stop_reason"], received, emit)
        received.done = True

    def _take_block(
        self, index: int, block: JsonObject, received: _Received, emit: EventSink
    ) -> None:
        """A content block as it starts (streamed) or whole (not streamed)."""
        kind = block.get("type")
        if kind == "thinking":
            signature = block.get("signature")
            received.reasoning[index] = {
                "type": "thinking",
                "thinking": "",
                "signature": signature if isinstance(signature, str) else "",
            }
            received.reasoning_parts[index] = []
        elif kind == "redacted_thinking":
            received.reasoning[index] = dict(block)
        if kind in ("text", "thinking"):
            self._take_delta(index, {"type": kind, kind: block.get(kind)}, received, emit)
        elif kind == "tool_use":
            position = len(received.tools)
            tool = _ToolBlock(position, str(block.get("id", "")), str(block.get("name", "")))
            tool.input = block.get("input")
            received.tools[index] = tool
            raw = "" if tool.input == {} else tool.raw
            data = {"index": position, "id": tool.id, "name": tool.name, "arguments_delta": raw}
            emit(StreamEvent("tool_call", data=data))

    def _take_delta(
        self, index: int, delta: JsonObject, received: _Received, emit: EventSink
    ) -> None:
        kind = delta.get("type")
        if kind == "text_delta" or kind == "text":
            text = delta.get("text")
            if isinstance(text, str) and text:
                received.text.append(text)
                if emit is not ignore_events:
                    emit(StreamEvent("text", text))
        elif kind == "thinking_delta" or kind == "thinking":
            thinking = delta.get("thinking")
            if isinstance(thinking, str) and thinking:
                received.thinking.append(thinking)
                received.thinking_at = index
                received.reasoning_parts.setdefault(index, []).append(thinking)
                if emit is not ignore_events:
                    emit(StreamEvent("thinking", thinking))
        elif kind == "signature_delta" and index in received.reasoning:
            signature = delta.get("signature")
            if isinstance(signature, str):
                block = received.reasoning[index]
                before = block.get("signature", "")
                block["signature"] = (before if isinstance(before, str) else "") + signature
        elif kind == "input_json_delta" and index in received.tools:
            piece = delta.get("partial_json")
            if isinstance(piece, str) and piece:
                tool = received.tools[index]
                tool.parts.append(piece)
                if emit is not ignore_events:
                    data = {"index": tool.position, "id": tool.id, "name": tool.name}
                    emit(StreamEvent("tool_call", data={**data, "arguments_delta": piece}))

    @staticmethod
    def _learn_slot(text: str, data: JsonObject, delta: JsonObject, received: _Received) -> None:
        """After a text or thinking delta (decoded from ``text``): learn where its text
        sits, so the next deltas that differ only there skip decoding."""
        kind = delta.get("type")
        key: Channel
        if kind == "text_delta" or kind == "text":
            key = "text"
        elif kind == "thinking_delta" or kind == "thinking":
            key = "thinking"
        else:
            return
        if not isinstance(delta.get(key), str) or not delta[key] or "type" not in data:
            return  # (without its own type, the event's SSE type would decide its kind)
        previous, received.slot_previous = received.slot_previous, data
        if previous is None:  # from the second delta on: a short reply never pays for it
            return
        received.slot_tries += 1
        received.slot = StringSlot.learn(text, data, ("delta",), key, previous, _SLOT_READS)
        received.slot_channel = key

    def _take_stop(self, native: JsonValue, received: _Received, emit: EventSink) -> None:
        received.stop_reason = str(native)
        emit(StreamEvent("finish", data={"finish_reason": map_stop_reason(native)}))

    def _decode(self, data: str, what: str) -> JsonObject:
        """Parse one JSON object from the provider; an ``error`` object becomes an error."""
        obj = self._json_object(data, what)
        if obj.get("type") == "error" or "error" in obj:
            error = obj.get("error")
            error_type = error.get("type") if isinstance(error, dict) else None
            status = _ERROR_STATUSES.get(str(error_type))
            kind = RateLimited if status in RATE_LIMIT_STATUSES else ProviderError
            raise kind(
                f"{self.spec.label}: {error_type or 'error'} in the {what} from "
                f"{self.public_endpoint}: {error_detail(data)}",
                endpoint=self.public_endpoint,
                status=status,
            )
        return obj

    def _usage(self, received: _Received, text: str, thinking: str) -> Usage:
        """Before message_delta, ``output_tokens`` is only message_start's placeholder, so
        output is counted from the text and flagged."""
        usage = normalise_anthropic_usage(received.usage)
        if not received.final:
            counted = recovered_usage(text, thinking)
            parts = (usage.input, usage.cache_read, usage.cache_write, counted.output)
            total = sum(p for p in parts if p is not None) if None not in parts else None
            usage = dataclasses.replace(usage, output=counted.output, total=total, recovered=True)
        return usage

    def _tool_calls(self, received: _Received) -> tuple[ToolCall, ...]:
        return received.tool_calls()

    def _finish_reason(
        self, received: _Received, tool_calls: tuple[ToolCall, ...]
    ) -> FinishReason | None:
        return map_stop_reason(received.stop_reason)

    def _native_finish(self, received: _Received, finish: FinishReason | None) -> JsonObject:
        return {"stop_reason": received.stop_reason}

    def _reasoning_blocks(self, received: _Received) -> tuple[JsonObject, ...]:
        return received.reasoning_blocks()
