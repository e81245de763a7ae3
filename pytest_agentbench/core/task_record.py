"""The typed records the reports read: a task's ``TaskRecord`` with its structured
``Failure``, and the run's ``RunSummary``.

The JSON files are their serialisations (``to_json``), read back with ``from_json``: the
task record travels from a worker to the controller, fills the CTRF ``extra``, the
``record`` of result.json and the ``tasks`` of summary.json. Their JSON Schemas are
published in ``pytest_agentbench/schemas/``. ``TASK_RECORD_VERSION`` changes whenever a
field changes meaning.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from types import MappingProxyType
from typing import Any, Literal, get_args

from pytest_agentbench import errors

TASK_RECORD_VERSION = 1

#: Why a task ended without a verdict of its own (or past its deadline): the class of the
#: failure, set where it happened, never read back out of a message.
FailureKind = Literal[
    "context_overflow",
    "rate_limited",
    "provider_error",
    "transport_error",
    "circuit_open",
    "model_timeout",
    "model_error",
    "loop_killed",
    "verifier_crash",
    "verifier_timeout",
    "sandbox_error",
    "harness",
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


@dataclass(frozen=True)
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
            retries = len(error.retries)
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

    def to_json(self) -> dict[str, Any]:
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
    def from_json(cls, data: Any) -> Failure:
        where = "failure"
        obj = _object(data, where)
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
        status = obj.get("status")
        retries = obj.get("retries", 0)
        return cls(
            kind=kind,
            stage=stage,
            message=_typed(obj, "message", str, where),
            evidence=_optional(obj, "evidence", str, where),
            status=None if status is None else _typed(obj, "status", int, where),
            retries=0 if retries is None else _typed(obj, "retries", int, where),
            detail=str(obj.get("detail") or ""),
        )


def _object(data: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(data, Mapping):
        raise ValueError(f"{where}: expected a JSON object, got {type(data).__name__}")
    return data


def _typed(obj: Mapping[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    if key not in obj:
        raise ValueError(f"{where}: the required field {key!r} is missing")
    value = obj[key]
    bad_bool = isinstance(value, bool) and bool not in (
        kind if isinstance(kind, tuple) else (kind,)
    )
    if bad_bool or not isinstance(value, kind):
        names = " or ".join(k.__name__ for k in (kind if isinstance(kind, tuple) else (kind,)))
        raise ValueError(f"{where}.{key}: expected {names}, got {type(value).__name__}")
    return value


def _optional(obj: Mapping[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    if key not in obj:
        raise ValueError(f"{where}: the required field {key!r} is missing")
    return None if obj[key] is None else _typed(obj, key, kind, where)


_NUMBER = (int, float)

#: Fields every record has, in the order they are written, with their JSON types (the
#: ``None``-able ones are marked). The schema in ``schemas/task_record.schema.json``
#: says the same; ``tests/test_record_schemas.py`` checks that they agree.
_REQUIRED: tuple[tuple[str, type | tuple[type, ...], bool], ...] = (
    ("nodeid", str, False),
    ("file", str, False),
    ("suite", str, False),
    ("task_id", str, False),
    ("model", str, False),
    ("outcome", str, False),
    ("reward", _NUMBER, True),
    ("first_attempt_reward", _NUMBER, True),
    ("pass_threshold", _NUMBER, True),
    ("attempts", int, False),
    ("repaired", bool, False),
    ("incomplete", bool, False),
    ("failure_kind", str, True),
    ("repair", Mapping, False),
    ("loop", Mapping, True),
    ("last_feedback", str, True),
    ("usage", Mapping, False),
    ("error", str, True),
    ("verdict", Mapping, True),
    ("max_tokens", int, True),
    ("min_score", _NUMBER, True),
    ("start_ms", int, False),
    ("duration_ms", int, False),
    ("rollout_dir", str, True),
    ("verifier_dir", str, True),
)
#: Fields set later by the glue, written only when set.
_OPTIONAL = (
    "rounds",
    "sampling",
    "message",
    "trace",
    "resumed",
    "reruns",
    "crashed_worker",
    "epoch",
    "reducer",
    "control",
)


@dataclass(frozen=True)
class TaskRecord:
    """One task's result as the run-level reports see it (the details stay in
    result.json). ``failure`` is None for a task that reached its verdicts; ``extras``
    keeps fields a newer writer or a plugin added, so a round trip loses nothing."""

    nodeid: str
    file: str
    suite: str
    task_id: str
    model: str
    outcome: str
    reward: float | None
    first_attempt_reward: float | None
    pass_threshold: float | None
    attempts: int
    repaired: bool
    incomplete: bool
    failure_kind: str | None
    repair: Mapping[str, Any]
    loop: Mapping[str, Any] | None
    last_feedback: str | None
    usage: Mapping[str, Any]
    error: str | None
    verdict: Mapping[str, Any] | None
    max_tokens: int | None
    min_score: float | None
    start_ms: int
    duration_ms: int
    rollout_dir: str | None
    verifier_dir: str | None
    failure: Failure | None = None
    #: reward and tokens of each attempt (round 0 the first try): the repair curve's input
    rounds: list[Any] | None = None
    #: the sampling settings sent with its requests (Sampling.public(); {} when none)
    sampling: Mapping[str, Any] | None = None
    message: str | None = None
    trace: str | None = None
    resumed: bool = False
    reruns: list[Any] | None = None
    crashed_worker: str | None = None
    #: which run of the task this is (1..K) and how the K runs become its score, set
    #: when the task runs more than once (epochs)
    epoch: int | None = None
    reducer: str | None = None
    #: set on a control's record (artifacts/controls.py): which control, what it expected,
    #: whether it behaved; a control is never scored
    control: Mapping[str, Any] | None = None
    extras: Mapping[str, Any] = field(default_factory=dict)
    schema_version: int = TASK_RECORD_VERSION

    def to_json(self) -> dict[str, Any]:
        """The record as a JSON object: the required fields, ``schema_version`` and
        ``failure`` always; the glue's fields only when set."""
        data: dict[str, Any] = {"schema_version": self.schema_version}
        for name, _, _ in _REQUIRED:
            data[name] = getattr(self, name)
        data["failure"] = None if self.failure is None else self.failure.to_json()
        for name in _OPTIONAL:
            value = getattr(self, name)
            if value is not None and value is not False:
                data[name] = value
        data.update(self.extras)
        return data

    @classmethod
    def from_json(cls, data: Any) -> TaskRecord:
        """The record ``data`` holds; ValueError naming the field when it is not one."""
        obj = _object(data, "task record")
        where = f"task record {obj.get('nodeid')!r}" if "nodeid" in obj else "task record"
        values: dict[str, Any] = {}
        for name, kind, nullable in _REQUIRED:
            check = _optional if nullable else _typed
            values[name] = check(obj, name, kind, where)
        version = obj.get("schema_version", TASK_RECORD_VERSION)
        if not isinstance(version, int) or isinstance(version, bool):
            raise ValueError(f"{where}.schema_version: expected int, got {type(version).__name__}")
        failure = obj.get("failure")
        known = {name for name, _, _ in _REQUIRED} | set(_OPTIONAL) | {"failure", "schema_version"}
        return cls(
            **values,
            failure=None if failure is None else Failure.from_json(failure),
            rounds=_maybe(obj, "rounds", list, where),
            sampling=_maybe(obj, "sampling", dict, where),
            message=_maybe(obj, "message", str, where),
            trace=_maybe(obj, "trace", str, where),
            resumed=bool(_maybe(obj, "resumed", bool, where)),
            reruns=_maybe(obj, "reruns", list, where),
            crashed_worker=_maybe(obj, "crashed_worker", str, where),
            epoch=_maybe(obj, "epoch", int, where),
            reducer=_maybe(obj, "reducer", str, where),
            control=_maybe(obj, "control", Mapping, where),
            extras={k: v for k, v in obj.items() if k not in known},
            schema_version=version,
        )

    def with_fields(self, **changes: Any) -> TaskRecord:
        """A copy with ``changes`` (the record itself never changes)."""
        return replace(self, **changes)


def _maybe(obj: Mapping[str, Any], key: str, kind: type, where: str) -> Any:
    return None if obj.get(key) is None else _typed(obj, key, kind, where)


SUMMARY_VERSION = 1


@dataclass(frozen=True)
class RunSummary:
    """The run's summary.json: its identity, totals, scores and the task records.
    ``sections`` holds the other top-level fields (settings, coverage, gate, and any a
    newer writer adds) as they are."""

    run_id: str
    tool: Mapping[str, Any]
    start_ms: int
    stop_ms: int
    partial: bool
    totals: Mapping[str, Any]
    scores: list[Mapping[str, Any]]
    tasks: list[TaskRecord]
    sections: Mapping[str, Any] = field(default_factory=dict)
    schema_version: int = SUMMARY_VERSION

    @classmethod
    def from_json(cls, data: Any) -> RunSummary:
        """The summary ``data`` holds; ValueError naming the field when it is not one."""
        where = "summary"
        obj = _object(data, where)
        tasks = _typed(obj, "tasks", list, where)
        own = {f.name for f in fields(cls)} - {"sections"}
        return cls(
            run_id=_typed(obj, "run_id", str, where),
            tool=_typed(obj, "tool", Mapping, where),
            start_ms=_typed(obj, "start_ms", int, where),
            stop_ms=_typed(obj, "stop_ms", int, where),
            partial=_typed(obj, "partial", bool, where),
            totals=_typed(obj, "totals", Mapping, where),
            scores=_typed(obj, "scores", list, where),
            tasks=[TaskRecord.from_json(task) for task in tasks],
            sections={k: v for k, v in obj.items() if k not in own},
            schema_version=_typed(obj, "schema_version", int, where),
        )

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"schema_version": self.schema_version}
        data.update(
            run_id=self.run_id,
            tool=self.tool,
            start_ms=self.start_ms,
            stop_ms=self.stop_ms,
            partial=self.partial,
            totals=self.totals,
            scores=self.scores,
        )
        data.update(self.sections)
        data["tasks"] = [task.to_json() for task in self.tasks]
        return data
