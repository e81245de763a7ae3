"""A finished ``Generation`` as the whole JSON body of each agent protocol, and the parts
of it a stream repeats (agents/replies.py writes the streams from them).

The bodies carry text, thinking (Messages: a block with an empty signature, there being
none; Chat: ``reasoning_content``; Responses: not handed on), tool calls (ids, names,
JSON arguments, each whole), the finish reason (length ↔ max_tokens / incomplete, tool
calls ↔ tool_use, stop ↔ end_turn) and the model's usage in the protocol's own fields
(Messages: an input count the model did not report is null, never 0).
"""

from __future__ import annotations

import json
import secrets
import time

from pytest_agentbench.core.jsontypes import JsonObject, JsonValue
from pytest_agentbench.models.base import Generation, ToolCall

#: a finish reason as a Messages ``stop_reason``
STOP = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use"}


def _arguments_text(call: ToolCall) -> str:
    if call.arguments is not None:
        return json.dumps(dict(call.arguments))
    return call.raw_arguments or "{}"


def finish(generation: Generation) -> str:
    if generation.tool_calls:
        return "tool_calls"
    return generation.finish_reason or "stop"


def _n(value: int | None) -> int:
    return value or 0


def _prompt(generation: Generation) -> int:
    usage = generation.usage
    return _n(usage.input) + _n(usage.cache_read) + _n(usage.cache_write)


def chat_usage(generation: Generation) -> JsonObject:
    prompt, output = _prompt(generation), _n(generation.usage.output)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": output,
        "total_tokens": prompt + output,
        "prompt_tokens_details": {"cached_tokens": _n(generation.usage.cache_read)},
        "completion_tokens_details": {"reasoning_tokens": _n(generation.usage.reasoning)},
    }


def chat_calls(generation: Generation, streamed: bool) -> list[JsonValue]:
    calls: list[JsonValue] = []
    for index, call in enumerate(generation.tool_calls):
        entry: JsonObject = {
            "id": call.id,
            "type": "function",
            "function": {"name": call.name, "arguments": _arguments_text(call)},
        }
        calls.append({"index": index, **entry} if streamed else entry)
    return calls


def chat_body(generation: Generation, model: str) -> JsonObject:
    message: JsonObject = {"role": "assistant", "content": generation.text or None}
    if generation.thinking:  # where DeepSeek, vLLM and llama.cpp put it
        message["reasoning_content"] = generation.thinking
    if generation.tool_calls:
        message["tool_calls"] = chat_calls(generation, False)
    return {
        "id": "chatcmpl-" + secrets.token_hex(12),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish(generation)}],
        "usage": chat_usage(generation),
    }


def messages_usage(generation: Generation) -> JsonObject:
    """The model's usage in Anthropic's fields: a count the model did not report is null
    (unknown), never 0 (which would tell the agent its prompt was free)."""
    usage = generation.usage
    return {
        "input_tokens": usage.input,
        "output_tokens": _n(usage.output),
        "cache_read_input_tokens": usage.cache_read,
        "cache_creation_input_tokens": usage.cache_write,
    }


def messages_blocks(generation: Generation) -> list[JsonObject]:
    blocks: list[JsonObject] = []
    if generation.thinking:  # no signature: the agent's next request drops it again
        blocks.append({"type": "thinking", "thinking": generation.thinking, "signature": ""})
    if generation.text or not generation.tool_calls:
        blocks.append({"type": "text", "text": generation.text})
    for call in generation.tool_calls:
        arguments: JsonObject = dict(call.arguments) if call.arguments is not None else {}
        blocks.append({"type": "tool_use", "id": call.id, "name": call.name, "input": arguments})
    return blocks


def messages_body(generation: Generation, model: str) -> JsonObject:
    content: list[JsonValue] = list(messages_blocks(generation))
    return {
        "id": "msg_" + secrets.token_hex(12),
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": STOP.get(finish(generation), "end_turn"),
        "stop_sequence": None,
        "usage": messages_usage(generation),
    }


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


def responses_body(generation: Generation, model: str, status: str, message: str) -> JsonObject:
    usage = generation.usage
    prompt, produced = _prompt(generation), _n(usage.output)
    incomplete = finish(generation) == "length"
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
