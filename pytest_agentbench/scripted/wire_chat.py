"""OpenAI Chat Completions on the wire: ``chat.completion`` objects and
``chat.completion.chunk`` SSE events, shaped as the real API shapes them, tool calls
included (``function`` calls with JSON-string arguments, streamed in fragments)."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping, Sequence

from pytest_agentbench.core.jsontypes import JsonObject, JsonValue
from pytest_agentbench.scripted.script import Reply
from pytest_agentbench.scripted.usage import serve_usage
from pytest_agentbench.scripted.wire import (
    Refusal,
    message_words,
    openai_error_body,
    stop_at,
    words,
)


def _default_usage(reply: Reply, body: Mapping[str, JsonValue]) -> JsonObject:
    """The usage reported when a reply declares none: whitespace-separated words stand in
    for tokens (all request messages → prompt, thinking + text + tool call arguments →
    completion)."""
    prompt = message_words(body.get("messages"))
    completion = words(reply.full_text) + words(reply.thinking)
    completion += sum(words(call.arguments) for call in reply.tool_calls)
    usage: JsonObject = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }
    if reply.thinking:
        usage["completion_tokens_details"] = {"reasoning_tokens": words(reply.thinking)}
    return usage


def _fit(reply: Reply, body: Mapping[str, JsonValue]) -> Reply:
    """The reply as generated for this request: cut before the earliest of its ``stop``
    sequences (finish reason ``stop``; the API does not say which one matched)."""
    return stop_at(reply, body.get("stop"), "stop")[0]


def _completion_id() -> str:
    return f"chatcmpl-{uuid.uuid4().hex[:24]}"


def _finish_reason(reply: Reply) -> str:
    """``tool_calls`` for a reply that calls tools and did not ask for another reason."""
    return (
        "tool_calls" if reply.tool_calls and reply.finish_reason == "stop" else reply.finish_reason
    )


def _completion(reply: Reply, model: str, usage: Mapping[str, JsonValue]) -> JsonObject:
    """The ``chat.completion`` object of a non-streamed reply; content is null when a
    reply that calls tools says nothing."""
    content = reply.full_text or (None if reply.tool_calls else "")
    message: JsonObject = {"role": "assistant", "content": content, "refusal": None}
    if reply.thinking:
        message["reasoning_content"] = reply.thinking
    if reply.tool_calls:
        message["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments},
            }
            for call in reply.tool_calls
        ]
    choice: JsonObject = {
        "index": 0,
        "message": message,
        "logprobs": None,
        "finish_reason": _finish_reason(reply),
    }
    return {
        "id": _completion_id(),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [choice],
        "usage": dict(usage),
    }


def _stream_events(reply: Reply, model: str, usage: Mapping[str, JsonValue] | None) -> list[bytes]:
    """The SSE events of a streamed reply: a role chunk (``content`` "" or, for a reply that
    only calls tools, null; ``refusal`` null), thinking then text deltas of
    ``chunk_size`` characters, each tool call (a fragment with its index, id, type and
    name, then its arguments in ``chunk_size`` pieces), the finish chunk, the usage chunk
    (when ``usage`` is given, i.e. the client asked for it), ``[DONE]``. A truncated reply
    stops after about half of its deltas, with no finish, usage or ``[DONE]``."""
    base: JsonObject = {
        "id": _completion_id(),
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
    }
    if usage is not None:
        base["usage"] = None

    def event(choices: list[JsonValue], **extra: JsonValue) -> bytes:
        return b"data: " + json.dumps({**base, "choices": choices, **extra}).encode() + b"\n\n"

    def chunk(delta: JsonObject, finish: str | None = None) -> bytes:
        return event([{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}])

    size, thinking, text = reply.chunk_size, reply.thinking, reply.full_text
    deltas = [
        chunk({"reasoning_content": thinking[i : i + size]}) for i in range(0, len(thinking), size)
    ]
    deltas += [chunk({"content": text[i : i + size]}) for i in range(0, len(text), size)]
    for index, call in enumerate(reply.tool_calls):
        function: JsonObject = {"name": call.name, "arguments": ""}
        first: JsonObject = {
            "index": index,
            "id": call.id,
            "type": "function",
            "function": function,
        }
        deltas.append(chunk({"tool_calls": [first]}))
        deltas += [
            chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
            for piece in (call.arguments[i : i + size] for i in range(0, len(call.arguments), size))
        ]
    # the first chunk's content is null when the reply only calls tools, as the API sends it
    first = {"role": "assistant", "content": None if reply.tool_calls and not text else ""}
    events = [chunk({**first, "refusal": None}), *deltas]
    if reply.truncate:
        return events[: 1 + (len(deltas) + 1) // 2]
    events.append(chunk({}, _finish_reason(reply)))
    if usage is not None:
        events.append(event([], usage=dict(usage)))
    events.append(b"data: [DONE]\n\n")
    return events


class ChatWire:
    """The Wire of ``POST /v1/chat/completions``."""

    def check(self, body: Mapping[str, JsonValue], replies: Sequence[Reply]) -> Refusal | None:
        """One choice per request: ``n`` other than 1 is refused as the API refuses a bad
        value, rather than silently answering with one choice."""
        n = body.get("n")
        if n is None or (isinstance(n, int) and not isinstance(n, bool) and n == 1):
            return None
        return Refusal(
            f"Invalid value for 'n': {json.dumps(n)}. The scripted provider answers with "
            "exactly one choice; send n = 1 or leave it out.",
            "n",
        )

    def default_usage(self, reply: Reply, body: Mapping[str, JsonValue]) -> JsonObject:
        return _default_usage(_fit(reply, body), body)

    def declared_usage(self, usage: Mapping[str, JsonValue]) -> JsonObject:
        return serve_usage(usage, "chat")

    def stream_usage(self, body: Mapping[str, JsonValue]) -> bool:
        options = body.get("stream_options")
        return isinstance(options, Mapping) and options.get("include_usage") is True

    def completion(
        self,
        reply: Reply,
        model: str,
        usage: Mapping[str, JsonValue],
        body: Mapping[str, JsonValue],
    ) -> JsonObject:
        return _completion(_fit(reply, body), model, usage)

    def stream_events(
        self,
        reply: Reply,
        model: str,
        usage: Mapping[str, JsonValue] | None,
        body: Mapping[str, JsonValue],
    ) -> list[bytes]:
        return _stream_events(_fit(reply, body), model, usage)

    def error_body(
        self, status: int, message: str, error_type: str, param: str | None = None
    ) -> JsonObject:
        return openai_error_body(status, message, error_type, param)


CHAT_WIRE = ChatWire()
