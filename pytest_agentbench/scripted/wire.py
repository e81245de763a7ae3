"""What a wire protocol of the scripted provider supplies to the server.

The server does the HTTP: routing, picking the reply, delays, hangs, truncation, errors
with Retry-After. A ``Wire`` turns a reply into one protocol's JSON and SSE bytes. Each
protocol lives in its own module (``wire_chat.py``, ``wire_anthropic.py``,
``wire_responses.py``) and is listed in ``handler.WIRES`` under its path.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Protocol

from pytest_agentbench.core.fastclass import dataclass
from pytest_agentbench.core.jsontypes import JsonObject, JsonValue
from pytest_agentbench.scripted.script import Reply


@dataclass(frozen=True)
class Refusal:
    """A request the real API would refuse with HTTP 400: what is wrong, and the request
    field it names (OpenAI's ``param``) when there is one."""

    message: str
    param: str | None = None


class Wire(Protocol):
    """One protocol's rendering of scripted replies. All methods are pure.

    ``body`` is the request's JSON: a reply is rendered for the request it answers (a
    stop sequence it asked for, for example)."""

    def check(self, body: Mapping[str, JsonValue], replies: Sequence[Reply]) -> Refusal | None:
        """A check the real API makes on a request (``replies``: the script that would
        answer it), or None when it passes."""
        ...

    def default_usage(self, reply: Reply, body: Mapping[str, JsonValue]) -> JsonObject:
        """The native usage reported when the reply declares none."""
        ...

    def declared_usage(self, usage: Mapping[str, JsonValue]) -> JsonObject:
        """A reply's declared usage in this protocol's shape (``scripted/usage.py``)."""
        ...

    def stream_usage(self, body: Mapping[str, JsonValue]) -> bool:
        """Whether a streamed reply carries usage (Chat Completions: only when asked)."""
        ...

    def completion(
        self,
        reply: Reply,
        model: str,
        usage: Mapping[str, JsonValue],
        body: Mapping[str, JsonValue],
    ) -> JsonObject:
        """The JSON body of a non-streamed reply."""
        ...

    def stream_events(
        self,
        reply: Reply,
        model: str,
        usage: Mapping[str, JsonValue] | None,
        body: Mapping[str, JsonValue],
    ) -> list[bytes]:
        """The SSE events of a streamed reply, each ending in a blank line. A truncated
        reply stops about half-way, before any finishing event."""
        ...

    def error_body(
        self, status: int, message: str, error_type: str, param: str | None = None
    ) -> JsonObject:
        """The JSON body of an error response. An empty ``error_type`` means the
        status's own type in this protocol (429 → OpenAI ``requests`` with code
        ``rate_limit_exceeded``, Anthropic ``rate_limit_error``; 529 → Anthropic
        ``overloaded_error``)."""
        ...


def openai_error_body(
    status: int, message: str, error_type: str, param: str | None = None
) -> JsonObject:
    """An OpenAI error (Chat Completions and Responses share it). By default a 429 is a
    request-rate limit (type ``requests``, code ``rate_limit_exceeded``), another 5xx a
    ``server_error``, anything else an ``invalid_request_error``."""
    code = None
    if not error_type:
        if status == 429:
            error_type, code = "requests", "rate_limit_exceeded"
        else:
            error_type = "server_error" if status >= 500 else "invalid_request_error"
    elif status == 429:
        code = "rate_limit_exceeded"
    return {"error": {"message": message, "type": error_type, "param": param, "code": code}}


def stop_at(reply: Reply, sequences: JsonValue, finish_reason: str) -> tuple[Reply, str | None]:
    """The reply as generated for a request with stop sequences (a string or a list of
    strings): when its text contains one, it ends just before the earliest match (the
    sequence is not sent, nor anything after it: no tool calls) with ``finish_reason``;
    the matched sequence is returned too (None, and the reply unchanged, without one)."""
    if isinstance(sequences, str):
        sequences = [sequences]
    if not isinstance(sequences, list):
        return reply, None
    text = reply.full_text
    found = [(text.find(s), i, s) for i, s in enumerate(sequences) if isinstance(s, str) and s]
    hits = [hit for hit in found if hit[0] >= 0]
    if not hits:
        return reply, None
    at, _, sequence = min(hits)
    cut = dataclasses.replace(
        reply, text=text[:at], repeat=1, tool_calls=(), finish_reason=finish_reason
    )
    return cut, sequence


def words(text: str) -> int:
    """Whitespace-separated words: the scripted provider's stand-in for tokens."""
    return len(text.split())


def content_words(content: JsonValue) -> int:
    """Words in a message content: a string, or a list of parts with ``text``."""
    if isinstance(content, str):
        return words(content)
    if isinstance(content, list):
        return sum(
            words(text)
            for part in content
            if isinstance(part, dict) and isinstance(text := part.get("text"), str)
        )
    return 0


def message_words(messages: JsonValue) -> int:
    """Words in every message's content."""
    if not isinstance(messages, list):
        return 0
    return sum(
        content_words(message.get("content"))
        for message in messages
        if isinstance(message, Mapping)
    )
