"""What one attempt of a rollout produced (``AgentRun``), however it was generated, and
the ``Session`` protocol a rollout asks its generator by: the built-in agent loop
(runner/agent.py) or an agent under test's session (agents/). ``AgentRun.fill`` copies a
run onto its attempt record (result.json): the answer, the summed usage, the tool calls,
the loop record over all turns, and which limit cut a reply that ended with ``length``."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import field
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol

from pytest_agentbench.core.fastclass import dataclass
from pytest_agentbench.core.jsontypes import JsonObject, JsonValue
from pytest_agentbench.core.records import Attempt, Failure, FailureKind
from pytest_agentbench.core.stream import EventSink
from pytest_agentbench.core.usage import sum_usage
from pytest_agentbench.models.base import Generation
from pytest_agentbench.runner.loopguard import ChannelPeak, GuardSummary
from pytest_agentbench.suites.task import Task

if TYPE_CHECKING:  # the sandbox: imported by sessions that run tools only
    from pytest_agentbench.sandbox.workspace import Workspace

#: How an attempt's loop ended: the model answered, or a limit or a failure stopped it.
AgentStop = Literal[
    "answered", "turn_limit", "loop_killed", "timeout", "harness_error", "agent_failed"
]


@dataclass
class AgentRun:
    """What one attempt's loop produced. ``messages`` is the conversation up to the final
    answer (which is ``text``, not yet appended); ``error`` says why it stopped short.
    ``plain`` when it was a plain answer (one generation, no tools): its records keep
    the answer shape (no turn numbers, no tool calls, the native usage kept)."""

    messages: list[JsonObject]
    plain: bool = False
    stop: AgentStop = "answered"
    error: str | None = None
    failure: FailureKind | None = None
    failure_detail: Failure | None = None
    text: str = ""
    thinking: str = ""
    finish_reason: str | None = None
    turns: int = 0
    usages: list[JsonObject] = field(default_factory=list)
    #: the usage of the calls replayed from the response cache
    cached_usages: list[JsonObject] = field(default_factory=list)
    #: the usage of the calls the batch API answered, and why a planned one went live
    batch_usages: list[JsonObject] = field(default_factory=list)
    batch_live: str | None = None
    usage_native: JsonObject | None = None
    tool_calls: list[JsonObject] = field(default_factory=list)
    guards: list[GuardSummary] = field(default_factory=list)
    killed: JsonObject | None = None
    trajectory: list[JsonObject] = field(default_factory=list)
    elapsed_s: float = 0.0
    #: of ``elapsed_s``, the seconds its requests waited in the server's queue before
    #: their own time began (models/queue.py): the deadline moves on by as much
    waited_s: float = 0.0
    #: which limit cut the last reply when it ended with ``length`` (``length_limit``)
    length_limit: str | None = None

    def fill(self, attempt: Attempt) -> None:
        """Copy this run onto its attempt record (result.json)."""
        attempt.answer = self.text
        attempt.thinking = self.thinking
        attempt.finish_reason = self.finish_reason
        attempt.usage = sum_usage(self.usages) if self.usages else {}
        if self.cached_usages:
            attempt.cached = len(self.cached_usages)
            attempt.cached_usage = sum_usage(self.cached_usages)
        if self.batch_usages:
            attempt.batch = len(self.batch_usages)
            attempt.batch_usage = sum_usage(self.batch_usages)
        attempt.batch_live = self.batch_live
        attempt.elapsed_s = self.elapsed_s
        attempt.waited_s = round(self.waited_s, 3)
        attempt.length_limit = self.length_limit
        attempt.error = self.error
        attempt.loop = self.loop_record()
        if self.plain:
            attempt.usage_native = self.usage_native
        else:
            attempt.turns = self.turns
            attempt.tool_calls = self.tool_calls

    def loop_record(self) -> JsonObject | None:
        """The attempt's loop record in the shape of one generation's (``LoopGuard``):
        the kill (text or tools), whether thinking recovered, and per channel the highest
        verdict over all turns. None when no generation was watched (the first call
        failed)."""
        if not self.guards:
            return None
        channels: dict[str, ChannelPeak] = {}
        for summary in self.guards:
            for name, peak in summary.channels.items():
                best = channels.get(name)
                if best is None or peak.rank > best.rank:
                    channels[name] = peak
        recovered = any(summary.recovered for summary in self.guards) and self.killed is None
        return GuardSummary(self.killed, recovered, channels).as_dict()


#: Which limit cut a reply that ended with finish reason ``length``.
OUTPUT_TOKENS = "output_tokens"
CONTEXT_WINDOW = "context_window"


def length_limit(generation: Generation, max_tokens: int | None) -> str | None:
    """Which limit cut ``generation`` when it ended with ``length`` (None otherwise): the
    output-token limit the request set, or the model's context window. A server stops at
    its context window too (prompt plus answer filling it) and reports ``length`` alike;
    it was not the output-token limit when the reported output is below that limit, or
    when the request set none. Counts recovered from the text (no usage reported) cannot
    tell: the output-token limit is assumed."""
    if generation.finish_reason != "length":
        return None
    if max_tokens is None:
        return CONTEXT_WINDOW
    usage = generation.usage
    if usage.output is not None and not usage.recovered and usage.output < max_tokens:
        return CONTEXT_WINDOW
    return OUTPUT_TOKENS


class Session(Protocol):
    """What a rollout asks of the generator of its attempts: ``AgentSession`` (the
    built-in loop) or an agent under test's session (agents/: ``stop`` may then also be
    ``agent_failed``, the agent's own failure: the attempt fails, unverified)."""

    @property
    def workspace(self) -> Workspace | None: ...

    @property
    def calls(self) -> int: ...

    def attempt(
        self,
        messages: Sequence[Mapping[str, JsonValue]],
        *,
        index: int,
        deadline: float,
        timeout_s: float,
        on_event: EventSink | None = None,
        on_phase: Callable[[str], None] | None = None,
        phase: str = "waiting",
    ) -> AgentRun: ...

    def close(self) -> list[str]: ...


#: Opens the session of a task naming an agent under test, with its workspace at the
#: given folder (the session glue passes one in; the runner knows no agent kind).
OpenAgent = Callable[[Task, Path], Session]
