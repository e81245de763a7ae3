"""OpenAI Responses (``POST {base_url}/responses``), streaming (typed SSE events) and not.

Same contract as the Chat Completions client: keep-alive connections
(models/connections.py), ``timeout_s`` as the request's total wall time enforced by a
watchdog, and every failure a ModelError carrying ``partial`` and ``retry_after``.
Thinking is the reasoning summary (or raw reasoning text, as some compatible servers
send it); the model returns summaries only when asked to, so a plain request to a hosted
reasoning model may think without saying.
Requests are sent with ``store: false``: a benchmark keeps no state on the provider.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import field

from pytest_agentbench.core.fastclass import dataclass
from pytest_agentbench.core.jsontypes import JsonObject, JsonValue
from pytest_agentbench.core.stream import EventSink, StreamEvent
from pytest_agentbench.errors import (
    ProviderError,
    RateLimited,
)
from pytest_agentbench.models.base import (
    FinishReason,
    ModelRequest,
    ModelSpec,
    ToolCall,
)
from pytest_agentbench.models.event_json import StringSlot
from pytest_agentbench.models.http import (
    ProtocolClient,
    ignore_events,
)
from pytest_agentbench.models.overflow import context_overflow, overflow_error
from pytest_agentbench.models.sampling_wire import apply_sampling
from pytest_agentbench.models.usage import normalise_responses_usage
from pytest_agentbench.models.wire import Response

_INCOMPLETE: dict[str, FinishReason] = {
    "max_output_tokens": "length",
    "content_filter": "content_filter",
}
_THINKING_DELTAS = ("response.reasoning_summary_text.delta", "response.reasoning_text.delta")
_FINAL_EVENTS = ("response.completed", "response.incomplete")
_RATE_LIMIT_CODES = ("rate_limit_exceeded", "rate_limit_error", "overloaded_error")
#: The fields of a delta event the client reads (the others may vary freely).
_SLOT_READS = ("type", "error", "delta", "item_id", "summary_index", "content_index")


def map_finish_reason(
    status: str | None, incomplete_reason: str | None, has_tool_calls: bool
) -> FinishReason | None:
    """A response's ``status`` (and ``incomplete_details.reason``) in the closed set; None
    when the response never finished."""
    if status is None:
        return None
    if status == "completed":
        return "tool_calls" if has_tool_calls else "stop"
    if status == "incomplete":
        return _INCOMPLETE.get(incomplete_reason or "", "other")
    return "other"


#: Which thinking part a delta belongs to: the item id and the summary (or content) index
#: as the event gave them (a new part starts a new paragraph).
_Part = tuple[JsonValue, JsonValue]


@dataclass
class _Call:
    """One function call as it arrives: ``call_id`` and name first, arguments in pieces."""

    index: int
    call_id: str
    name: str
    arguments: list[str] = field(default_factory=list)


@dataclass
class _Received:
    """What has arrived so far for one request (kept for the partial on failure)."""

    status: int | None = None
    text: list[str] = field(default_factory=list)
    thinking: list[str] = field(default_factory=list)
    calls: dict[JsonValue, _Call] = field(default_factory=dict)
    thinking_part: _Part | None = None
    response_status: str | None = None
    incomplete_reason: str | None = None
    usage: JsonObject | None = None
    done: bool = False  # the final response arrived: later events are ignored
    #: The stream's repeating text or thinking delta once learned: its slot, channel and
    #: thinking part.
    slot: StringSlot | None = None
    slot_channel: str = "text"
    slot_part: _Part | None = None
    slot_tries: int = 0
    slot_previous: JsonObject | None = None

    @property
    def anything(self) -> bool:
        return bool(self.text or self.thinking or self.calls or self.usage)

    def learn_slot(self, text: str, data: JsonObject, channel: str, part: _Part | None) -> None:
        """After a text or thinking delta (decoded from ``text``): learn where its delta
        sits, so the next deltas that differ only there skip decoding."""
        delta = data.get("delta")
        if self.slot_tries >= StringSlot.TRIES or not data.get("type") or not _text(delta):
            return  # (without its own type, the event's SSE type would decide its kind)
        previous, self.slot_previous = self.slot_previous, data
        if previous is None:  # from the second delta on: a short reply never pays for it
            return
        self.slot_tries += 1
        self.slot = StringSlot.learn(text, data, (), "delta", previous, _SLOT_READS)
        self.slot_channel, self.slot_part = channel, part

    def take_slot(self, delta: str, emit: EventSink) -> None:
        """The delta of an event that matched the slot: what its kind's handling does."""
        if self.slot_channel == "text":
            self.text.append(delta)
            if emit is not ignore_events:
                emit(StreamEvent("text", delta))
        else:
            self.add_thinking(self.slot_part, delta, emit)

    def add_thinking(self, part: _Part | None, delta: str, emit: EventSink) -> None:
        """Summary parts are separate paragraphs: a new part starts after a blank line."""
        if self.thinking and part != self.thinking_part:
            delta = "\n\n" + delta
        self.thinking_part = part
        self.thinking.append(delta)
        if emit is not ignore_events:
            emit(StreamEvent("thinking", delta))

    def add_call(self, output_index: JsonValue, item: JsonObject, emit: EventSink) -> _Call:
        call = _Call(len(self.calls), str(item.get("call_id") or ""), str(item.get("name") or ""))
        self.calls[output_index] = call
        self.add_arguments(call, "", emit)
        return call

    @staticmethod
    def add_arguments(call: _Call, delta: str, emit: EventSink) -> None:
        call.arguments.append(delta)
        if emit is not ignore_events:
            data = {"index": call.index, "id": call.call_id, "name": call.name}
            emit(StreamEvent("tool_call", data={**data, "arguments_delta": delta}))


def _tool_call(call: _Call) -> ToolCall:
    raw = "".join(call.arguments)
    try:
        parsed = json.loads(raw)
    except ValueError:
        parsed = None
    return ToolCall(
        id=call.call_id,
        name=call.name,
        arguments=parsed if isinstance(parsed, dict) else None,
        raw_arguments=raw,
    )


def _input_items(messages: Iterable[Mapping[str, JsonValue]]) -> list[JsonValue]:
    """Neutral messages as Responses input items: assistant tool calls become
    ``function_call`` items after the assistant's text, tool results
    ``function_call_output`` items (the API has no error flag; the text says it)."""
    items: list[JsonValue] = []
    for message in messages:
        role = message.get("role")
        if role == "tool":
            output = message.get("content", "")
            call_id = message.get("tool_call_id")
            items.append({"type": "function_call_output", "call_id": call_id, "output": output})
            continue
        content = message.get("content")
        calls = message.get("tool_calls") or []
        if content or not calls:
            items.append({"role": role, "content": content or ""})
        if not isinstance(calls, list | tuple):
            raise TypeError(f"tool_calls must be a list of call objects, got {calls!r}")
        for call in calls:
            if not isinstance(call, dict):
                raise TypeError(f"tool_calls must be a list of call objects, got {calls!r}")
            arguments = call.get("arguments")
            if not isinstance(arguments, str):
                arguments = json.dumps(arguments if arguments is not None else {})
            call_id, name = call.get("id"), call.get("name")
            items.append(
                {"type": "function_call", "call_id": call_id, "name": name, "arguments": arguments}
            )
    return items


class OpenAIResponsesClient(ProtocolClient[_Received]):
    """A ModelClient for ``POST {base_url}/responses`` (base URL like
    ``https://api.openai.com/v1``).

    ``generate`` raises ProviderError (RateLimited for 429/529 or a rate-limit error
    event; ``retry_after`` holds the server's Retry-After in seconds or None),
    TransportError, or ModelTimeout; each carries ``partial``: a Generation of what
    arrived before the failure, or None. The API key is sent as ``Authorization: Bearer``
    and appears nowhere else.
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
        self.base_url = base_url.rstrip("/")
        headers = dict(extra_headers or {})
        if api_key:
            headers["authorization"] = f"Bearer {api_key}"
        self._connect(spec, f"{self.base_url}/responses", headers, trust_env)

    def build_body(self, request: ModelRequest) -> JsonObject:
        """The Responses request body for ``request``. Tools are sent with ``strict:
        false``: the API would otherwise enforce strict mode, which rejects schemas with
        optional properties, and tools behave as they do over Chat Completions."""
        body: JsonObject = {"model": self.spec.model}
        if request.system:
            body["instructions"] = request.system
        body["input"] = _input_items(request.messages)
        if request.tools:
            body["tools"] = [
                {
                    "type": "function",
                    "name": tool.name,
                    "description": tool.description,
                    "parameters": dict(tool.parameters),
                    "strict": False,
                }
                for tool in request.tools
            ]
        if request.max_tokens is not None:
            body["max_output_tokens"] = request.max_tokens
        if request.response_schema is not None:
            body["text"] = {
                "format": {
                    "type": "json_schema",
                    "name": "reply",
                    "schema": dict(request.response_schema),
                    "strict": True,
                }
            }
        body["stream"] = request.stream
        body["store"] = False
        return apply_sampling("responses", body, request.sampling)

    def _new_received(self) -> _Received:
        return _Received()

    STREAM_FINISH = "no response.completed or response.incomplete"

    def _stream_finished(self, received: _Received) -> bool:
        return received.response_status is not None

    def _on_stream_event(
        self, event_type: str, text: str, received: _Received, emit: EventSink
    ) -> None:
        """One event: its type and data (a JSON object once decoded, so objects are dicts)."""
        data = self._decode(text, "stream event")
        kind = data.get("type") or event_type
        if kind == "response.output_text.delta":
            delta = data.get("delta")
            delta = delta if delta.__class__ is str else str(delta or "")
            received.text.append(delta)
            if emit is not ignore_events:
                emit(StreamEvent("text", delta))
            received.learn_slot(text, data, "text", None)
        elif kind in _THINKING_DELTAS:
            part = (data.get("item_id"), data.get("summary_index", data.get("content_index")))
            received.add_thinking(part, str(data.get("delta") or ""), emit)
            received.learn_slot(text, data, "thinking", part)
        elif kind == "response.function_call_arguments.delta":
            call = received.calls.get(data.get("output_index"))
            if call is not None:
                received.add_arguments(call, str(data.get("delta") or ""), emit)
        elif kind in ("response.output_item.added", "response.output_item.done"):
            item = data.get("item")
            index = data.get("output_index")
            if isinstance(item, dict) and item.get("type") == "function_call":
                call = received.calls.get(index) or received.add_call(index, item, emit)
                self._complete_arguments(call, item.get("arguments"), emit)
        elif kind in _FINAL_EVENTS:
            final = data.get("response")
            self._take_final(final if isinstance(final, dict) else {}, received, emit)
        elif kind == "response.failed":
            final = data.get("response")
            error = final.get("error") if isinstance(final, dict) else None
            raise self._event_error(error if isinstance(error, dict) else {}, "response.failed")
        elif kind == "error":
            raise self._event_error(data, "error event")

    @staticmethod
    def _complete_arguments(call: _Call, arguments: JsonValue, emit: EventSink) -> None:
        """A finished item's arguments: whatever the deltas have not delivered yet."""
        sent = "".join(call.arguments)
        if isinstance(arguments, str) and arguments != sent and arguments.startswith(sent):
            _Received.add_arguments(call, arguments[len(sent) :], emit)

    def _read_body(self, response: Response, received: _Received, emit: EventSink) -> None:
        """A non-streamed response; its parts are emitted once each, like a stream would."""
        obj = self._decode(response.read().decode("utf-8", "replace"), "response")
        if obj.get("status") == "failed":
            error = obj.get("error")
            raise self._event_error(error if isinstance(error, Mapping) else {}, "response")
        self._take_final(obj, received, emit)

    def _take_final(self, obj: JsonObject, received: _Received, emit: EventSink) -> None:
        """The finished response: usage, status, and any channel the stream did not
        deliver (some compatible servers send only the final output)."""
        text, thinking, calls = map(bool, (received.text, received.thinking, received.calls))
        output = obj.get("output")
        for index, item in enumerate(output if isinstance(output, list) else ()):
            if not isinstance(item, Mapping):
                continue
            kind = item.get("type")
            if kind == "reasoning" and not thinking:
                for number, part in enumerate(_parts(item, "summary") or _parts(item, "content")):
                    received.add_thinking((index, number), part, emit)
            elif kind == "message" and not text:
                for part in _parts(item, "content", "output_text"):
                    received.text.append(part)
                    emit(StreamEvent("text", part))
            elif kind == "function_call" and not calls:
                call = received.add_call(index, item, emit)
                self._complete_arguments(call, item.get("arguments"), emit)
        usage = obj.get("usage")
        if isinstance(usage, dict):
            received.usage = usage
            emit(StreamEvent("usage", data=usage))
        details = obj.get("incomplete_details")
        reason = details.get("reason") if isinstance(details, Mapping) else None
        received.incomplete_reason = str(reason) if reason else None
        received.response_status = str(obj.get("status") or "completed")
        received.done = True
        finish = map_finish_reason(
            received.response_status, received.incomplete_reason, bool(received.calls)
        )
        emit(StreamEvent("finish", data={"finish_reason": finish}))

    def _decode(self, data: str, what: str) -> JsonObject:
        """Parse one JSON object from the provider; an ``error`` object becomes an error."""
        obj = self._json_object(data, what)
        error = obj.get("error")
        if isinstance(error, dict) and error and obj.get("type") is None:
            raise self._event_error(error, what)
        return obj

    def _event_error(self, error: JsonObject, what: str) -> ProviderError:
        """An error the provider reported inside a 200 response (``response.failed``, an
        ``error`` event, a failed response object)."""
        code = error.get("code")
        message = " ".join(str(error.get("message") or "(no message)").split())
        overflow = context_overflow(error)
        if overflow is not None:
            return overflow_error(self.spec.label, self.public_endpoint, None, overflow, message)
        kind = RateLimited if code in _RATE_LIMIT_CODES else ProviderError
        label = f" ({code})" if code else ""
        return kind(
            f"{self.spec.label}: {what} from {self.public_endpoint}{label}: {message}",
            endpoint=self.public_endpoint,
        )

    def _tool_calls(self, received: _Received) -> tuple[ToolCall, ...]:
        return tuple(_tool_call(call) for call in received.calls.values())

    def _finish_reason(
        self, received: _Received, tool_calls: tuple[ToolCall, ...]
    ) -> FinishReason | None:
        return map_finish_reason(
            received.response_status, received.incomplete_reason, bool(tool_calls)
        )

    def _native_finish(self, received: _Received, finish: FinishReason | None) -> JsonObject:
        return {
            "finish_reason": finish,
            "response_status": received.response_status,
            "incomplete_reason": received.incomplete_reason,
        }

    _normalise_usage = staticmethod(normalise_responses_usage)


def _parts(item: JsonObject, key: str, kind: str | None = None) -> list[str]:
    """The texts of an output item's parts (``summary`` or ``content``), optionally of
    one part type only."""
    parts = item.get(key)
    if not isinstance(parts, list):
        return []
    texts = []
    for part in parts:
        if isinstance(part, dict) and (kind is None or part.get("type") == kind):
            text = part.get("text")
            if isinstance(text, str):
                texts.append(text)
    return texts


def _text(value: JsonValue) -> bool:
    return isinstance(value, str) and bool(value)
