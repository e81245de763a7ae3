"""Protocol translation for the gateway: an agent's request in one wire protocol, sent to
a model whose provider serves another, and the reply rendered back in the agent's.

``parse`` reads an agent's request body (Chat Completions ``chat``, Responses
``responses``, Anthropic Messages ``messages``) into the protocol-neutral parts of a
``ModelRequest`` (models/base.py): turns with tool calls and tool results, the system
prompt, the tools, the output limit and sampling. What has no neutral form (images and
documents, stored conversations) raises ``Untranslatable`` naming it; tools that are not
plain functions (server-side and built-in tools, namespaces) are not offered to the
model and are named in ``Parsed.dropped_tools``; what only tunes the provider (thinking
settings and reasoning items handed back, cache-control marks, ``tool_choice``) is
dropped.

``render`` writes a finished ``Generation`` as the agent's protocol: one JSON body, or
the protocol's SSE stream when the agent streamed; ``stream_for`` writes that stream
live instead (the gateway hands each piece of the model's text and thinking on as it
arrives, then the rest once the reply is in): text, thinking (Messages: a block with an
empty signature, there being none; Chat: ``reasoning_content``; Responses: not handed
on), tool calls (ids, names, JSON arguments, each whole), the finish reason (length ↔
max_tokens / incomplete, tool calls ↔ tool_use, stop ↔ end_turn) and the model's usage
in the protocol's own fields (Messages: an input count the model did not report is null,
never 0; a stream's ``message_start`` cannot know it yet, its ``message_delta`` says it).
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from pytest_agentbench.core.jsontypes import JsonObject, JsonValue
from pytest_agentbench.core.sampling import Sampling
from pytest_agentbench.models.base import Generation, ToolCall, ToolSpec


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


# --- rendering ---------------------------------------------------------------------------

_STOP = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use"}


def _arguments_text(call: ToolCall) -> str:
    if call.arguments is not None:
        return json.dumps(dict(call.arguments))
    return call.raw_arguments or "{}"


def _finish(generation: Generation) -> str:
    if generation.tool_calls:
        return "tool_calls"
    return generation.finish_reason or "stop"


def _n(value: int | None) -> int:
    return value or 0


def _prompt(generation: Generation) -> int:
    usage = generation.usage
    return _n(usage.input) + _n(usage.cache_read) + _n(usage.cache_write)


def _sse(data: JsonValue, event: str | None = None) -> bytes:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(data)}\n\n".encode()


def render(
    protocol: str, generation: Generation, model: str, body: Mapping[str, JsonValue]
) -> tuple[str, bytes]:
    """The agent's whole reply: its content type and bytes (the protocol's SSE stream
    when ``body`` streamed, all of it at once)."""
    if body.get("stream") is True:
        live = stream_for(protocol, model, body)
        head = live.thinking(generation.thinking) + live.text(generation.text)
        return SSE, head + live.end(generation)
    if protocol == "chat":
        whole = _chat_body(generation, model)
    elif protocol == "messages":
        whole = _messages_body(generation, model)
    else:
        whole = _responses_body(generation, model, "completed", "msg_" + secrets.token_hex(12))
    return "application/json", json.dumps(whole).encode()


#: The content type of a streamed reply.
SSE = "text/event-stream"


class Stream(Protocol):
    """A streamed reply in one protocol, written as the model's reply arrives: ``text``
    the bytes for the next piece of answer text (the stream's head before the first),
    ``end`` the rest once the reply is in (tool calls, finish, usage)."""

    def text(self, piece: str) -> bytes: ...

    def thinking(self, piece: str) -> bytes: ...

    def end(self, generation: Generation) -> bytes: ...


def stream_for(protocol: str, model: str, body: Mapping[str, JsonValue]) -> Stream:
    """The stream writer for an agent's ``protocol`` (``body`` says what it asked for)."""
    if protocol == "chat":
        options = body.get("stream_options")
        usage = isinstance(options, dict) and options.get("include_usage") is True
        return _ChatStream(model, usage)
    if protocol == "messages":
        return _MessagesStream(model)
    return _ResponsesStream(model)


def _chat_usage(generation: Generation) -> JsonObject:
    prompt, output = _prompt(generation), _n(generation.usage.output)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": output,
        "total_tokens": prompt + output,
        "prompt_tokens_details": {"cached_tokens": _n(generation.usage.cache_read)},
        "completion_tokens_details": {"reasoning_tokens": _n(generation.usage.reasoning)},
    }


def _chat_calls(generation: Generation, streamed: bool) -> list[JsonValue]:
    calls: list[JsonValue] = []
    for index, call in enumerate(generation.tool_calls):
        entry: JsonObject = {
            "id": call.id,
            "type": "function",
            "function": {"name": call.name, "arguments": _arguments_text(call)},
        }
        calls.append({"index": index, **entry} if streamed else entry)
    return calls


def _chat_body(generation: Generation, model: str) -> JsonObject:
    message: JsonObject = {"role": "assistant", "content": generation.text or None}
    if generation.thinking:  # where DeepSeek, vLLM and llama.cpp put it
        message["reasoning_content"] = generation.thinking
    if generation.tool_calls:
        message["tool_calls"] = _chat_calls(generation, False)
    return {
        "id": "chatcmpl-" + secrets.token_hex(12),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": _finish(generation)}],
        "usage": _chat_usage(generation),
    }


class _ChatStream:
    def __init__(self, model: str, usage: bool) -> None:
        self.usage = usage
        self.head: JsonObject = {
            "id": "chatcmpl-" + secrets.token_hex(12),
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": model,
        }
        self.started = False

    def _chunk(self, delta: JsonObject, finish: str | None = None) -> bytes:
        choice: JsonObject = {"index": 0, "delta": delta, "finish_reason": finish}
        return _sse({**self.head, "choices": [choice]})

    def _start(self) -> bytes:
        if self.started:
            return b""
        self.started = True
        return self._chunk({"role": "assistant", "content": ""})

    def text(self, piece: str) -> bytes:
        return self._start() + (self._chunk({"content": piece}) if piece else b"")

    def thinking(self, piece: str) -> bytes:
        return self._start() + (self._chunk({"reasoning_content": piece}) if piece else b"")

    def end(self, generation: Generation) -> bytes:
        out = self._start()
        if generation.tool_calls:
            out += self._chunk({"tool_calls": _chat_calls(generation, True)})
        out += self._chunk({}, _finish(generation))
        if self.usage:
            out += _sse({**self.head, "choices": [], "usage": _chat_usage(generation)})
        return out + b"data: [DONE]\n\n"


def _messages_usage(generation: Generation) -> JsonObject:
    """The model's usage in Anthropic's fields: a count the model did not report is null
    (unknown), never 0 (which would tell the agent its prompt was free)."""
    usage = generation.usage
    return {
        "input_tokens": usage.input,
        "output_tokens": _n(usage.output),
        "cache_read_input_tokens": usage.cache_read,
        "cache_creation_input_tokens": usage.cache_write,
    }


def _messages_blocks(generation: Generation) -> list[JsonObject]:
    blocks: list[JsonObject] = []
    if generation.thinking:  # no signature: the agent's next request drops it again
        blocks.append({"type": "thinking", "thinking": generation.thinking, "signature": ""})
    if generation.text or not generation.tool_calls:
        blocks.append({"type": "text", "text": generation.text})
    for call in generation.tool_calls:
        arguments: JsonObject = dict(call.arguments) if call.arguments is not None else {}
        blocks.append({"type": "tool_use", "id": call.id, "name": call.name, "input": arguments})
    return blocks


def _messages_body(generation: Generation, model: str) -> JsonObject:
    content: list[JsonValue] = list(_messages_blocks(generation))
    return {
        "id": "msg_" + secrets.token_hex(12),
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": _STOP.get(_finish(generation), "end_turn"),
        "stop_sequence": None,
        "usage": _messages_usage(generation),
    }


class _MessagesStream:
    def __init__(self, model: str) -> None:
        self.model = model
        self.ident = "msg_" + secrets.token_hex(12)
        self.started = False
        self.blocks = 0  # content blocks opened
        self.open: str | None = None  # the kind of the block still open
        self.texts = 0  # text blocks opened

    def _start(self) -> bytes:
        if self.started:
            return b""
        self.started = True
        message: JsonObject = {
            "id": self.ident,
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            # not known before the model's reply ends: said in message_delta
            "usage": {"input_tokens": None, "output_tokens": 0},
        }
        return _sse({"type": "message_start", "message": message}, "message_start")

    def _block(self, opening: JsonObject, delta: JsonObject | None, close: bool) -> bytes:
        index = self.blocks
        self.blocks += 1
        out = _sse(
            {"type": "content_block_start", "index": index, "content_block": opening},
            "content_block_start",
        )
        if delta is not None:
            out += self._delta(index, delta)
        if close:
            out += _sse({"type": "content_block_stop", "index": index}, "content_block_stop")
        return out

    @staticmethod
    def _delta(index: int, delta: JsonObject) -> bytes:
        data: JsonObject = {"type": "content_block_delta", "index": index, "delta": delta}
        return _sse(data, "content_block_delta")

    def _close(self) -> bytes:
        """End the open block; a thinking block ends with its (empty) signature."""
        if self.open is None:
            return b""
        index, out = self.blocks - 1, b""
        if self.open == "thinking":
            out = self._delta(index, {"type": "signature_delta", "signature": ""})
        self.open = None
        return out + _sse({"type": "content_block_stop", "index": index}, "content_block_stop")

    def _piece(self, kind: str, piece: str) -> bytes:
        out = self._start()
        if not piece:
            return out
        field = "text" if kind == "text" else "thinking"
        delta: JsonObject = {"type": f"{field}_delta", field: piece}
        if self.open == kind:
            return out + self._delta(self.blocks - 1, delta)
        out += self._close()
        self.open = kind
        self.texts += kind == "text"
        opening: JsonObject = {"type": "text", "text": ""}
        if kind == "thinking":
            opening = {"type": "thinking", "thinking": "", "signature": ""}
        return out + self._block(opening, delta, close=False)

    def text(self, piece: str) -> bytes:
        return self._piece("text", piece)

    def thinking(self, piece: str) -> bytes:
        return self._piece("thinking", piece)

    def end(self, generation: Generation) -> bytes:
        out = self._start() + self._close()
        if not self.texts and not generation.tool_calls:
            out += self._block({"type": "text", "text": ""}, None, close=True)
        for block in _messages_blocks(generation):
            if block["type"] != "tool_use":
                continue
            delta: JsonObject = {
                "type": "input_json_delta",
                "partial_json": json.dumps(block["input"]),
            }
            out += self._block({**block, "input": {}}, delta, close=True)
        finish: JsonObject = {
            "stop_reason": _STOP.get(_finish(generation), "end_turn"),
            "stop_sequence": None,
        }
        usage = _messages_usage(generation)
        out += _sse({"type": "message_delta", "delta": finish, "usage": usage}, "message_delta")
        return out + _sse({"type": "message_stop"}, "message_stop")


def _responses_output(generation: Generation, message: str) -> list[JsonObject]:
    output: list[JsonObject] = []
    if generation.text or not generation.tool_calls:
        text: JsonObject = {"type": "output_text", "text": generation.text, "annotations": []}
        output.append(
            {
                "type": "message",
                "id": message,
                "status": "completed",
                "role": "assistant",
                "content": [text],
            }
        )
    for call in generation.tool_calls:
        output.append(
            {
                "type": "function_call",
                "id": "fc_" + secrets.token_hex(12),
                "call_id": call.id,
                "name": call.name,
                "arguments": _arguments_text(call),
                "status": "completed",
            }
        )
    return output


def _responses_body(generation: Generation, model: str, status: str, message: str) -> JsonObject:
    usage = generation.usage
    prompt, produced = _prompt(generation), _n(usage.output)
    incomplete = _finish(generation) == "length"
    items: list[JsonValue] = list(_responses_output(generation, message))
    return {
        "id": "resp_" + secrets.token_hex(12),
        "object": "response",
        "created_at": int(time.time()),
        "status": "incomplete" if incomplete and status == "completed" else status,
        "incomplete_details": {"reason": "max_output_tokens"} if incomplete else None,
        "error": None,
        "model": model,
        "output": items,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": {
            "input_tokens": prompt,
            "input_tokens_details": {"cached_tokens": _n(usage.cache_read)},
            "output_tokens": produced,
            "output_tokens_details": {"reasoning_tokens": _n(usage.reasoning)},
            "total_tokens": prompt + produced,
        },
    }


class _ResponsesStream:
    def __init__(self, model: str) -> None:
        self.model = model
        self.message = "msg_" + secrets.token_hex(12)
        self.number = 0
        self.response: JsonObject | None = None
        self.open = False  # the message item is open
        self.parts: list[str] = []

    def _event(self, kind: str, **data: JsonValue) -> bytes:
        self.number += 1
        return _sse({"type": kind, "sequence_number": self.number - 1, **data}, kind)

    def _start(self) -> bytes:
        if self.response is not None:
            return b""
        self.response = _responses_body(Generation(""), self.model, "in_progress", self.message)
        self.response["output"] = []
        self.response["usage"] = None
        return self._event("response.created", response=self.response)

    def _where(self) -> JsonObject:
        return {"output_index": 0, "item_id": self.message, "content_index": 0}

    def text(self, piece: str) -> bytes:
        out = self._start()
        if not self.open:
            self.open = True
            item: JsonObject = {
                "type": "message",
                "id": self.message,
                "status": "in_progress",
                "role": "assistant",
                "content": [],
            }
            out += self._event("response.output_item.added", output_index=0, item=item)
            part: JsonObject = {"type": "output_text", "text": "", "annotations": []}
            out += self._event("response.content_part.added", **self._where(), part=part)
        if piece:
            self.parts.append(piece)
            out += self._event("response.output_text.delta", **self._where(), delta=piece)
        return out

    def thinking(self, piece: str) -> bytes:
        return b""  # a reasoning item would need the provider's encrypted content

    def end(self, generation: Generation) -> bytes:
        out = self._start()
        if not self.open and not generation.tool_calls:
            out += self.text("")
        done = _responses_body(generation, self.model, "completed", self.message)
        started = self.response or {}
        done["id"], done["created_at"] = (
            started.get("id"),
            started.get("created_at"),
        )  # one response
        output = done["output"]
        items = output if isinstance(output, list) else []
        for index, item in enumerate(items):
            if not isinstance(item, dict):
                continue
            if item["type"] == "message":
                text = "".join(self.parts)
                out += self._event("response.output_text.done", **self._where(), text=text)
                part: JsonObject = {"type": "output_text", "text": text, "annotations": []}
                out += self._event("response.content_part.done", **self._where(), part=part)
            else:
                added = {**item, "status": "in_progress", "arguments": ""}
                out += self._event("response.output_item.added", output_index=index, item=added)
                where: JsonObject = {"output_index": index, "item_id": item["id"]}
                arguments = item["arguments"]
                out += self._event(
                    "response.function_call_arguments.delta", **where, delta=arguments
                )
                out += self._event(
                    "response.function_call_arguments.done", **where, arguments=arguments
                )
            out += self._event("response.output_item.done", output_index=index, item=item)
        final = "response.incomplete" if done["status"] == "incomplete" else "response.completed"
        return out + self._event(final, response=done)
