"""Anthropic Messages on the wire: ``message`` objects and the named SSE events of a
streamed message (``message_start`` … ``message_stop``), shaped as the real API shapes them.

Tool-call arguments that are not valid JSON are sent as they are written, so a client sees
them as malformed: in a non-streamed message the ``tool_use`` block's ``input`` is that text
as a JSON *string* (the API promises an object); in a stream the ``input_json_delta``
pieces concatenate to that text, which does not parse.
"""

from __future__ import annotations

import base64
import hashlib
import json
import uuid
from collections.abc import Mapping, Sequence

from pytest_agentbench.core.jsontypes import JsonObject, JsonValue
from pytest_agentbench.scripted.script import Reply, ScriptedToolCall
from pytest_agentbench.scripted.usage import serve_usage
from pytest_agentbench.scripted.wire import Refusal, stop_at, words

#: The scripted finish reasons (Chat Completions names) as Anthropic stop reasons; any
#: other value (``stop_sequence``, ``pause_turn``, …) is sent as written.
_STOP_REASONS = {
    "stop": "end_turn",
    "length": "max_tokens",
    "tool_calls": "tool_use",
    "content_filter": "refusal",
}

#: The Anthropic error type of each status; other 5xx are ``api_error``, other 4xx
#: ``invalid_request_error``.
_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}

#: The server's generic error types (OpenAI names, or "" for the status's own type);
#: they give way to the status's own Anthropic type.
_GENERIC_ERROR_TYPES = ("", "invalid_request_error", "server_error")


def _block_words(content: JsonValue) -> int:
    """Words in a message's content: a string, or blocks with ``text`` (text blocks) or
    ``content`` (tool results, whose content is itself a string or text blocks)."""
    if isinstance(content, str):
        return words(content)
    if not isinstance(content, list):
        return 0
    total = 0
    for block in content:
        if not isinstance(block, Mapping):
            continue
        text = block.get("text")
        if isinstance(text, str):
            total += words(text)
        elif "content" in block:
            total += _block_words(block["content"])
    return total


def _default_usage(reply: Reply, body: Mapping[str, JsonValue]) -> JsonObject:
    """Words stand in for tokens: the system prompt and every message → ``input_tokens``,
    text + thinking → ``output_tokens``; nothing is cached."""
    messages = body.get("messages")
    prompt = _block_words(body.get("system")) + sum(
        _block_words(message.get("content"))
        for message in (messages if isinstance(messages, list) else ())
        if isinstance(message, Mapping)
    )
    return {
        "input_tokens": prompt,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "output_tokens": words(reply.full_text) + words(reply.thinking),
    }


def _fit(reply: Reply, body: Mapping[str, JsonValue]) -> tuple[Reply, str | None]:
    """The reply as generated for this request: cut at its ``stop_sequences`` (stop
    reason ``stop_sequence``), with the matched sequence."""
    return stop_at(reply, body.get("stop_sequences"), "stop_sequence")


def _reasoning(reply: Reply) -> list[JsonValue]:
    """The reply's thinking and redacted_thinking blocks, whole."""
    blocks: list[JsonValue] = []
    if reply.thinking:
        thinking = reply.thinking
        blocks.append({"type": "thinking", "thinking": thinking, "signature": _signature(thinking)})
    if reply.redacted_thinking:
        blocks.append({"type": "redacted_thinking", "data": reply.redacted_thinking})
    return blocks


def _stop_reason(reply: Reply) -> str:
    if reply.tool_calls and reply.finish_reason == "stop":
        return "tool_use"
    return _STOP_REASONS.get(reply.finish_reason, reply.finish_reason)


def _signature(thinking: str) -> str:
    """A stand-in for the opaque signature the API attaches to a thinking block."""
    return base64.b64encode(hashlib.sha256(thinking.encode()).digest()).decode()


def _tool_id(call: ScriptedToolCall, index: int) -> str:
    """The script's id, except the script format's default ``call_<index>``, which becomes
    ``toolu_scripted_<index>`` to look like the API's ``toolu_…`` ids."""
    return f"toolu_scripted_{index}" if call.id == f"call_{index}" else call.id


def _tool_input(arguments: str) -> JsonValue:
    try:
        value: JsonValue = json.loads(arguments)
    except ValueError:
        return arguments
    return value


def _message(model: str, content: list[JsonValue], usage: Mapping[str, JsonValue]) -> JsonObject:
    return {
        "id": f"msg_{uuid.uuid4().hex[:24]}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": None,
        "stop_sequence": None,
        "usage": dict(usage),
    }


def _completion(
    reply: Reply, model: str, usage: Mapping[str, JsonValue], body: Mapping[str, JsonValue]
) -> JsonObject:
    """The ``message`` of a non-streamed reply: thinking, redacted_thinking, text, then
    tool_use blocks."""
    reply, sequence = _fit(reply, body)
    content = _reasoning(reply)
    if reply.full_text or not reply.tool_calls:
        content.append({"type": "text", "text": reply.full_text})
    for index, call in enumerate(reply.tool_calls):
        block = {"type": "tool_use", "id": _tool_id(call, index), "name": call.name}
        content.append({**block, "input": _tool_input(call.arguments)})
    message = _message(model, content, usage)
    message["stop_reason"] = _stop_reason(reply)
    message["stop_sequence"] = sequence
    return message


def _event(name: str, data: Mapping[str, JsonValue]) -> bytes:
    return f"event: {name}\ndata: {json.dumps({'type': name, **data})}\n\n".encode()


def _block_events(index: int, start: JsonObject, deltas: list[JsonValue]) -> list[bytes]:
    return [
        _event("content_block_start", {"index": index, "content_block": start}),
        *(_event("content_block_delta", {"index": index, "delta": d}) for d in deltas),
        _event("content_block_stop", {"index": index}),
    ]


def _pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def _split_usage(usage: Mapping[str, JsonValue]) -> tuple[JsonObject, JsonObject]:
    """The usage of ``message_start`` (input and cache fields, output_tokens at most 1) and
    of ``message_delta`` (the cumulative output_tokens); merged, they are ``usage`` again."""
    start = {name: value for name, value in usage.items() if name != "output_tokens"}
    delta: JsonObject = {}
    if "output_tokens" in usage:
        output = usage["output_tokens"]
        start["output_tokens"] = min(output, 1) if isinstance(output, int) else output
        delta["output_tokens"] = output
    return start, delta


def _stream_events(
    reply: Reply, model: str, usage: Mapping[str, JsonValue] | None, body: Mapping[str, JsonValue]
) -> list[bytes]:
    """``message_start``, one content block each for thinking (thinking_delta pieces, then
    a signature_delta), redacted_thinking (whole at its start), text and every tool call
    (input_json_delta pieces), then ``message_delta`` and ``message_stop``; a ``ping``
    follows the first content_block_start, where the API sends it. Truncated:
    message_start and about half of the content events, nothing after."""
    reply, sequence = _fit(reply, body)
    start_usage, delta_usage = _split_usage(usage or {})
    message = _message(model, [], start_usage)
    size = reply.chunk_size
    blocks: list[tuple[JsonObject, list[JsonValue]]] = []
    if reply.thinking:
        deltas: list[JsonValue] = [
            {"type": "thinking_delta", "thinking": p} for p in _pieces(reply.thinking, size)
        ]
        deltas.append({"type": "signature_delta", "signature": _signature(reply.thinking)})
        blocks.append(({"type": "thinking", "thinking": "", "signature": ""}, deltas))
    if reply.redacted_thinking:
        blocks.append(({"type": "redacted_thinking", "data": reply.redacted_thinking}, []))
    text = reply.full_text
    if text or not reply.tool_calls:
        deltas = [{"type": "text_delta", "text": piece} for piece in _pieces(text, size)]
        blocks.append(({"type": "text", "text": ""}, deltas))
    for index, call in enumerate(reply.tool_calls):
        start: JsonObject = {
            "type": "tool_use",
            "id": _tool_id(call, index),
            "name": call.name,
            "input": {},
        }
        pieces = _pieces(call.arguments, size)
        blocks.append((start, [{"type": "input_json_delta", "partial_json": p} for p in pieces]))
    body_events = [event for i, block in enumerate(blocks) for event in _block_events(i, *block)]
    body_events.insert(1, _event("ping", {}))
    head = [_event("message_start", {"message": message})]
    if reply.truncate:
        return head + body_events[: (len(body_events) + 1) // 2]
    finish: JsonObject = {"stop_reason": _stop_reason(reply), "stop_sequence": sequence}
    tail = [
        _event("message_delta", {"delta": finish, "usage": delta_usage}),
        _event("message_stop", {}),
    ]
    return head + body_events + tail


def _comparable(block: JsonValue) -> tuple[JsonValue, ...] | None:
    """A reasoning block as the API compares it; None for any other block."""
    if not isinstance(block, Mapping):
        return None
    if block.get("type") == "thinking":
        return ("thinking", block.get("thinking"), block.get("signature"))
    if block.get("type") == "redacted_thinking":
        return ("redacted_thinking", block.get("data"))
    return None


def _check_reasoning(body: Mapping[str, JsonValue], replies: Sequence[Reply]) -> Refusal | None:
    """What the API checks of reasoning sent back: every thinking block's signature must
    match its text (it was not edited), and when tool results answer the last assistant
    turn, that turn must start with the reasoning blocks it was generated with, unchanged
    (the API requires them when tools are used with thinking). Which reply generated the
    turn is found by its tool_use ids and names; the rule applies when every such reply
    of the script had reasoning."""
    messages = body.get("messages")
    if not isinstance(messages, list):
        return None
    last = None
    for index, message in enumerate(messages):
        if not isinstance(message, Mapping) or message.get("role") != "assistant":
            continue
        last = index
        content = message.get("content")
        for position, block in enumerate(content if isinstance(content, list) else ()):
            compared = _comparable(block)
            if (
                compared
                and compared[0] == "thinking"
                and compared[2] != _signature(str(compared[1]))
            ):
                return Refusal(
                    f"messages.{index}.content.{position}: invalid `signature` in `thinking` "
                    "block: a thinking block must be sent back exactly as it was received"
                )
    if last is None or last + 1 >= len(messages):
        return None
    following = messages[last + 1]
    answer = following.get("content") if isinstance(following, dict) else None
    if not isinstance(answer, list) or not any(
        isinstance(b, Mapping) and b.get("type") == "tool_result" for b in answer
    ):
        return None
    assistant = messages[last]
    content = assistant.get("content") if isinstance(assistant, dict) else None
    blocks = content if isinstance(content, list) else []
    calls = [
        (b.get("id"), b.get("name"))
        for b in blocks
        if isinstance(b, Mapping) and b.get("type") == "tool_use"
    ]
    makers = [
        reply
        for reply in replies
        if calls and [(_tool_id(c, i), c.name) for i, c in enumerate(reply.tool_calls)] == calls
    ]
    wanted = [[_comparable(b) for b in _reasoning(reply)] for reply in makers]
    if not wanted or not all(wanted):
        return None
    sent = []
    for block in blocks:
        compared = _comparable(block)
        if compared is None:
            break
        sent.append(compared)
    if sent in wanted:
        return None
    first = blocks[0].get("type") if blocks and isinstance(blocks[0], Mapping) else None
    return Refusal(
        f"messages.{last}.content.0: expected the `thinking` or `redacted_thinking` blocks "
        f"this assistant turn was generated with, unchanged, but found `{first}`; when tools "
        "are used with thinking, the last assistant turn must start with its thinking blocks "
        "(signatures included) before its `tool_use` blocks"
    )


class AnthropicWire:
    """The Wire of ``POST /v1/messages``. Streamed replies always carry usage."""

    def check(self, body: Mapping[str, JsonValue], replies: Sequence[Reply]) -> Refusal | None:
        return _check_reasoning(body, replies)

    def default_usage(self, reply: Reply, body: Mapping[str, JsonValue]) -> JsonObject:
        return _default_usage(_fit(reply, body)[0], body)

    def declared_usage(self, usage: Mapping[str, JsonValue]) -> JsonObject:
        return serve_usage(usage, "anthropic")

    def stream_usage(self, body: Mapping[str, JsonValue]) -> bool:
        return True

    def completion(
        self,
        reply: Reply,
        model: str,
        usage: Mapping[str, JsonValue],
        body: Mapping[str, JsonValue],
    ) -> JsonObject:
        return _completion(reply, model, usage, body)

    def stream_events(
        self,
        reply: Reply,
        model: str,
        usage: Mapping[str, JsonValue] | None,
        body: Mapping[str, JsonValue],
    ) -> list[bytes]:
        return _stream_events(reply, model, usage, body)

    def error_body(
        self, status: int, message: str, error_type: str, param: str | None = None
    ) -> JsonObject:
        """An Anthropic error (it has no ``param``). A script's own ``type`` is kept; the
        server's generic types become the status's Anthropic type (404 →
        ``not_found_error``, 429 → ``rate_limit_error``, 500 → ``api_error``, 529 →
        ``overloaded_error``)."""
        if error_type in _GENERIC_ERROR_TYPES:
            fallback = "api_error" if status >= 500 else "invalid_request_error"
            error_type = _ERROR_TYPES.get(status, fallback)
        return {"type": "error", "error": {"type": error_type, "message": message}}


ANTHROPIC_WIRE = AnthropicWire()
