"""Chat Completions shapes on our side of the wire: tool definitions and neutral turns as
the API wants them; and what has arrived of a reply, with tool calls put together from
streamed fragments and inline ``<think>`` split out of the content."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import field

from pytest_agentbench.core.fastclass import dataclass
from pytest_agentbench.core.jsontypes import JsonObject, JsonValue
from pytest_agentbench.core.stream import EventSink, StreamEvent
from pytest_agentbench.models.base import FinishReason, ToolCall, ToolSpec
from pytest_agentbench.models.event_json import StringSlot
from pytest_agentbench.models.http import ignore_events
from pytest_agentbench.models.think import Channel, ThinkSplitter

_SLOT_PATH = ("choices", 0, "delta")
#: The top-level fields of a chunk the client reads (the others may vary freely).
_SLOT_READS = ("choices", "usage", "error")


def chat_tools(tools: Sequence[ToolSpec]) -> list[JsonValue]:
    """Tool definitions as Chat Completions ``function`` tools."""
    out: list[JsonValue] = []
    for tool in tools:
        function: JsonObject = {"name": tool.name}
        if tool.description:
            function["description"] = tool.description
        function["parameters"] = dict(tool.parameters)
        out.append({"type": "function", "function": function})
    return out


def chat_messages(messages: Sequence[Mapping[str, JsonValue]]) -> list[JsonValue]:
    """The neutral turns as Chat Completions messages: an assistant's tool calls get
    JSON-string arguments (content null when it said nothing); a tool result becomes a
    ``tool`` message answering its call; other turns pass as they are."""
    out: list[JsonValue] = []
    for message in messages:
        role = message.get("role")
        tool_calls = message.get("tool_calls")
        if role == "assistant" and tool_calls:
            calls: list[JsonValue] = [
                {
                    "id": call["id"],
                    "type": "function",
                    "function": {"name": call["name"], "arguments": _arguments_text(call)},
                }
                for call in _calls(tool_calls)
            ]
            content = message.get("content") or None
            out.append({"role": "assistant", "content": content, "tool_calls": calls})
        elif role == "tool":
            out.append(
                {
                    "role": "tool",
                    "tool_call_id": message.get("tool_call_id", ""),
                    "content": message.get("content", ""),
                }
            )
        else:
            out.append(dict(message))
    return out


def _calls(tool_calls: JsonValue) -> list[JsonObject]:
    """A neutral assistant turn's ``tool_calls``: a list of call objects (anything else
    is a caller's mistake, named)."""
    if not isinstance(tool_calls, list | tuple) or not all(isinstance(c, dict) for c in tool_calls):
        raise TypeError(f"tool_calls must be a list of call objects, got {tool_calls!r}")
    return [call for call in tool_calls if isinstance(call, dict)]


def _arguments_text(call: JsonObject) -> str:
    """A neutral call's arguments as the JSON text the model is shown; a string (e.g. the
    model's own malformed arguments) is sent back as it was."""
    arguments = call.get("arguments")
    if isinstance(arguments, str):
        return arguments
    if not arguments:
        arguments = {}
    if not isinstance(arguments, dict):
        raise TypeError(f"tool call arguments must be an object or a string: {arguments!r}")
    return json.dumps(arguments, ensure_ascii=False)


@dataclass
class StreamedCall:
    """A tool call being streamed: its id and name, and its argument fragments."""

    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)

    def tool_call(self, index: int) -> ToolCall:
        """The call as parsed: arguments a JSON object, or None with the raw text kept.
        Empty arguments (some servers send "" for a call without parameters) are {}."""
        raw = "".join(self.arguments)
        try:
            parsed = json.loads(raw) if raw.strip() else {}
        except ValueError:
            parsed = None
        arguments = parsed if isinstance(parsed, dict) else None
        return ToolCall(self.id or f"call_{index}", self.name, arguments, raw)


_FINISH_REASONS: dict[str, FinishReason] = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "content_filter": "content_filter",
}


def map_finish_reason(native: JsonValue) -> FinishReason | None:
    """The provider's finish reason in the closed set; None when none was reported."""
    if not native:
        return None
    return _FINISH_REASONS.get(str(native), "other")


@dataclass
class ChatReceived:
    """What has arrived so far for one request (kept for the partial on failure)."""

    splitter: ThinkSplitter | None
    status: int | None = None
    text: list[str] = field(default_factory=list)
    thinking: list[str] = field(default_factory=list)
    calls: dict[int, StreamedCall] = field(default_factory=dict)
    finish: str | None = None
    usage: JsonObject | None = None
    done: bool = False
    #: The stream's repeating delta once learned: its slot and the channel of its text.
    slot: StringSlot | None = None
    slot_channel: Channel = "text"
    slot_tries: int = 0
    slot_previous: JsonObject | None = None

    @property
    def anything(self) -> bool:
        return bool(self.text or self.thinking or self.calls or self.usage or self.finish)

    def learn_slot(self, data: str, chunk: JsonObject, delta: JsonObject) -> None:
        """After a chunk (decoded from ``data``) whose only effect was the text of one
        delta field: learn where that text sits, so the next chunks that differ only there
        skip decoding. Only when the chunk reports no usage and no finish reason, and from
        the second such chunk on (a short reply never pays for learning)."""
        if self.slot_tries >= StringSlot.TRIES:
            return
        content = delta.get("content")
        reasoning_content = delta.get("reasoning_content")
        reasoning = delta.get("reasoning")
        calls = delta.get("tool_calls")
        if isinstance(calls, list) and calls:
            return
        key: str
        channel: Channel
        if _text(content):
            key, channel, idle = "content", "text", not _text(reasoning_content or reasoning)
        elif _text(reasoning_content):
            key, channel, idle = "reasoning_content", "thinking", not _text(reasoning)
        elif _text(reasoning):
            key, channel, idle = "reasoning", "thinking", not reasoning_content
        else:
            return
        previous, self.slot_previous = self.slot_previous, chunk
        if previous is None or not idle:  # idle: the fields that do not vary do nothing
            return
        self.slot_tries += 1
        self.slot = StringSlot.learn(data, chunk, _SLOT_PATH, key, previous, _SLOT_READS)
        self.slot_channel = channel

    def take_slot(self, piece: str, emit: EventSink) -> None:
        """The text of a chunk that matched the slot: what ``take_message`` would do with
        its delta."""
        if not piece:
            return
        if self.slot_channel == "text":
            self.take_content(piece, emit)
        else:
            self._add("thinking", piece, emit)

    def tool_calls(self) -> tuple[ToolCall, ...]:
        return tuple(self.calls[index].tool_call(index) for index in sorted(self.calls))

    def take_message(self, message: JsonObject, emit: EventSink) -> None:
        """A message or a stream delta (a JSON object): thinking (``reasoning_content``, or
        ``reasoning`` as vLLM/Ollama name it), content (through the think splitter), tool
        calls."""
        thinking = message.get("reasoning_content") or message.get("reasoning")
        if isinstance(thinking, str) and thinking:
            self._add("thinking", thinking, emit)
        content = message.get("content")
        if isinstance(content, str) and content:
            self.take_content(content, emit)
        calls = message.get("tool_calls")
        if isinstance(calls, list):
            for position, fragment in enumerate(calls):
                if isinstance(fragment, dict):
                    self._take_tool_call(position, fragment, emit)

    def take_content(self, content: str, emit: EventSink) -> None:
        """Answer text (non-empty), through the think splitter until it has decided."""
        splitter = self.splitter
        if splitter is None or splitter.decided:
            self.text.append(content)
            if emit is not ignore_events:
                emit(StreamEvent("text", content))
        else:
            for channel, piece in splitter.feed(content):
                self._add(channel, piece, emit)

    def flush(self, emit: EventSink) -> None:
        """The content the think splitter still holds, at the end of the content."""
        if self.splitter is not None:
            for channel, piece in self.splitter.flush():
                self._add(channel, piece, emit)

    def _add(self, channel: Channel, piece: str, emit: EventSink) -> None:
        (self.text if channel == "text" else self.thinking).append(piece)
        if emit is not ignore_events:
            emit(StreamEvent(channel, piece))

    def _take_tool_call(self, position: int, fragment: JsonObject, emit: EventSink) -> None:
        """One ``tool_calls`` entry: a call's first fragment carries its id and name, later
        ones (same ``index``) pieces of its arguments. A server that sends no index gets
        the entry's position; empty ids and names in later fragments change nothing."""
        index = fragment.get("index")
        if not isinstance(index, int) or isinstance(index, bool):
            index = position
        call = self.calls.setdefault(index, StreamedCall())
        function = fragment.get("function")
        function = function if isinstance(function, dict) else {}
        call_id = fragment.get("id")
        if isinstance(call_id, str) and not call.id:
            call.id = call_id
        name = function.get("name")
        if isinstance(name, str) and not call.name:
            call.name = name
        piece = function.get("arguments")
        if isinstance(piece, dict):
            piece = json.dumps(piece, ensure_ascii=False)
        piece = piece if isinstance(piece, str) else ""
        if piece:
            call.arguments.append(piece)
        if emit is not ignore_events:
            data = {"index": index, "id": call.id, "name": call.name, "arguments_delta": piece}
            emit(StreamEvent("tool_call", data=data))


def _text(value: JsonValue) -> bool:
    return isinstance(value, str) and bool(value)
