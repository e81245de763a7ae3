"""What arrived of one model reply, read and assembled: the SSE stream event by event
(the stream's repeating delta taken undecoded once learned), the "ended before its
finish" error, and the Generation made of what arrived, whole or partial. Mixed into
every protocol client (models/http.py), which supplies the protocol's own parts."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Generic, Protocol, TypeVar

from pytest_agentbench.core.jsontypes import JsonObject
from pytest_agentbench.core.stream import EventSink
from pytest_agentbench.errors import ModelError, TransportError
from pytest_agentbench.models.base import FinishReason, Generation, ModelSpec, ToolCall, Usage
from pytest_agentbench.models.event_json import StringSlot, parse_json
from pytest_agentbench.models.http_replies import EmptyStream, attach_partial, error_detail
from pytest_agentbench.models.queue import Place
from pytest_agentbench.models.sse import SSEParser
from pytest_agentbench.models.usage import recovered_usage
from pytest_agentbench.models.wire import Response


class Received(Protocol):
    """What has arrived of one reply, as the shared request life reads it (each client
    keeps its own record of the rest)."""

    status: int | None
    #: The reply is complete: later events are ignored.
    done: bool
    #: The stream's repeating delta once learned (``StringSlot``), else None.
    slot: StringSlot | None
    #: The answer text and the thinking as they arrived, in pieces.
    text: list[str]
    thinking: list[str]
    #: The provider's own usage object, when it sent one.
    usage: JsonObject | None

    @property
    def anything(self) -> bool:
        """Whether anything arrived (a partial reply is worth keeping)."""
        ...

    def take_slot(self, piece: str, emit: EventSink) -> None:
        """The text of an event that matched ``slot``."""
        ...


ReceivedT = TypeVar("ReceivedT", bound=Received)


class ReplyReader(Generic[ReceivedT]):
    """Reads a reply into ``Received`` and assembles its Generation. A protocol client
    supplies ``_on_stream_event`` (one SSE event), what a finished stream shows
    (``_stream_finished``, named by ``STREAM_FINISH``) and the parts of a Generation only
    it knows (``_tool_calls``, ``_finish_reason``, ``_native_finish``,
    ``_normalise_usage``; ``_usage`` and ``_reasoning_blocks`` when it needs more); it
    overrides ``_settle`` if it holds text back."""

    spec: ModelSpec
    public_endpoint: str
    #: What a complete stream of the protocol carries, as the "ended before its finish"
    #: error names it.
    STREAM_FINISH = ""

    def _assemble(
        self,
        *,
        text: str,
        thinking: str,
        tool_calls: tuple[ToolCall, ...],
        finish_reason: FinishReason | None,
        usage: Usage,
        native_usage: JsonObject | None,
        native_finish: JsonObject,
        status: int | None,
        body: JsonObject,
        started: float,
        error: str | None,
        waited_s: float = 0.0,
    ) -> Generation:
        """The Generation of a request, with its trajectory entry: the request body and
        the reply as received (``native_finish`` holds the protocol's own finish fields),
        and the seconds it waited in the server's queue when it did."""
        elapsed = time.monotonic() - started
        reply: JsonObject = {
            "status": status,
            "text": text,
            "thinking": thinking,
            "tool_calls": [
                {"id": call.id, "name": call.name, "arguments": call.raw_arguments}
                for call in tool_calls
            ],
            **native_finish,
            "usage": native_usage,
        }
        if error is not None:
            reply["error"] = error
        return Generation(
            text=text,
            thinking=thinking,
            tool_calls=tool_calls,
            finish_reason=finish_reason,
            usage=usage,
            usage_native=native_usage,
            exchange={
                "request": {"url": self.public_endpoint, "body": body},
                "response": reply,
                "elapsed_s": round(elapsed, 3),
                **({"waited_s": round(waited_s, 3)} if waited_s >= 0.0005 else {}),
            },
            elapsed_s=elapsed,
            waited_s=waited_s,
        )

    def _read_events(
        self,
        response: Response,
        received: ReceivedT,
        emit: EventSink,
        began: Callable[[], object] | None = None,
    ) -> None:
        """Every SSE event of the stream to ``_on_stream_event(type, data, received,
        emit)`` until ``received.done``. Once the handler has learned ``received.slot``
        (the stream's repeating delta), an event that matches it goes straight to
        ``received.take_slot`` with its text, undecoded, and a chunk that is exactly one
        such event is not even parsed."""
        parser = SSEParser()
        on_event = self._on_stream_event
        framed = framed_for = None
        for chunk in response.iter_bytes():
            if framed is not None and not received.done:
                piece = parser.feed_slot(chunk, framed)
                if piece is not None:
                    received.take_slot(piece, emit)
                    continue
            for event_type, data, _ in parser.feed_fields(chunk):
                if began is not None:  # the first event: the reply has begun
                    began()
                    began = None
                if received.done:
                    continue
                slot = received.slot
                if slot is not None:
                    piece = slot.match(data)
                    if piece is not None:
                        received.take_slot(piece, emit)
                        continue
                on_event(event_type, data, received, emit)
            if received.slot is not framed_for:  # framed on the chunk that taught the slot
                framed_for = received.slot
                framed = parser.framed(framed_for) if framed_for is not None else None

    def _json_object(self, data: str, what: str) -> JsonObject:
        """``data`` decoded as the JSON object it must be; anything else is a
        TransportError naming the endpoint and what arrived."""
        try:
            obj = parse_json(data)
        except ValueError:
            obj = None
        if not isinstance(obj, dict):
            raise TransportError(
                f"{self.spec.label}: malformed {what} from {self.public_endpoint}: "
                f"{error_detail(data)}",
                endpoint=self.public_endpoint,
            )
        return obj

    def _read_stream(
        self,
        response: Response,
        received: ReceivedT,
        emit: EventSink,
        began: Callable[[], object] | None = None,
    ) -> None:
        """A streamed reply, event by event (``began`` is called at the first event); a
        stream that ends without the protocol's finish is a TransportError (what arrived
        is kept as the partial)."""
        self._read_events(response, received, emit, began)
        self._stream_ended(received, emit)
        if not self._stream_finished(received):
            kind = TransportError if received.anything else EmptyStream
            raise kind(
                f"{self.spec.label}: the stream from {self.public_endpoint} ended before "
                f"its finish ({self.STREAM_FINISH})",
                endpoint=self.public_endpoint,
                status=received.status,
            )

    def _stream_ended(self, received: ReceivedT, emit: EventSink) -> None:
        """What a client completes when its stream's bytes end (nothing, unless it holds
        text back)."""

    def _usage(self, received: ReceivedT, text: str, thinking: str) -> Usage:
        """The usage the provider reported, normalised; counted from the text (flagged
        ``recovered``) when it reported none."""
        if received.usage is not None:
            return self._normalise_usage(received.usage)
        return recovered_usage(text, thinking)

    def _reasoning_blocks(self, received: ReceivedT) -> tuple[JsonObject, ...]:
        """Protocol-native reasoning blocks to send back unchanged (none by default)."""
        return ()

    def _generation(
        self,
        received: ReceivedT,
        body: JsonObject,
        started: float,
        error: str | None = None,
        waited_s: float = 0.0,
    ) -> Generation:
        """The Generation of what arrived (the whole reply, or a failed one's part)."""
        text = "".join(received.text)
        thinking = "".join(received.thinking)
        tool_calls = self._tool_calls(received)
        finish = self._finish_reason(received, tool_calls)
        generation = self._assemble(
            text=text,
            thinking=thinking,
            tool_calls=tool_calls,
            finish_reason=finish,
            usage=self._usage(received, text, thinking),
            native_usage=received.usage,
            native_finish=self._native_finish(received, finish),
            status=received.status,
            body=body,
            started=started,
            error=error,
            waited_s=waited_s,
        )
        blocks = self._reasoning_blocks(received)
        if blocks:
            generation = dataclasses.replace(generation, reasoning_blocks=blocks)
        return generation

    def _with_partial(
        self,
        error: ModelError,
        received: ReceivedT,
        body: JsonObject,
        started: float,
        place: Place | None = None,
    ) -> ModelError:
        """``error`` with what arrived as its ``partial`` Generation (None when nothing
        did) and the time its request waited in the server's queue."""
        self._settle(received)
        waited = place.waited_s if place is not None else 0.0
        partial = None
        if received.anything:
            partial = self._generation(received, body, started, error=str(error), waited_s=waited)
        return attach_partial(error, partial, waited)

    @staticmethod
    def _settle(received: ReceivedT) -> None:
        """What a client completes in ``received`` before a partial reply is assembled
        (nothing, unless the client holds text back)."""

    # What each protocol client supplies.

    def _on_stream_event(
        self, event_type: str, data: str, received: ReceivedT, emit: EventSink
    ) -> None:
        raise NotImplementedError

    def _stream_finished(self, received: ReceivedT) -> bool:
        """Whether the stream delivered the protocol's end (a finish, a final event)."""
        raise NotImplementedError

    def _tool_calls(self, received: ReceivedT) -> tuple[ToolCall, ...]:
        raise NotImplementedError

    def _finish_reason(
        self, received: ReceivedT, tool_calls: tuple[ToolCall, ...]
    ) -> FinishReason | None:
        raise NotImplementedError

    def _native_finish(self, received: ReceivedT, finish: FinishReason | None) -> JsonObject:
        """The protocol's own finish fields, as the trajectory keeps them."""
        raise NotImplementedError

    @staticmethod
    def _normalise_usage(native: JsonObject) -> Usage:
        raise NotImplementedError
