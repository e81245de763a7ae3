"""OpenAI Chat Completions on the wire: ``chat.completion`` objects and
``chat.completion.chunk`` SSE events, shaped as the real API shapes them."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping
from typing import Any

from pytest_agentbench.scripted.script import Reply
from pytest_agentbench.scripted.wire import message_words, words


def _default_usage(reply: Reply, body: Mapping[str, Any]) -> dict[str, Any]:
    """The usage reported when a reply declares none: whitespace-separated words stand in
    for tokens (all request messages → prompt, thinking + text → completion)."""
    prompt = message_words(body.get("messages"))
    completion = words(reply.full_text) + words(reply.thinking)
    usage: dict[str, Any] = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }
    if reply.thinking:
        usage["completion_tokens_details"] = {"reasoning_tokens": words(reply.thinking)}
    return usage


def _completion_id() -> str:
    return f"chatcmpl-{uuid.uuid4().hex[:24]}"


def _completion(reply: Reply, model: str, usage: Mapping[str, Any]) -> dict[str, Any]:
    """The ``chat.completion`` object of a non-streamed reply."""
    message: dict[str, Any] = {"role": "assistant", "content": reply.full_text, "refusal": None}
    if reply.thinking:
        message["reasoning_content"] = reply.thinking
    choice = {
        "index": 0,
        "message": message,
        "logprobs": None,
        "finish_reason": reply.finish_reason,
    }
    return {
        "id": _completion_id(),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [choice],
        "usage": dict(usage),
    }


def _stream_events(reply: Reply, model: str, usage: Mapping[str, Any] | None) -> list[bytes]:
    """The SSE events of a streamed reply: a role chunk, thinking then text deltas of
    ``chunk_size`` characters, the finish chunk, the usage chunk (when ``usage`` is given,
    i.e. the client asked for it), ``[DONE]``. A truncated reply stops after about half
    of its deltas, with no finish, usage or ``[DONE]``."""
    base: dict[str, Any] = {
        "id": _completion_id(),
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
    }
    if usage is not None:
        base["usage"] = None

    def event(choices: list[dict[str, Any]], **extra: Any) -> bytes:
        return b"data: " + json.dumps({**base, "choices": choices, **extra}).encode() + b"\n\n"

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        return event([{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}])

    size, thinking, text = reply.chunk_size, reply.thinking, reply.full_text
    deltas = [
        chunk({"reasoning_content": thinking[i : i + size]}) for i in range(0, len(thinking), size)
    ]
    deltas += [chunk({"content": text[i : i + size]}) for i in range(0, len(text), size)]
    events = [chunk({"role": "assistant", "content": ""}), *deltas]
    if reply.truncate:
        return events[: 1 + (len(deltas) + 1) // 2]
    events.append(chunk({}, reply.finish_reason))
    if usage is not None:
        events.append(event([], usage=dict(usage)))
    events.append(b"data: [DONE]\n\n")
    return events


class ChatWire:
    """The Wire of ``POST /v1/chat/completions``."""

    def default_usage(self, reply: Reply, body: Mapping[str, Any]) -> dict[str, Any]:
        return _default_usage(reply, body)

    def stream_usage(self, body: Mapping[str, Any]) -> bool:
        options = body.get("stream_options")
        return isinstance(options, Mapping) and options.get("include_usage") is True

    def completion(self, reply: Reply, model: str, usage: Mapping[str, Any]) -> dict[str, Any]:
        return _completion(reply, model, usage)

    def stream_events(
        self, reply: Reply, model: str, usage: Mapping[str, Any] | None
    ) -> list[bytes]:
        return _stream_events(reply, model, usage)

    def error_body(self, status: int, message: str, error_type: str) -> dict[str, Any]:
        return {"error": {"message": message, "type": error_type, "param": None, "code": None}}


CHAT_WIRE = ChatWire()
