"""OpenAI Responses on the wire: ``response`` objects and the typed SSE events of
``POST /v1/responses``, shaped as the real API shapes them.

Output items come in the API's order: a ``reasoning`` item (its thinking as one summary
part) when the reply thinks, a ``message`` item with the text (left out when the reply
only calls tools), then one ``function_call`` item per tool call. A reply finishing with
``length`` (or ``max_output_tokens``) is ``incomplete`` with reason ``max_output_tokens``;
``content_filter`` is ``incomplete`` with reason ``content_filter``; anything else is
``completed``.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence

from pytest_agentbench.core.jsontypes import JsonObject, JsonValue
from pytest_agentbench.scripted.script import Reply
from pytest_agentbench.scripted.usage import serve_usage
from pytest_agentbench.scripted.wire import Refusal, content_words, openai_error_body, words

_INCOMPLETE_REASONS = {
    "length": "max_output_tokens",
    "max_output_tokens": "max_output_tokens",
    "content_filter": "content_filter",
}
_DELTA_EVENTS = (
    "response.reasoning_summary_text.delta",
    "response.output_text.delta",
    "response.function_call_arguments.delta",
)


def _item_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex}{uuid.uuid4().hex[:16]}"


def _input_words(items: JsonValue) -> int:
    """Words in the input: a plain string, or items whose text is a message ``content``
    (string or parts) or a ``function_call_output``'s ``output``."""
    if isinstance(items, str):
        return words(items)
    if not isinstance(items, list):
        return 0
    total = 0
    for item in items:
        if not isinstance(item, Mapping):
            continue
        if item.get("type") == "function_call_output":
            total += content_words(item.get("output"))
        elif "content" in item:
            total += content_words(item.get("content"))
    return total


def _default_usage(reply: Reply, body: Mapping[str, JsonValue]) -> JsonObject:
    """The usage reported when a reply declares none: whitespace-separated words stand in
    for tokens (instructions + input text → input; text + thinking → output)."""
    instructions = body.get("instructions")
    prompt = _input_words(body.get("input"))
    prompt += words(instructions) if isinstance(instructions, str) else 0
    reasoning = words(reply.thinking)
    output = words(reply.full_text) + reasoning
    return {
        "input_tokens": prompt,
        "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
        "output_tokens": output,
        "output_tokens_details": {"reasoning_tokens": reasoning},
        "total_tokens": prompt + output,
    }


class _Rendering:
    """One reply rendered: its ids fixed once, so the stream and its final response agree."""

    def __init__(self, reply: Reply, model: str) -> None:
        self.reply = reply
        self.model = model
        self.response_id = _item_id("resp")
        self.created_at = int(time.time())
        self.incomplete_reason = _INCOMPLETE_REASONS.get(reply.finish_reason)
        self.reasoning_id = _item_id("rs") if reply.thinking else None
        has_message = bool(reply.full_text) or not reply.tool_calls
        self.message_id = _item_id("msg") if has_message else None
        self.call_ids = [_item_id("fc") for _ in reply.tool_calls]

    @property
    def final_status(self) -> str:
        return "incomplete" if self.incomplete_reason else "completed"

    def reasoning_item(self, summary: list[JsonValue]) -> JsonObject:
        return {"id": self.reasoning_id, "type": "reasoning", "summary": summary}

    def message_item(self, status: str, content: list[JsonValue]) -> JsonObject:
        return {
            "id": self.message_id,
            "type": "message",
            "status": status,
            "content": content,
            "role": "assistant",
        }

    def call_item(self, index: int, status: str, arguments: str) -> JsonObject:
        call = self.reply.tool_calls[index]
        return {
            "id": self.call_ids[index],
            "type": "function_call",
            "status": status,
            "arguments": arguments,
            "call_id": call.id,
            "name": call.name,
        }

    def output(self) -> list[JsonValue]:
        """The finished output items."""
        status = self.final_status
        items: list[JsonValue] = []
        if self.reasoning_id:
            items.append(self.reasoning_item([_summary_part(self.reply.thinking)]))
        if self.message_id:
            items.append(self.message_item(status, [_text_part(self.reply.full_text)]))
        for index, call in enumerate(self.reply.tool_calls):
            items.append(self.call_item(index, "completed", call.arguments))
        return items

    def response(
        self, status: str, output: list[JsonValue], usage: Mapping[str, JsonValue] | None
    ) -> JsonObject:
        finished = status in ("completed", "incomplete")
        return {
            "id": self.response_id,
            "object": "response",
            "created_at": self.created_at,
            "status": status,
            "background": False,
            "completed_at": int(time.time()) if status == "completed" else None,
            "error": None,
            "incomplete_details": (
                {"reason": self.incomplete_reason} if finished and self.incomplete_reason else None
            ),
            "instructions": None,
            "max_output_tokens": None,
            "model": self.model,
            "output": output,
            "parallel_tool_calls": True,
            "previous_response_id": None,
            "reasoning": {"effort": None, "summary": None},
            "store": False,
            "temperature": 1.0,
            "text": {"format": {"type": "text"}},
            "tool_choice": "auto",
            "tools": [],
            "top_p": 1.0,
            "truncation": "disabled",
            "usage": dict(usage) if usage is not None else None,
            "user": None,
            "metadata": {},
        }


def _summary_part(text: str) -> JsonObject:
    return {"type": "summary_text", "text": text}


def _text_part(text: str) -> JsonObject:
    return {"type": "output_text", "annotations": [], "logprobs": [], "text": text}


def _pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def _completion(reply: Reply, model: str, usage: Mapping[str, JsonValue]) -> JsonObject:
    """The ``response`` object of a non-streamed reply."""
    rendering = _Rendering(reply, model)
    return rendering.response(rendering.final_status, rendering.output(), usage)


def _event_payloads(rendering: _Rendering) -> Iterator[JsonObject]:
    """Every event between ``response.in_progress`` and the final one, in order."""
    reply, size = rendering.reply, rendering.reply.chunk_size
    index = 0
    if rendering.reasoning_id:
        where: JsonObject = {
            "item_id": rendering.reasoning_id,
            "output_index": index,
            "summary_index": 0,
        }
        yield {
            "type": "response.output_item.added",
            "output_index": index,
            "item": rendering.reasoning_item([]),
        }
        yield {"type": "response.reasoning_summary_part.added", **where, "part": _summary_part("")}
        for piece in _pieces(reply.thinking, size):
            yield {"type": "response.reasoning_summary_text.delta", **where, "delta": piece}
        yield {"type": "response.reasoning_summary_text.done", **where, "text": reply.thinking}
        part = _summary_part(reply.thinking)
        yield {"type": "response.reasoning_summary_part.done", **where, "part": part}
        yield {
            "type": "response.output_item.done",
            "output_index": index,
            "item": rendering.reasoning_item([part]),
        }
        index += 1
    if rendering.message_id:
        text = reply.full_text
        where = {"item_id": rendering.message_id, "output_index": index, "content_index": 0}
        yield {
            "type": "response.output_item.added",
            "output_index": index,
            "item": rendering.message_item("in_progress", []),
        }
        yield {"type": "response.content_part.added", **where, "part": _text_part("")}
        for piece in _pieces(text, size):
            yield {"type": "response.output_text.delta", **where, "delta": piece, "logprobs": []}
        yield {"type": "response.output_text.done", **where, "text": text, "logprobs": []}
        yield {"type": "response.content_part.done", **where, "part": _text_part(text)}
        yield {
            "type": "response.output_item.done",
            "output_index": index,
            "item": rendering.message_item(rendering.final_status, [_text_part(text)]),
        }
        index += 1
    for call_index, call in enumerate(reply.tool_calls):
        where = {"item_id": rendering.call_ids[call_index], "output_index": index}
        yield {
            "type": "response.output_item.added",
            "output_index": index,
            "item": rendering.call_item(call_index, "in_progress", ""),
        }
        for piece in _pieces(call.arguments, size):
            yield {"type": "response.function_call_arguments.delta", **where, "delta": piece}
        yield {
            "type": "response.function_call_arguments.done",
            **where,
            "arguments": call.arguments,
        }
        yield {
            "type": "response.output_item.done",
            "output_index": index,
            "item": rendering.call_item(call_index, "completed", call.arguments),
        }
        index += 1


def _stream_events(reply: Reply, model: str, usage: Mapping[str, JsonValue] | None) -> list[bytes]:
    """The SSE events of a streamed reply, each with its ``event:`` name and a
    ``sequence_number`` counting from 0. The last is ``response.completed`` (or
    ``response.incomplete``) carrying the whole response with usage. A truncated reply
    stops after about half of its deltas, before any finishing event."""
    rendering = _Rendering(reply, model)
    payloads: list[JsonObject] = [
        {"type": "response.created", "response": rendering.response("in_progress", [], None)},
        {"type": "response.in_progress", "response": rendering.response("in_progress", [], None)},
        *_event_payloads(rendering),
    ]
    if reply.truncate:
        deltas = [i for i, p in enumerate(payloads) if p["type"] in _DELTA_EVENTS]
        cut = deltas[(len(deltas) - 1) // 2] + 1 if deltas else len(payloads) // 2
        payloads = payloads[:cut]
    else:
        status = rendering.final_status
        final = rendering.response(status, rendering.output(), usage)
        payloads.append({"type": f"response.{status}", "response": final})
    return [
        f"event: {payload['type']}\ndata: ".encode()
        + json.dumps({**payload, "sequence_number": number}).encode()
        + b"\n\n"
        for number, payload in enumerate(payloads)
    ]


class ResponsesWire:
    """The Wire of ``POST /v1/responses``."""

    def check(self, body: Mapping[str, JsonValue], replies: Sequence[Reply]) -> Refusal | None:
        return None

    def default_usage(self, reply: Reply, body: Mapping[str, JsonValue]) -> JsonObject:
        return _default_usage(reply, body)

    def declared_usage(self, usage: Mapping[str, JsonValue]) -> JsonObject:
        return serve_usage(usage, "responses")

    def stream_usage(self, body: Mapping[str, JsonValue]) -> bool:
        return True

    def completion(
        self,
        reply: Reply,
        model: str,
        usage: Mapping[str, JsonValue],
        body: Mapping[str, JsonValue],
    ) -> JsonObject:
        return _completion(reply, model, usage)

    def stream_events(
        self,
        reply: Reply,
        model: str,
        usage: Mapping[str, JsonValue] | None,
        body: Mapping[str, JsonValue],
    ) -> list[bytes]:
        return _stream_events(reply, model, usage)

    def error_body(
        self, status: int, message: str, error_type: str, param: str | None = None
    ) -> JsonObject:
        return openai_error_body(status, message, error_type, param)


RESPONSES_WIRE = ResponsesWire()
