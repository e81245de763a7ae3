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

from collections.abc import Mapping

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
from pytest_agentbench.models.http import (
    ProtocolClient,
    ignore_events,
)
from pytest_agentbench.models.overflow import context_overflow, overflow_error
from pytest_agentbench.models.responses_format import (
    ResponsesCall,
    ResponsesReceived,
    map_finish_reason,
    responses_input,
    tool_call,
)
from pytest_agentbench.models.sampling_wire import apply_sampling
from pytest_agentbench.models.usage import normalise_responses_usage
from pytest_agentbench.models.wire import Response

_THINKING_DELTAS = ("response.reasoning_summary_text.delta", "response.reasoning_text.delta")
_FINAL_EVENTS = ("response.completed", "response.incomplete")
_RATE_LIMIT_CODES = ("rate_limit_exceeded", "rate_limit_error", "overloaded_error")


class OpenAIResponsesClient(ProtocolClient[ResponsesReceived]):
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
        body["input"] = responses_input(request.messages)
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

    def _new_received(self) -> ResponsesReceived:
        return ResponsesReceived()

    STREAM_FINISH = "no response.completed or response.incomplete"

    def _stream_finished(self, received: ResponsesReceived) -> bool:
        return received.response_status is not None

    def _on_stream_event(
        self, event_type: str, text: str, received: ResponsesReceived, emit: EventSink
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
    def _complete_arguments(call: ResponsesCall, arguments: JsonValue, emit: EventSink) -> None:
        """A finished item's arguments: whatever the deltas have not delivered yet."""
        sent = "".join(call.arguments)
        if isinstance(arguments, str) and arguments != sent and arguments.startswith(sent):
            ResponsesReceived.add_arguments(call, arguments[len(sent) :], emit)

    def _read_body(self, response: Response, received: ResponsesReceived, emit: EventSink) -> None:
        """A non-streamed response; its parts are emitted once each, like a stream would."""
        obj = self._decode(response.read().decode("utf-8", "replace"), "response")
        if obj.get("status") == "failed":
            error = obj.get("error")
            raise self._event_error(error if isinstance(error, Mapping) else {}, "response")
        self._take_final(obj, received, emit)

    def _take_final(self, obj: JsonObject, received: ResponsesReceived, emit: EventSink) -> None:
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

    def _tool_calls(self, received: ResponsesReceived) -> tuple[ToolCall, ...]:
        return tuple(tool_call(call) for call in received.calls.values())

    def _finish_reason(
        self, received: ResponsesReceived, tool_calls: tuple[ToolCall, ...]
    ) -> FinishReason | None:
        return map_finish_reason(
            received.response_status, received.incomplete_reason, bool(tool_calls)
        )

    def _native_finish(
        self, received: ResponsesReceived, finish: FinishReason | None
    ) -> JsonObject:
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
