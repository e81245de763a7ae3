"""How a task ended: its ``Outcome``, and when it ended without a verdict of its own, its
``Failure``: the kind (``FailureKind``, from the error's class) and the stage
(``FailureStage``) where it happened, set there and never read back out of a message.

The rollout records (core/records.py) and the task record (core/task_record.py, which
exports these names too) both carry them; a failure's JSON form is the ``failure`` of a
task record (``schemas/task_record.schema.json``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Literal, get_args

from pytest_agentbench import errors
from pytest_agentbench.core.fastclass import dataclass
from pytest_agentbench.core.jsontypes import JsonObject
from pytest_agentbench.core.record_parts import (
    json_object,
    maybe_int,
    nullable_str,
    read_str,
)

#: How a rollout ended: the one outcome enumeration (records, reports, CTRF ``rawStatus``).
Outcome = Literal["passed", "failed", "timeout", "loop_killed", "length_exceeded", "harness_error"]
OUTCOMES: tuple[Outcome, ...] = get_args(Outcome)

#: Why a task ended without a verdict of its own (or past its deadline): the class of the
#: failure, set where it happened, never read back out of a message.
FailureKind = Literal[
    "context_overflow",
    "rate_limited",
    "provider_error",
    "transport_error",
    "circuit_open",
    "budget",
    "model_timeout",
    "model_error",
    "loop_killed",
    "verifier_crash",
    "verifier_timeout",
    "sandbox_error",
    "harness",
    "judge_error",
]
FAILURE_KINDS: tuple[FailureKind, ...] = get_args(FailureKind)

#: Where the failure happened: talking to the model, the loop watch, the verifier, the
#: task's deadline, the sandbox, or the harness itself (a bug, a plugin, a crashed worker).
FailureStage = Literal["model", "loop", "verifier", "deadline", "sandbox", "harness"]
FAILURE_STAGES: tuple[FailureStage, ...] = get_args(FailureStage)

_MODEL_KINDS: tuple[tuple[type[BaseException], FailureKind], ...] = (
    (errors.ContextOverflow, "context_overflow"),
    (errors.RateLimited, "rate_limited"),
    (errors.ProviderError, "provider_error"),
    (errors.TransportError, "transport_error"),
    (errors.CircuitOpen, "circuit_open"),
    (errors.BudgetExhausted, "budget"),
    (errors.ModelTimeout, "model_timeout"),
    (errors.ModelError, "model_error"),
    (errors.SandboxError, "sandbox_error"),
    (errors.VerifierError, "verifier_crash"),
)

_STAGE_OF: Mapping[FailureKind, FailureStage] = MappingProxyType(
    {
        "loop_killed": "loop",
        "verifier_crash": "verifier",
        "verifier_timeout": "verifier",
        "judge_error": "verifier",
        "model_timeout": "deadline",
        "sandbox_error": "sandbox",
        "harness": "harness",
    }
)


def failure_kind(error: BaseException) -> FailureKind:
    """The FailureKind of an error, by its class (``harness`` for one nobody raised on
    purpose)."""
    for kind, name in _MODEL_KINDS:
        if isinstance(error, kind):
            return name
    return "harness"


def stage_of(kind: FailureKind) -> FailureStage:
    """The stage a kind of failure happens at (every model kind: ``model``)."""
    return _STAGE_OF.get(kind, "model")


def retries_made(entries: Iterable[object]) -> int:
    """How many of a call's ``retries`` entries were retries: one marked
    ``asked_unstreamed`` (the next request asked, unstreamed, why a stream was empty:
    models/retry.py) is not."""
    return sum(
        1 for entry in entries if not (isinstance(entry, Mapping) and entry.get("asked_unstreamed"))
    )


@dataclass(frozen=True, slots=True)
class Failure:
    """What went wrong, set where it went wrong: its ``kind`` and ``stage``, the
    ``message`` as written for people (without any retry note), the ``evidence`` file that
    shows it (None when none does), the HTTP ``status`` a provider answered with and how
    many ``retries`` were spent first, and the provider's own words from an HTTP error
    response as ``detail`` ("" for any other failure)."""

    kind: FailureKind
    stage: FailureStage
    message: str
    evidence: str | None = None
    status: int | None = None
    retries: int = 0
    detail: str = ""

    @classmethod
    def of(cls, kind: FailureKind, message: str, *, evidence: str | None = None) -> Failure:
        """A failure of ``kind`` at its usual stage."""
        return cls(kind=kind, stage=stage_of(kind), message=message, evidence=evidence)

    @classmethod
    def from_error(cls, error: BaseException, *, stage: FailureStage | None = None) -> Failure:
        """The failure an exception stands for: its class gives the kind, a ModelError's
        declared ``status``, ``retries`` and ``retry_note`` the rest."""
        kind = failure_kind(error)
        message = str(error)
        status: int | None = None
        retries = 0
        detail = ""
        if isinstance(error, errors.ModelError):
            status, detail = error.status, error.detail
            retries = retries_made(error.retries)
            if error.retry_note:
                message = message.removesuffix(f" ({error.retry_note})")
        return cls(
            kind=kind,
            stage=stage or stage_of(kind),
            message=message,
            status=status,
            retries=retries,
            detail=detail,
        )

    def to_json(self) -> JsonObject:
        return {
            "kind": self.kind,
            "stage": self.stage,
            "message": self.message,
            "evidence": self.evidence,
            "status": self.status,
            "retries": self.retries,
            "detail": self.detail,
        }

    @classmethod
    def from_json(cls, data: object) -> Failure:
        where = "failure"
        obj = json_object(data, where)
        kind = obj.get("kind")
        if kind not in FAILURE_KINDS:
            raise ValueError(
                f"{where}.kind: expected one of {', '.join(FAILURE_KINDS)}, got {kind!r}"
            )
        stage = obj.get("stage")
        if stage not in FAILURE_STAGES:
            raise ValueError(
                f"{where}.stage: expected one of {', '.join(FAILURE_STAGES)}, got {stage!r}"
            )
        return cls(
            kind=kind,
            stage=stage,
            message=read_str(obj, "message", where),
            evidence=nullable_str(obj, "evidence", where),
            status=maybe_int(obj, "status", where),
            retries=maybe_int(obj, "retries", where) or 0,
            detail=str(obj.get("detail") or ""),
        )
