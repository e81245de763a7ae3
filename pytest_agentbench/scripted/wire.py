"""What a wire protocol of the scripted provider supplies to the server.

The server does the HTTP: routing, picking the reply, delays, hangs, truncation, errors
with Retry-After. A ``Wire`` turns a reply into one protocol's JSON and SSE bytes. Each
protocol lives in its own module (``wire_chat.py``, ``wire_anthropic.py``,
``wire_responses.py``) and is listed in ``server.WIRES`` under its path.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from pytest_agentbench.scripted.script import Reply


class Wire(Protocol):
    """One protocol's rendering of scripted replies. All methods are pure."""

    def default_usage(self, reply: Reply, body: Mapping[str, Any]) -> dict[str, Any]:
        """The native usage reported when the reply declares none."""
        ...

    def stream_usage(self, body: Mapping[str, Any]) -> bool:
        """Whether a streamed reply carries usage (Chat Completions: only when asked)."""
        ...

    def completion(self, reply: Reply, model: str, usage: Mapping[str, Any]) -> dict[str, Any]:
        """The JSON body of a non-streamed reply."""
        ...

    def stream_events(
        self, reply: Reply, model: str, usage: Mapping[str, Any] | None
    ) -> list[bytes]:
        """The SSE events of a streamed reply, each ending in a blank line. A truncated
        reply stops about half-way, before any finishing event."""
        ...

    def error_body(self, status: int, message: str, error_type: str) -> dict[str, Any]:
        """The JSON body of an error response."""
        ...


def words(text: str) -> int:
    """Whitespace-separated words: the scripted provider's stand-in for tokens."""
    return len(text.split())


def content_words(content: Any) -> int:
    """Words in a message content: a string, or a list of parts with ``text``."""
    if isinstance(content, str):
        return words(content)
    if isinstance(content, list):
        return sum(
            words(part["text"])
            for part in content
            if isinstance(part, Mapping) and isinstance(part.get("text"), str)
        )
    return 0


def message_words(messages: Any) -> int:
    """Words in every message's content."""
    if not isinstance(messages, list):
        return 0
    return sum(
        content_words(message.get("content"))
        for message in messages
        if isinstance(message, Mapping)
    )
