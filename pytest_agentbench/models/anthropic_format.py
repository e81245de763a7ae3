"""The neutral conversation as Anthropic Messages turns (the request side of the
Anthropic client, as ``chat_format.py`` is for Chat Completions)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any


def _tool_input(arguments: Any) -> dict[str, Any]:
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return {}
    return dict(arguments) if isinstance(arguments, Mapping) else {}


def anthropic_messages(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The neutral turns as Messages API turns: an assistant's ``reasoning_blocks``
    (thinking with its signature, redacted_thinking) come first, unchanged, as the API
    requires when tools are used with thinking; its tool calls become ``tool_use`` blocks
    after its text; tool results become ``tool_result`` blocks of a user turn, consecutive
    results sharing one turn; other turns pass as they are."""
    out: list[dict[str, Any]] = []
    results: list[dict[str, Any]] | None = None
    for message in messages:
        role = message.get("role")
        if role == "tool":
            block = {
                "type": "tool_result",
                "tool_use_id": message.get("tool_call_id", ""),
                "content": message.get("content", ""),
                "is_error": bool(message.get("is_error", False)),
            }
            if results is None:
                results = []
                out.append({"role": "user", "content": results})
            results.append(block)
            continue
        results = None
        content = message.get("content", "")
        calls = message.get("tool_calls")
        reasoning = message.get("reasoning_blocks") if role == "assistant" else None
        if role == "assistant" and (calls or reasoning):
            blocks: list[dict[str, Any]] = [dict(block) for block in reasoning or ()]
            blocks += [{"type": "text", "text": content}] if content else []
            blocks += [
                {
                    "type": "tool_use",
                    "id": call["id"],
                    "name": call["name"],
                    "input": _tool_input(call.get("arguments")),
                }
                for call in calls or ()
            ]
            out.append({"role": "assistant", "content": blocks})
        else:
            out.append({"role": role, "content": content})
    return out
