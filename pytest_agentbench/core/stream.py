"""Stream events: the pieces a model client emits while a reply streams in.

Clients (models/) emit them; the loop guard (runner/) watches them and adds ``loop``
events; the live status line (report/) shows them. They live at the bottom so the report
layer can read them without importing a model client.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Literal, get_args

from pytest_agentbench.core.fastclass import dataclass

#: The wire protocols a built-in client speaks (and the scripted server answers in):
#: Chat Completions, the OpenAI Responses API, the Anthropic Messages API.
WireProtocol = Literal["chat", "responses", "anthropic"]
WIRE_PROTOCOLS: tuple[WireProtocol, ...] = get_args(WireProtocol)


class _NoData(Mapping[str, object]):
    """The ``data`` of a StreamEvent that carries none: one shared, empty, read-only
    mapping, not a new dict per event (a stream makes one event per delta)."""

    def __getitem__(self, key: str) -> object:
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        return iter(())

    def __len__(self) -> int:
        return 0

    def __hash__(self) -> int:
        return 0

    def __repr__(self) -> str:
        return "{}"


NO_DATA: Mapping[str, object] = _NoData()


@dataclass(frozen=True, slots=True)
class StreamEvent:
    """One streamed piece: answer text, thinking text, a tool-call fragment (``data``:
    ``index``, ``id``, ``name``, ``arguments_delta``), usage, the finish reason, or (from
    the loop guard, never a client) ``loop`` with ``data["score"]`` when it rises."""

    kind: Literal["text", "thinking", "tool_call", "finish", "usage", "loop"]
    text: str = ""
    data: Mapping[str, object] = NO_DATA


#: What a client calls with each StreamEvent as it arrives.
EventSink = Callable[[StreamEvent], None]

ROLLOUT_EVENT_VERSION = 1


@dataclass(frozen=True, slots=True)
class RolloutEvent:
    """A StreamEvent of one task's rollout, as plugins observe it: which task (``nodeid``,
    ``suite``, ``task_id``) and the piece itself (``kind``, ``text``, ``data``)."""

    nodeid: str
    suite: str
    task_id: str
    kind: str
    text: str = ""
    data: Mapping[str, object] = NO_DATA
    schema_version: int = ROLLOUT_EVENT_VERSION
