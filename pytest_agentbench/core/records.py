"""Records of a rollout: what each attempt produced and how the rollout ended.

These are written to ``result.json`` as they are (``as_dict``); ``SCHEMA_VERSION`` changes
whenever a field changes meaning.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import field
from typing import Literal, get_args

from pytest_agentbench.core.fastclass import dataclass
from pytest_agentbench.core.jsontypes import JsonObject
from pytest_agentbench.core.outcome import (
    OUTCOMES,
    Failure,
    FailureKind,
    Outcome,
    failure_kind,
)
from pytest_agentbench.core.usage import sum_usage

__all__ = [
    "OUTCOMES",
    "SCHEMA_VERSION",
    "Attempt",
    "Failure",
    "FailureKind",
    "Outcome",
    "Rollout",
    "failure_kind",
]

SCHEMA_VERSION = 1

#: A test's status in a CTRF report (ours, and the inner report a code verifier reads).
CtrfStatus = Literal["passed", "failed", "skipped", "pending", "other"]
CTRF_STATUSES: tuple[CtrfStatus, ...] = get_args(CtrfStatus)


@dataclass
class Attempt:
    """One generation and its verdict. ``verdict`` is None when generation failed. In agent
    mode an attempt is a tool-calling loop: ``turns`` model calls (summed ``usage``) and the
    ``tool_calls`` made (name, cut arguments, error flag, output size); None otherwise."""

    index: int
    answer: str = ""
    thinking: str = ""
    finish_reason: str | None = None
    verdict: dict[str, object] | None = None
    feedback_sent: str | None = None
    usage: JsonObject = field(default_factory=dict)
    usage_native: JsonObject | None = None
    elapsed_s: float = 0.0
    #: of ``elapsed_s``, the seconds its requests waited in the server's queue before
    #: their own time began: not the model's time (models/queue.py)
    waited_s: float = 0.0
    #: which limit cut the reply when it ended with ``length``: ``output_tokens`` (the
    #: request's max_tokens) or ``context_window`` (prompt and answer filled the model's
    #: context first); None otherwise
    length_limit: str | None = None
    error: str | None = None
    loop: JsonObject | None = None
    turns: int | None = None
    tool_calls: list[JsonObject] | None = None
    #: model calls replayed from the response cache (not sent, not paid for) and their
    #: summed usage (None when none was)
    cached: int = 0
    cached_usage: JsonObject | None = None
    #: model calls answered by the provider's batch API (--agentbench-batch: paid at the
    #: batch price), their summed usage, and why a planned batched request went live
    batch: int = 0
    batch_usage: JsonObject | None = None
    batch_live: str | None = None
    #: what judging this attempt cost and found (the judge verifier's summary), or None
    judge: JsonObject | None = None


@dataclass
class Rollout:
    """Everything one task run produced. ``reward`` is the final attempt's reward (None when
    no verdict was reached, and for a harness error: the rounds the harness could not
    run have no score); ``first_attempt_reward`` is kept whatever a later round did.
    ``error`` is set for timeout and harness errors, ``failure_kind`` says which class
    of failure it was and ``failure`` the whole of it (set where it happened; when a
    caller gave only the kind, made from the kind, the outcome and ``error``)."""

    task_key: str
    suite: str
    task_id: str
    model: str
    outcome: Outcome
    reward: float | None
    first_attempt_reward: float | None
    pass_threshold: float
    attempts: list[Attempt]
    usage: JsonObject
    started_at: float
    elapsed_s: float
    error: str | None = None
    trajectory: list[JsonObject] = field(default_factory=list)
    repair: JsonObject = field(default_factory=dict)
    failure_kind: FailureKind | None = None
    failure: Failure | None = None

    def __post_init__(self) -> None:
        if self.failure is not None:
            return
        if self.outcome == "loop_killed":
            self.failure = Failure.of("loop_killed", self.error or "loop killed")
        elif self.failure_kind is not None:
            self.failure = Failure.of(self.failure_kind, self.error or self.outcome)

    @classmethod
    def harness_error(
        cls,
        task_key: str,
        suite: str,
        task_id: str,
        model: str,
        error: str,
        pass_threshold: float = 1.0,
        *,
        failure: Failure | None = None,
    ) -> Rollout:
        """A rollout that never reached the model (the harness failed first); ``failure``
        says where (by default: the harness itself)."""
        return cls(
            task_key=task_key,
            suite=suite,
            task_id=task_id,
            model=model,
            outcome="harness_error",
            reward=None,
            first_attempt_reward=None,
            pass_threshold=pass_threshold,
            attempts=[],
            usage=sum_usage([]),
            started_at=time.time(),
            elapsed_s=0.0,
            error=error,
            failure_kind="harness",
            failure=failure,
        )

    @property
    def incomplete(self) -> bool:
        """True when a harness problem stopped the rollout after a verdict was reached:
        the first-try score keeps the task, the repaired score does not have it."""
        return self.outcome == "harness_error" and self.first_attempt_reward is not None

    @property
    def repaired(self) -> bool:
        """True when a repair round turned a failed first attempt into a pass."""
        return self.outcome == "passed" and len(self.attempts) > 1

    @property
    def loop(self) -> JsonObject | None:
        """The loop evidence worth reporting (:func:`loop_evidence` of its attempts)."""
        return loop_evidence([attempt.loop for attempt in self.attempts])

    @property
    def verdict(self) -> dict[str, object] | None:
        """The last verdict reached, if any."""
        for attempt in reversed(self.attempts):
            if attempt.verdict is not None:
                return attempt.verdict
        return None

    def as_dict(self) -> dict[str, object]:
        """The rollout as JSON-ready data, without the trajectory (a file of its own).
        Nested dicts are shared with the rollout, not copied: the caller only reads them
        (a deep copy through ``dataclasses.asdict`` was a tenth of a task's CPU)."""
        data = dict(vars(self))
        data.pop("trajectory")
        data["attempts"] = [dict(vars(attempt)) for attempt in self.attempts]
        data["failure"] = None if self.failure is None else self.failure.to_json()
        data["schema_version"] = SCHEMA_VERSION
        data["final_reward"] = self.reward
        data["repaired"] = self.repaired
        data["incomplete"] = self.incomplete
        data["attempts_used"] = len(self.attempts)
        data["loop"] = self.loop
        return data


def loop_evidence(loops: Sequence[Mapping[str, object] | None]) -> JsonObject | None:
    """The loop evidence worth reporting of a task's generations (each a loop guard's
    record, in attempt order): the kill (any attempt), else a thinking loop the model
    recovered from, else None."""
    for index, loop in enumerate(loops):
        killed = loop.get("killed") if loop else None
        if isinstance(killed, dict) and killed:
            return {**killed, "attempt": index + 1}
    for index, loop in enumerate(loops):
        channels = loop.get("channels") if loop and loop.get("recovered") else None
        thinking = channels.get("thinking") if isinstance(channels, dict) else None
        if isinstance(thinking, dict):
            return {
                "recovered": True,
                "channel": "thinking",
                "attempt": index + 1,
                **{k: thinking[k] for k in ("period", "repetitions", "score")},
            }
    return None
