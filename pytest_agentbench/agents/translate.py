"""An agent's request read into neutral form, for the gateway to send to a model whose
provider serves another wire protocol (the reply goes back through agents/replies.py).

``parse`` reads an agent's request body (Chat Completions ``chat``, Responses
``responses``, Anthropic Messages ``messages``) into the protocol-neutral parts of a
``ModelRequest`` (models/base.py): turns with tool calls and tool results, the system
prompt, the tools, the output limit and sampling. What has no neutral form (images and
documents, stored conversations) raises ``Untranslatable`` naming it; tools that are not
plain functions (server-side and built-in tools, namespaces) are not offered to the
model and are named in ``Parsed.dropped_tools``; what only tunes the provider (thinking
settings and reasoning items handed back, cache-control marks, ``tool_choice``) is
dropped.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from pytest_agentbench.core.fastclass import dataclass
from pytest_agentbench.core.jsontypes import JsonObject, JsonValue
from pytest_agentbench.core.sampling import Sampling
from pytest_agentbench.models.base import ToolSpec


class Untranslatable(ValueError):
    """A request feature the translation does not carry (the message names it)."""


@dataclass(frozen=True)
class Parsed:
    """The neutral parts of an agent's request."""

    messages: tuple[Mapping[str, JsonValue], ...]
    system: str | None
    tools: tuple[ToolSpec, ...]
    max_tokens: int | None
    sampling: Sampling
    stream: bool
    #: the tools not offered to the model (``type:name``): see ``_tools``
    dropped_tools: tuple[str, ...] = ()


def parse(protocol: str, body: Mapping[str, JsonValue]) -> Parsed:
    """``body`` of ``protocol`` in neutral form; raises Untranslatable."""
    if protocol == "chat":
        messages, system = _chat_turns(body.get("messages"))
        tools, dropped = _tools(protocol, body.get("tools"))
        limit = body.get("max_completion_tokens", body.get("max_tokens"))
        stop = body.get("stop")
    elif protocol == "messages":
        messages, later = _messages_turns(body.get("messages"))
        system = "\n\n".join([_text_of(body.get("system"), "system"), *later]).strip() or None
        tools, dropped = _tools(protocol, body.get("tools"))
        limit = body.get("max_tokens")
        stop = body.get("stop_sequences")
    elif protocol == "responses":
        if body.get("previous_response_id"):
            raise Untranslatable(
                "previous_response_id (a conversation stored by the provider): send the "
                "whole input instead"
            )
        messages, system = _responses_turns(body.get("input"))
        instructions = body.get("instructions")
        if isinstance(instructions, str) and instructions:
            system = instructions + ("\n\n" + system if system else "")
        tools, dropped = _tools(protocol, body.get("tools"))
        limit = body.get("max_output_tokens")
        stop = None
    else:
        raise Untranslatable(f"unknown protocol {protocol!r}")
    return Parsed(
        tuple(messages),
        system,
        tools,
        _integer(limit),
        Sampling(
            temperature=_number(body.get("temperature")),
            top_p=_number(body.get("top_p")),
            top_k=_integer(body.get("top_k")),
            seed=_integer(body.get("seed")),
            stop=(stop,)
            if isinstance(stop, str)
            else tuple(str(s) for s in stop)
            if isinstance(stop, list) and stop
            else None,
        ),
        body.get("stream") is True,
        dropped,
    )


def _number(value: JsonValue) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return None


def _integer(value: JsonValue) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _text_of(content: JsonValue, where: str) -> str:
    """The text of a content value: a string, or a list of text parts (any of the
    protocols' text part types); a part of another kind raises Untranslatable."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise Untranslatable(f"{where}: content that is neither text nor a list of parts")
    texts: list[str] = []
    for part in content:
        if isinstance(part, str):
            texts.append(part)
            continue
        kind = part.get("type") if isinstance(part, dict) else None
        text = part.get("text") if isinstance(part, dict) else None
        if kind in ("text", "input_text", "output_text") and isinstance(text, str):
            texts.append(text)
        else:
            raise Untranslatable(f"{where}: a {kind or 'non-text'} part (only text is carried)")
    return "".join(texts)


def _arguments(raw: JsonValue) -> JsonObject:
    if isinstance(raw, dict):
        return raw
    try:
        value = json.loads(raw) if isinstance(raw, str) and raw.strip() else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _chat_turns(items: JsonValue) -> tuple[list[Mapping[str, JsonValue]], str | None]:
    if not isinstance(items, list):
        raise Untranslatable("messages: a list is needed")
    turns: list[Mapping[str, JsonValue]] = []
    system: list[str] = []
    for index, message in enumerate(items):
        if not isinstance(message, dict):
            raise Untranslatable(f"messages[{index}]: not an object")
        role = message.get("role")
        where = f"messages[{index}]"
        if role in ("system", "developer"):
            system.append(_text_of(message.get("content"), where))
        elif role == "user":
            turns.append({"role": "user", "content": _text_of(message.get("content"), where)})
        elif role == "assistant":
            turn: JsonObject = {
                "role": "assistant",
                "content": _text_of(message.get("content"), where),
            }
            calls: list[JsonValue] = []
            found = message.get("tool_calls")
            for call in found if isinstance(found, list) else ():
                function = call.get("function") if isinstance(call, dict) else None
                if not isinstance(call, dict) or not isinstance(function, dict):
                    raise Untranslatable(f"{where}: a tool call that is not a function call")
                calls.append(
                    {
                        "id": str(call.get("id", "")),
                        "name": str(function.get("name", "")),
                        "arguments": _arguments(function.get("arguments")),
                    }
                )
            if calls:
                turn["tool_calls"] = calls
            turns.append(turn)
        elif role == "tool":
            turns.append(
                {
                    "role": "tool",
                    "tool_call_id": str(message.get("tool_call_id", "")),
                    "name": "",
                    "content": _text_of(message.get("content"), where),
                    "is_error": False,
                }
            )
        else:
            raise Untranslatable(f"{where}: role {role!r}")
    return turns, "\n\n".join(system) or None


def _messages_turns(items: JsonValue) -> tuple[list[Mapping[str, JsonValue]], list[str]]:
    """The turns, and the text of ``system`` turns among them (Claude Code sends some),
    which join the system prompt."""
    if not isinstance(items, list):
        raise Untranslatable("messages: a list is needed")
    turns: list[Mapping[str, JsonValue]] = []
    system: list[str] = []
    for index, message in enumerate(items):
        where = f"messages[{index}]"
        role = message.get("role") if isinstance(message, dict) else None
        if isinstance(message, dict) and role == "system":
            system.append(_text_of(message.get("content"), where))
            continue
        if not isinstance(message, dict) or role not in ("user", "assistant"):
            raise Untranslatable(f"{where}: role {role!r} (a user or assistant turn is needed)")
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        if not isinstance(blocks, list):
            raise Untranslatable(f"{where}: content that is neither text nor a list of blocks")
        texts: list[str] = []
        calls: list[JsonValue] = []
        for block in blocks:
            kind = block.get("type") if isinstance(block, dict) else None
            if not isinstance(block, dict):
                raise Untranslatable(f"{where}: a content block that is not an object")
            if kind == "text":
                texts.append(str(block.get("text", "")))
            elif kind in ("thinking", "redacted_thinking"):
                continue  # the other provider cannot check its signature: dropped
            elif kind == "tool_use" and message["role"] == "assistant":
                calls.append(
                    {
                        "id": str(block.get("id", "")),
                        "name": str(block.get("name", "")),
                        "arguments": _arguments(block.get("input")),
                    }
                )
            elif kind == "tool_result" and message["role"] == "user":
                turns.append(
                    {
                        "role": "tool",
                        "tool_call_id": str(block.get("tool_use_id", "")),
                        "name": "",
                        "content": _text_of(block.get("content"), f"{where} tool_result"),
                        "is_error": block.get("is_error") is True,
                    }
                )
            else:
                raise Untranslatable(f"{where}: a {kind} block (not carried across protocols)")
        if message["role"] == "assistant":
            turn: JsonObject = {"role": "assistant", "content": "".join(texts)}
            if calls:
                turn["tool_calls"] = calls
            turns.append(turn)
        elif texts:
            turns.append({"role": "user", "content": "".join(texts)})
    return turns, system


def _responses_turns(items: JsonValue) -> tuple[list[Mapping[str, JsonValue]], str | None]:
    if isinstance(items, str):
        return [{"role": "user", "content": items}], None
    if not isinstance(items, list):
        raise Untranslatable("input: text or a list of items is needed")
    turns: list[JsonObject] = []
    system: list[str] = []
    for index, item in enumerate(items):
        where = f"input[{index}]"
        if not isinstance(item, dict):
            raise Untranslatable(f"{where}: not an object")
        kind = item.get("type", "message")
        if kind == "message":
            role = item.get("role")
            text = _text_of(item.get("content"), where)
            if role in ("system", "developer"):
                system.append(text)
            elif role in ("user", "assistant"):
                turns.append({"role": str(role), "content": text})
            else:
                raise Untranslatable(f"{where}: role {role!r}")
        elif kind == "function_call":
            call: JsonObject = {
                "id": str(item.get("call_id", "")),
                "name": str(item.get("name", "")),
                "arguments": _arguments(item.get("arguments")),
            }
            last = turns[-1] if turns else None
            if last is None or last.get("role") != "assistant":
                last = {"role": "assistant", "content": ""}
                turns.append(last)
            calls = last.get("tool_calls")
            last["tool_calls"] = [*(calls if isinstance(calls, list) else []), call]
        elif kind == "function_call_output":
            output = item.get("output")
            turns.append(
                {
                    "role": "tool",
                    "tool_call_id": str(item.get("call_id", "")),
                    "name": "",
                    "content": _text_of(output, f"{where} output"),
                    "is_error": False,
                }
            )
        elif kind == "reasoning":
            continue  # the provider's own reasoning item: dropped
        else:
            raise Untranslatable(f"{where}: a {kind} item (not carried across protocols)")
    return list(turns), "\n\n".join(system) or None


def _tools(protocol: str, items: JsonValue) -> tuple[tuple[ToolSpec, ...], tuple[str, ...]]:
    """The function tools offered, and the others, which are not offered to the model
    (server tools, built-in tools, namespaces, free-form custom tools): each named by its
    type and name. The model cannot call what it is not offered, so the agent never sees
    a call it did not expect."""
    if items is None:
        return (), ()
    if not isinstance(items, list):
        raise Untranslatable("tools: a list is needed")
    specs: list[ToolSpec] = []
    dropped: list[str] = []
    for index, tool in enumerate(items):
        if not isinstance(tool, dict):
            raise Untranslatable(f"tools[{index}]: not an object")
        kind = tool.get("type")
        source: Mapping[str, JsonValue] = tool
        schema_key = "parameters"
        if protocol == "chat":
            function = tool.get("function")
            function = function if kind == "function" else None
            source = function if isinstance(function, dict) else tool
        elif protocol == "messages":
            schema_key = "input_schema"
        function_like = (
            (kind == "function" and source is not tool)
            if protocol == "chat"
            else kind in (None, "custom")
            if protocol == "messages"
            else kind == "function"
        )
        if not function_like:
            name = source.get("name")
            dropped.append(f"{kind}:{name}" if isinstance(name, str) else str(kind))
            continue
        schema = source.get(schema_key)
        specs.append(
            ToolSpec(
                str(source.get("name", "")),
                str(source.get("description") or ""),
                schema if isinstance(schema, dict) else {"type": "object", "properties": {}},
            )
        )
    return tuple(specs), tuple(dropped)
