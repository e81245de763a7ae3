"""Responses shapes on our side of the wire (as ``chat_format.py`` is for Chat
Completions): the neutral turns as input items; and what has arrived of a reply, with
function calls put together from streamed pieces and reasoning parts as paragraphs."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import field

from pytest_agentbench.core.fastclass import dataclass
from pytest_agentbench.core.jsontypes import JsonObject, JsonValue
from pytest_agentbench.core.stream import EventSink, StreamEvent
from pytest_agentbench.models.base import FinishReason, ToolCall
from pytest_agentbench.models.event_json import StringSlot
from pytest_agentbench.models.http import ignore_events

_INCOMPLETE: dict[str, FinishReason] = {
    "max_output_tokens": "length",
    "content_filter": "content_filter",
}
#: The fields of a delta event the client reads (the others may vary freely).
_SLOT_READS = ("type", "error", "delta", "item_id", "summary_index", "content_index")


def map_finish_reason(
    status: str | None, incomplete_reason: str | None, has_tool_calls: bool
) -> FinishReason | None:
    """A response's ``status`` (and ``incomplete_details.reason``) in the closed set; None
    when the response never finished."""
    if status is None:
        return None
    if status == "completed":
        return "tool_calls" if has_tool_calls else "stop"
    if status == "incomplete":
        return _INCOMPLETE.get(incomplete_reason or "", "other")
    return "other"


#: Which thinking part a delta belongs to: the item id and the summary (or content) index
#: as the event gave them (a new part starts a new paragraph).
Part = tuple[JsonValue, JsonValue]


@dataclass
class ResponsesCall:
    """One function call as it arrives: ``call_id`` and name first, arguments in pieces."""

    index: int
    call_id: str
    name: str
    arguments: list[str] = field(default_factory=list)


@dataclass
class ResponsesReceived:
    """What has arrived so far for one request (kept for the partial on failure)."""

    status: int | None = None
    text: list[str] = field(default_factory=list)
    thinking: list[str] = field(default_factory=list)
    calls: dict[JsonValue, ResponsesCall] = field(default_factory=dict)
    thinking_part: Part | None = None
    response_status: str | None = None
    incomplete_reason: str | None = None
    usage: JsonObject | None = None
    done: bool = False  # the final response arrived: later events are ignored
    #: The stream's repeating text or thinking delta once learned: its slot, channel and
    #: thinking part.
    slot: StringSlot | None = None
    slot_channel: str = "text"
    slot_part: Part | None = None
    slot_tries: int = 0
    slot_previous: JsonObject | None = None

    @property
    def anything(self) -> bool:
        return bool(self.text or self.thinking or self.calls or self.usage)

    def learn_slot(self, text: str, data: JsonObject, channel: str, part: Part | None) -> None:
        """After a text or thinking delta (decoded from ``text``): learn where its delta
        sits, so the next deltas that differ only there skip decoding."""
        delta = data.get("delta")
        if self.slot_tries >= StringSlot.TRIES or not data.get("type") or not _text(delta):
            return  # (without its own type, the event's SSE type would decide its kind)
        previous, self.slot_previous = self.slot_previous, data
        if previous is None:  # from the second delta on: a short reply never pays for it
            return
        self.slot_tries += 1
        self.slot = StringSlot.learn(text, data, (), "delta", previous, _SLOT_READS)
        self.slot_channel, self.slot_part = channel, part

    def take_slot(self, delta: str, emit: EventSink) -> None:
        """The delta of an event that matched the slot: what its kind's handling does."""
        if self.slot_channel == "text":
            self.text.append(delta)
            if emit is not ignore_events:
                emit(StreamEvent("text", delta))
        else:
            self.add_thinking(self.slot_part, delta, emit)

    def add_thinking(self, part: Part | None, delta: str, emit: EventSink) -> None:
        """Summary parts are separate paragraphs: a new part starts after a blank line."""
        if self.thinking and part != self.thinking_part:
            delta = "\n\n" + delta
        self.thinking_part = part
        self.thinking.append(delta)
        if emit is not ignore_events:
            emit(StreamEvent("thinking", delta))

    def add_call(self, output_index: JsonValue, item: JsonObject, emit: EventSink) -> ResponsesCall:
        call = ResponsesCall(
            len(self.calls), str(item.get("call_id") or ""), str(item.get("name") or "")
        )
        self.calls[output_index] = call
        self.add_arguments(call, "", emit)
        return call

    @staticmethod
    def add_arguments(call: ResponsesCall, delta: str, emit: EventSink) -> None:
        call.arguments.append(delta)
        if emit is not ignore_events:
            data = {"index": call.index, "id": call.call_id, "name": call.name}
            emit(StreamEvent("tool_call", data={**data, "arguments_delta": delta}))


def tool_call(call: ResponsesCall) -> ToolCall:
    raw = "".join(call.arguments)
    try:
        parsed = json.loads(raw)
    except ValueError:
        parsed = None
    return ToolCall(
        id=call.call_id,
        name=call.name,
        arguments=parsed if isinstance(parsed, dict) else None,
        raw_arguments=raw,
    )


def responses_input(messages: Iterable[Mapping[str, JsonValue]]) -> list[JsonValue]:
    """Neutral messages as Responses input items: assistant tool calls become
    ``function_call`` items after the assistant's text, tool results
    ``function_call_output`` items (the API has no error flag; the text says it)."""
    items: list[JsonValue] = []
    for message in messages:
        role = message.get("role")
        if role == "tool":
            output = message.get("content", "")
            call_id = message.get("tool_call_id")
            items.append({"type": "function_call_output", "call_id": call_id, "output": output})
            continue
        content = message.get("content")
        calls = message.get("tool_calls") or []
        if content or not calls:
            items.append({"role": role, "content": content or ""})
        if not isinstance(calls, list | tuple):
            raise TypeError(f"tool_calls must be a list of call objects, got {calls!r}")
        for call in calls:
            if not isinstance(call, dict):
                raise TypeError(f"tool_calls must be a list of call objects, got {calls!r}")
            arguments = call.get("arguments")
            if not isinstance(arguments, str):
                arguments = json.dumps(arguments if arguments is not None else {})
            call_id, name = call.get("id"), call.get("name")
            items.append(
                {"type": "function_call", "call_id": call_id, "name": name, "arguments": arguments}
            )
    return items


def _text(value: JsonValue) -> bool:
    return isinstance(value, str) and bool(value)
