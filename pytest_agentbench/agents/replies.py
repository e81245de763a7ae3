"""The model's reply rendered in the agent's protocol, for the gateway when it translated
the agent's request (agents/translate.py): ``render`` writes a finished ``Generation`` as
one JSON body (agents/reply_bodies.py), or the protocol's SSE stream when the agent
streamed; ``stream_for`` writes that stream live instead (the gateway hands each piece
of the model's text and thinking on as it arrives, then the rest once the reply is in:
tool calls, finish, usage). A Messages stream's ``message_start`` cannot know the input
count yet, its ``message_delta`` says it.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Mapping
from typing import Protocol

from pytest_agentbench.agents import reply_bodies as bodies
from pytest_agentbench.core.jsontypes import JsonObject, JsonValue
from pytest_agentbench.models.base import Generation


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
        whole = bodies.chat_body(generation, model)
    elif protocol == "messages":
        whole = bodies.messages_body(generation, model)
    else:
        whole = bodies.responses_body(
            generation, model, "completed", "msg_" + secrets.token_hex(12)
        )
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
            out += self._chunk({"tool_calls": bodies.chat_calls(generation, True)})
        out += self._chunk({}, bodies.finish(generation))
        if self.usage:
            out += _sse({**self.head, "choices": [], "usage": bodies.chat_usage(generation)})
        return out + b"data: [DONE]\n\n"


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
        for block in bodies.messages_blocks(generation):
            if block["type"] != "tool_use":
                continue
            delta: JsonObject = {
                "type": "input_json_delta",
                "partial_json": json.dumps(block["input"]),
            }
            out += self._block({**block, "input": {}}, delta, close=True)
        finish: JsonObject = {
            "stop_reason": bodies.STOP.get(bodies.finish(generation), "end_turn"),
            "stop_sequence": None,
        }
        usage = bodies.messages_usage(generation)
        out += _sse({"type": "message_delta", "delta": finish, "usage": usage}, "message_delta")
        return out + _sse({"type": "message_stop"}, "message_stop")


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
        self.response = bodies.responses_body(
            Generation(""), self.model, "in_progress", self.message
        )
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
        done = bodies.responses_body(generation, self.model, "completed", self.message)
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
