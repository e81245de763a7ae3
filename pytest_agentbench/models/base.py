"""The one model interface the rest of the product sees, whatever the wire protocol.

A client streams ``StreamEvent``s to an ``EventSink`` and reports ``Usage``: those are
shared with layers that must not import a client (report/ shows stream events), so they
are defined in core/ and re-exported here as part of the interface a client implements.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import field
from typing import Literal, Protocol

from pytest_agentbench.core.fastclass import dataclass
from pytest_agentbench.core.jsontypes import JsonObject, JsonValue
from pytest_agentbench.core.sampling import Sampling
from pytest_agentbench.core.stream import EventSink, StreamEvent
from pytest_agentbench.core.usage import Usage
from pytest_agentbench.errors import AgentbenchError

__all__ = [
    "KNOWN_PROVIDERS",
    "REQUEST_CALL",
    "REQUEST_EPOCH",
    "REQUEST_TASK",
    "SCRIPTED_PROTOCOLS",
    "EventSink",
    "FinishReason",
    "Generation",
    "ModelClient",
    "ModelRequest",
    "ModelSpec",
    "Relay",
    "Sampling",
    "StreamEvent",
    "ToolCall",
    "ToolSpec",
    "Usage",
]

#: Providers a model spec may name. ``scripted`` needs no model name.
KNOWN_PROVIDERS = ("openai", "openai-responses", "anthropic", "openai-compat", "scripted")

#: What a provider name may be: a plugin's provider too (``myprovider/some-model``).
_PROVIDER_NAME = re.compile(r"[a-z0-9][a-z0-9._-]*", re.IGNORECASE)

#: Protocols the scripted provider can speak: ``scripted/<protocol>``.
SCRIPTED_PROTOCOLS = ("openai", "openai-responses", "anthropic")

#: ``ModelRequest.metadata`` keys the runner sets on every request.
REQUEST_TASK = "task"
REQUEST_CALL = "call"
#: the task's epoch (1..K, "0" for a task run once): part of the response cache's key
REQUEST_EPOCH = "epoch"

FinishReason = Literal["stop", "length", "tool_calls", "content_filter", "other"]


@dataclass(frozen=True)
class ModelSpec:
    """``provider/model`` parsed, e.g. ``openai/gpt-4.1-mini`` or ``scripted``."""

    provider: str
    model: str

    @property
    def label(self) -> str:
        if self.provider == "scripted" and self.model == "scripted":
            return "scripted"
        return f"{self.provider}/{self.model}"

    @classmethod
    def parse(cls, text: str) -> ModelSpec:
        """Parse a model spec; raises AgentbenchError naming the known providers.

        ``scripted`` is the scripted provider speaking Chat Completions;
        ``scripted/<protocol>`` makes it speak another protocol (SCRIPTED_PROTOCOLS)."""
        text = text.strip()
        if text == "scripted" or text.startswith("scripted/"):
            protocol = text.partition("/")[2] or "scripted"
            if protocol not in ("scripted", *SCRIPTED_PROTOCOLS):
                raise AgentbenchError(
                    f"unknown scripted protocol {protocol!r}: expected scripted or "
                    + ", ".join(f"scripted/{p}" for p in SCRIPTED_PROTOCOLS)
                )
            return cls("scripted", protocol)
        provider, sep, model = text.partition("/")
        if not sep or not model or not _PROVIDER_NAME.fullmatch(provider):
            known = ", ".join(f"{p}/<model>" for p in KNOWN_PROVIDERS if p != "scripted")
            raise AgentbenchError(
                f"unknown model spec {text!r}: expected one of {known}, scripted, or "
                "<provider>/<model> for a provider a plugin adds"
            )
        return cls(provider, model)

    @property
    def builtin(self) -> bool:
        """Whether a built-in client serves this provider (else a plugin must claim it)."""
        return self.provider in KNOWN_PROVIDERS


@dataclass(frozen=True)
class ToolSpec:
    """A tool the model may call: a name, what it does, and a JSON Schema of its arguments."""

    name: str
    description: str = ""
    parameters: Mapping[str, JsonValue] = field(
        default_factory=lambda: {"type": "object", "properties": {}}
    )


@dataclass(frozen=True)
class ToolCall:
    """A tool call the model made. ``arguments`` is the parsed JSON object, or None when
    the model sent something that is not a JSON object; ``raw_arguments`` is what it sent."""

    id: str
    name: str
    arguments: Mapping[str, JsonValue] | None
    raw_arguments: str = ""

    def as_message_part(self) -> JsonObject:
        """The neutral form used in ``ModelRequest.messages``."""
        return {"id": self.id, "name": self.name, "arguments": dict(self.arguments or {})}


class Relay(Protocol):
    """A request relayed for someone else (the gateway's agents): the client sends
    ``body`` as it is (its ``model`` replaced by the client's own) with ``headers`` added,
    and hands the reply on as it arrives — ``start`` with the status and headers of a
    successful reply, then ``send`` with each raw chunk — while reading it as usual. A
    failed status is not handed on (the error is raised, and may be retried); once
    ``started``, a failure is never retried (the receiver already holds part of it)."""

    body: Mapping[str, JsonValue]
    headers: Mapping[str, str]

    @property
    def started(self) -> bool: ...

    def start(self, status: int, headers: list[tuple[str, str]]) -> None: ...

    def send(self, chunk: bytes) -> None: ...


@dataclass(frozen=True)
class ModelRequest:
    """One generation request, in a protocol-neutral form every client translates.

    ``messages`` are turns:

    - ``{"role": "user", "content": str}``
    - ``{"role": "assistant", "content": str, "tool_calls": [{"id", "name", "arguments"}]}``
      (``tool_calls`` optional; ``arguments`` a JSON object)
    - ``{"role": "tool", "tool_call_id": str, "name": str, "content": str,
      "is_error": bool}`` (a tool's result)

    ``system`` is sent the way the protocol wants it; ``tools`` are offered with the
    protocol's native tool calling. ``metadata`` says what the request is for, as the
    runner knows it (``REQUEST_TASK``: the task's key, ``REQUEST_CALL``: the number of the
    model call in its rollout, from 0); no client sends it to a real provider, a client
    that needs it (the scripted one) reads it.
    ``sampling`` (temperature, seed, ...) goes in each protocol's own fields
    (models/sampling_wire.py); unset ones are not sent. ``relay`` (the gateway's): send
    another caller's body of this client's own protocol as it is and hand the reply on
    (``Relay``); ``messages``, ``system``, ``tools`` and ``sampling`` are then unused.
    """

    messages: tuple[Mapping[str, JsonValue], ...]
    system: str | None = None
    tools: tuple[ToolSpec, ...] = ()
    max_tokens: int | None = None
    sampling: Sampling = field(default_factory=Sampling)
    timeout_s: float | None = None
    stream: bool = True
    metadata: Mapping[str, str] = field(default_factory=dict)
    relay: Relay | None = None
    #: a JSON Schema the reply's text must follow, sent as the protocol's structured
    #: output where it has one (Chat ``response_format``, Responses ``text.format``);
    #: Anthropic Messages has none, so it is not sent there (the prompt asks instead)
    response_schema: Mapping[str, JsonValue] | None = None


@dataclass(frozen=True)
class Generation:
    """What one request produced. ``exchange`` is the trajectory entry for it: the request
    body and reply as sent and received, with secrets redacted."""

    text: str
    thinking: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    finish_reason: FinishReason | None = None
    usage: Usage = field(default_factory=Usage)
    usage_native: Mapping[str, JsonValue] | None = None
    exchange: Mapping[str, JsonValue] = field(default_factory=dict)
    elapsed_s: float = 0.0
    #: Of ``elapsed_s``, the seconds the request waited in its server's queue before its
    #: own time began (models/queue.py): not the model's time.
    waited_s: float = 0.0
    #: Protocol-native reasoning blocks the provider requires back, unchanged, when the
    #: conversation continues after this turn's tool calls (Anthropic ``thinking`` with its
    #: ``signature``, ``redacted_thinking``); empty for protocols that need none.
    reasoning_blocks: tuple[Mapping[str, JsonValue], ...] = ()


class ModelClient(Protocol):
    """A client for one wire protocol. ``generate`` raises ModelError subclasses; the
    error's ``partial`` attribute (when present) holds what arrived before it failed."""

    spec: ModelSpec

    def generate(self, request: ModelRequest, on_event: EventSink | None = None) -> Generation: ...

    def close(self) -> None: ...
