"""The neutral conversation as Anthropic Messages turns (the request side of the
Anthropic client, as ``chat_format.py`` is for Chat Completions)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from pytest_agentbench.core.jsontypes import JsonObject, JsonValue


def _tool_input(arguments: JsonValue) -> JsonObject:
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return {}
    return dict(arguments) if isinstance(arguments, dict) else {}


def anthropic_messages(messages: Sequence[Mapping[str, JsonValue]]) -> list[JsonValue]:
    """The neutral turns as Messages API turns: an assistant's ``reasoning_blocks``
    (thinking with its signature, redacted_thinking) come first, unchanged, as the API
    requires when tools are used with thinking; its tool calls become ``tool_use`` blocks
    after its text; tool results become ``tool_result`` blocks of a user turn, consecutive
    results sharing one turn; other turns pass as they are."""
    out: list[JsonValue] = []
    results: list[JsonValue] | None = None
    for message in messages:
        role = message.get("role")
        if role == "tool":
            block: JsonObject = {
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
            blocks: list[JsonValue] = [dict(block) for block in _objects(reasoning)]
            blocks += [{"type": "text", "text": content}] if content else []
            blocks += [
                {
                    "type": "tool_use",
                    "id": call["id"],
                    "name": call["name"],
                    "input": _tool_input(call.get("arguments")),
                }
                for call in _objects(calls)
            ]
            out.append({"role": "assistant", "content": blocks})
        else:
            out.append({"role": role, "content": content})
    return out


def _objects(items: JsonValue) -> list[JsonObject]:
    """A neutral turn's list of objects (``tool_calls``, ``reasoning_blocks``); none when
    absent. Anything else is a caller's mistake, named."""
    if not items:
        return []
    if not isinstance(items, list | tuple) or not all(isinstance(i, dict) for i in items):
        raise TypeError(f"expected a list of objects, got {items!r}")
    return [item for item in items if isinstance(item, dict)]
