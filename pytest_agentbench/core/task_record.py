"""The typed records the reports read: a task's ``TaskRecord`` with its structured
``Failure``, and the run's ``RunSummary``. How a task ended (``Outcome``, ``Failure`` and
their word sets) is core/outcome.py, exported here too.

The JSON files are their serialisations (``to_json``), read back with ``from_json``: the
task record travels from a worker to the controller, fills the CTRF ``extra``, the
``record`` of result.json and the ``tasks`` of summary.json. Their JSON Schemas are
published in ``pytest_agentbench/schemas/``. ``TASK_RECORD_VERSION`` changes whenever a
field changes meaning.
"""

from __future__ import annotations

import os
from dataclasses import field, fields, replace
from typing import cast

from pytest_agentbench.core.cost import CostRecord
from pytest_agentbench.core.derived_slot import DerivedSlot
from pytest_agentbench.core.fastclass import dataclass
from pytest_agentbench.core.jsontypes import JsonObject, JsonValue
from pytest_agentbench.core.outcome import FAILURE_KINDS as FAILURE_KINDS
from pytest_agentbench.core.outcome import FAILURE_STAGES as FAILURE_STAGES
from pytest_agentbench.core.outcome import OUTCOMES as OUTCOMES
from pytest_agentbench.core.outcome import Failure as Failure
from pytest_agentbench.core.outcome import FailureKind as FailureKind
from pytest_agentbench.core.outcome import FailureStage as FailureStage
from pytest_agentbench.core.outcome import Outcome as Outcome
from pytest_agentbench.core.record_parts import (
    ControlRecord,
    LoopRecord,
    RepairSettings,
    Rerun,
    Round,
    VerdictRecord,
    json_object,
    maybe_bool,
    maybe_int,
    maybe_json_object,
    maybe_number,
    maybe_str,
    nullable_int,
    nullable_number,
    nullable_str,
    read_bool,
    read_field,
    read_int,
    read_json_object,
    read_list,
    read_str,
)
from pytest_agentbench.core.usage import Usage

TASK_RECORD_VERSION = 1

#: The required fields, in the order they are written. The schema in
#: ``schemas/task_record.schema.json`` says the same; ``tests/package/test_record_schemas.py``
#: checks that they agree.
REQUIRED_FIELDS = (
    "nodeid",
    "file",
    "suite",
    "task_id",
    "model",
    "outcome",
    "reward",
    "first_attempt_reward",
    "pass_threshold",
    "attempts",
    "repaired",
    "incomplete",
    "failure_kind",
    "repair",
    "loop",
    "last_feedback",
    "usage",
    "error",
    "verdict",
    "max_tokens",
    "min_score",
    "start_ms",
    "duration_ms",
    "rollout_dir",
    "verifier_dir",
)
#: Fields set later by the glue, written only when set.
OPTIONAL_FIELDS = (
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
    "cost",
    "cached",
    "batch",
    "batch_live",
    "waited_s",
    "length_limit",
    "judge",
)
_KNOWN = frozenset((*REQUIRED_FIELDS, *OPTIONAL_FIELDS, "failure", "schema_version"))


@dataclass(frozen=True, slots=True)
class TaskRecord:
    """One task's result as the run-level reports see it (the details stay in
    result.json). ``failure`` is None for a task that reached its verdicts; ``extras``
    keeps fields a newer writer or a plugin added, so a round trip loses nothing."""

    nodeid: str
    file: str
    suite: str
    task_id: str
    model: str
    outcome: Outcome
    reward: float | None
    first_attempt_reward: float | None
    pass_threshold: float | None
    attempts: int
    repaired: bool
    incomplete: bool
    failure_kind: FailureKind | None
    repair: RepairSettings
    loop: LoopRecord | None
    last_feedback: str | None
    usage: Usage
    error: str | None
    verdict: VerdictRecord | None
    max_tokens: int | None
    min_score: float | None
    start_ms: int
    duration_ms: int
    rollout_dir: str | None
    verifier_dir: str | None
    failure: Failure | None = None
    #: reward and tokens of each attempt (round 0 the first try): the repair curve's input
    rounds: tuple[Round, ...] | None = None
    #: the sampling settings sent with its requests (Sampling.public(); {} when none)
    sampling: JsonObject | None = None
    message: str | None = None
    trace: str | None = None
    resumed: bool = False
    reruns: tuple[Rerun, ...] | None = None
    crashed_worker: str | None = None
    #: which run of the task this is (1..K) and how the K runs become its score, set
    #: when the task runs more than once (epochs)
    epoch: int | None = None
    reducer: str | None = None
    #: set on a control's record (artifacts/controls.py): which control, what it expected,
    #: whether it behaved; a control is never scored
    control: ControlRecord | None = None
    #: what the task cost (core/cost.py), set when the run prices its model; its ``usd``
    #: is None when the price or the usage is not known
    cost: CostRecord | None = None
    #: how many of its model calls were replayed from the response cache (not sent)
    cached: int | None = None
    #: how many of its model calls the provider's batch API answered (--agentbench-batch)
    batch: int | None = None
    #: why its first-round request, planned for the batch, was sent live instead
    batch_live: str | None = None
    #: seconds its model requests waited in the server's queue before their own time
    #: began (models/queue.py): not the model's time, so not spent from its timeout;
    #: set when there was any
    waited_s: float | None = None
    #: which limit cut the last reply of a ``length_exceeded`` task: ``output_tokens`` or
    #: ``context_window``
    length_limit: str | None = None
    #: set when a judge graded the task (verifiers/judge.py): its model, fingerprint,
    #: template hash, rubric digest, calls, usage, wall time, score and error
    judge: JsonObject | None = None
    extras: JsonObject = field(default_factory=dict)
    schema_version: int = TASK_RECORD_VERSION

    def to_json(self) -> JsonObject:
        """The record as a JSON object: the required fields, ``schema_version`` and
        ``failure`` always; the glue's fields only when set."""
        loop, verdict, failure = self.loop, self.verdict, self.failure
        data: JsonObject = {
            "schema_version": self.schema_version,
            "nodeid": self.nodeid,
            "file": self.file,
            "suite": self.suite,
            "task_id": self.task_id,
            "model": self.model,
            "outcome": self.outcome,
            "reward": self.reward,
            "first_attempt_reward": self.first_attempt_reward,
            "pass_threshold": self.pass_threshold,
            "attempts": self.attempts,
            "repaired": self.repaired,
            "incomplete": self.incomplete,
            "failure_kind": self.failure_kind,
            "repair": self.repair.to_json(),
            "loop": None if loop is None else loop.to_json(),
            "last_feedback": self.last_feedback,
            "usage": self.usage.to_json(),
            "error": self.error,
            "verdict": None if verdict is None else verdict.to_json(),
            "max_tokens": self.max_tokens,
            "min_score": self.min_score,
            "start_ms": self.start_ms,
            "duration_ms": self.duration_ms,
            "rollout_dir": self.rollout_dir,
            "verifier_dir": self.verifier_dir,
            "failure": None if failure is None else failure.to_json(),
        }
        if self.rounds is not None:
            data["rounds"] = [one.to_json() for one in self.rounds]
        if self.sampling is not None:
            data["sampling"] = self.sampling
        for name, value in (("message", self.message), ("trace", self.trace)):
            if value is not None:
                data[name] = value
        if self.resumed:
            data["resumed"] = True
        if self.reruns is not None:
            data["reruns"] = [one.to_json() for one in self.reruns]
        if self.crashed_worker is not None:
            data["crashed_worker"] = self.crashed_worker
        if self.epoch is not None:
            data["epoch"] = self.epoch
        if self.waited_s is not None:
            data["waited_s"] = self.waited_s
        if self.length_limit is not None:
            data["length_limit"] = self.length_limit
        if self.reducer is not None:
            data["reducer"] = self.reducer
        if self.control is not None:
            data["control"] = self.control.to_json()
        if self.cost is not None:
            data["cost"] = self.cost.to_json()
        if self.cached is not None:
            data["cached"] = self.cached
        if self.batch is not None:
            data["batch"] = self.batch
        if self.batch_live is not None:
            data["batch_live"] = self.batch_live
        if self.judge is not None:
            data["judge"] = self.judge
        data.update(self.extras)
        return data

    @classmethod
    def from_json(cls, data: object) -> TaskRecord:
        """The record ``data`` holds; ValueError naming the field when it is not one."""
        obj = json_object(data, "task record")
        where = f"task record {obj.get('nodeid')!r}" if "nodeid" in obj else "task record"
        outcome = read_str(obj, "outcome", where)
        if outcome not in OUTCOMES:
            raise ValueError(
                f"{where}.outcome: expected one of {', '.join(OUTCOMES)}, got {outcome!r}"
            )
        kind = nullable_str(obj, "failure_kind", where)
        if kind is not None and kind not in FAILURE_KINDS:
            raise ValueError(
                f"{where}.failure_kind: expected one of {', '.join(FAILURE_KINDS)}, got {kind!r}"
            )
        version = obj.get("schema_version", TASK_RECORD_VERSION)
        if not isinstance(version, int) or isinstance(version, bool):
            raise ValueError(f"{where}.schema_version: expected int, got {type(version).__name__}")
        loop = read_field(obj, "loop", where)
        verdict = read_field(obj, "verdict", where)
        failure = obj.get("failure")
        rounds = obj.get("rounds")
        reruns = obj.get("reruns")
        control = obj.get("control")
        cost = obj.get("cost")
        return cls(
            nodeid=read_str(obj, "nodeid", where),
            file=read_str(obj, "file", where),
            suite=read_str(obj, "suite", where),
            task_id=read_str(obj, "task_id", where),
            model=read_str(obj, "model", where),
            outcome=outcome,
            reward=nullable_number(obj, "reward", where),
            first_attempt_reward=nullable_number(obj, "first_attempt_reward", where),
            pass_threshold=nullable_number(obj, "pass_threshold", where),
            attempts=read_int(obj, "attempts", where),
            repaired=read_bool(obj, "repaired", where),
            incomplete=read_bool(obj, "incomplete", where),
            failure_kind=kind,
            repair=RepairSettings.from_json(read_field(obj, "repair", where), f"{where}.repair"),
            loop=None if loop is None else LoopRecord.from_json(loop, f"{where}.loop"),
            last_feedback=nullable_str(obj, "last_feedback", where),
            usage=_usage(read_field(obj, "usage", where), where),
            error=nullable_str(obj, "error", where),
            verdict=None
            if verdict is None
            else VerdictRecord.from_json(verdict, f"{where}.verdict"),
            max_tokens=nullable_int(obj, "max_tokens", where),
            min_score=nullable_number(obj, "min_score", where),
            start_ms=read_int(obj, "start_ms", where),
            duration_ms=read_int(obj, "duration_ms", where),
            rollout_dir=nullable_str(obj, "rollout_dir", where),
            verifier_dir=nullable_str(obj, "verifier_dir", where),
            failure=None if failure is None else Failure.from_json(failure),
            rounds=None
            if rounds is None
            else tuple(
                Round.from_json(one, f"{where}.rounds") for one in read_list(obj, "rounds", where)
            ),
            sampling=maybe_json_object(obj, "sampling", where),
            message=maybe_str(obj, "message", where),
            trace=maybe_str(obj, "trace", where),
            resumed=bool(maybe_bool(obj, "resumed", where)),
            reruns=None
            if reruns is None
            else tuple(
                Rerun.from_json(one, f"{where}.reruns") for one in read_list(obj, "reruns", where)
            ),
            crashed_worker=maybe_str(obj, "crashed_worker", where),
            epoch=maybe_int(obj, "epoch", where),
            waited_s=maybe_number(obj, "waited_s", where),
            length_limit=maybe_str(obj, "length_limit", where),
            reducer=maybe_str(obj, "reducer", where),
            control=None
            if control is None
            else ControlRecord.from_json(control, f"{where}.control"),
            cost=None if cost is None else CostRecord.from_json(cost, f"{where}.cost"),
            cached=maybe_int(obj, "cached", where),
            batch=maybe_int(obj, "batch", where),
            batch_live=maybe_str(obj, "batch_live", where),
            judge=maybe_json_object(obj, "judge", where),
            extras={k: cast(JsonValue, v) for k, v in obj.items() if k not in _KNOWN},
            schema_version=version,
        )

    def with_fields(self, **changes: object) -> TaskRecord:
        """A copy with ``changes`` (the record itself never changes)."""
        return replace(self, **changes)  # type: ignore[arg-type]


def _usage(value: object, where: str) -> Usage:
    try:
        return Usage.from_json(value)
    except ValueError as exc:
        raise ValueError(f"{where}.{exc}") from None


SUMMARY_VERSION = 1


#: a record's ``verifier_dir`` is kept as a marker when it is its ``rollout_dir`` and
#: ``/verifier``, as on every record a run makes: one string less per task in memory
#: (core/derived_slot.py)
DerivedSlot.install(TaskRecord, "verifier_dir", "rollout_dir", os.sep + "verifier")


@dataclass(frozen=True, slots=True)
class RunSummary:
    """The run's summary.json: its identity, totals, scores and the task records.
    ``sections`` holds the other top-level fields (settings, coverage, gate, and any a
    newer writer adds) as they are."""

    run_id: str
    tool: JsonObject
    start_ms: int
    stop_ms: int
    partial: bool
    totals: JsonObject
    scores: list[JsonValue]
    tasks: list[TaskRecord]
    sections: JsonObject = field(default_factory=dict)
    schema_version: int = SUMMARY_VERSION

    @classmethod
    def from_json(cls, data: object) -> RunSummary:
        """The summary ``data`` holds; ValueError naming the field when it is not one."""
        where = "summary"
        obj = json_object(data, where)
        tasks = read_list(obj, "tasks", where)
        own = {f.name for f in fields(cls)} - {"sections"}
        return cls(
            run_id=read_str(obj, "run_id", where),
            tool=read_json_object(obj, "tool", where),
            start_ms=read_int(obj, "start_ms", where),
            stop_ms=read_int(obj, "stop_ms", where),
            partial=read_bool(obj, "partial", where),
            totals=read_json_object(obj, "totals", where),
            scores=cast(list[JsonValue], read_list(obj, "scores", where)),
            tasks=[TaskRecord.from_json(task) for task in tasks],
            sections={k: cast(JsonValue, v) for k, v in obj.items() if k not in own},
            schema_version=read_int(obj, "schema_version", where),
        )

    def to_json(self) -> JsonObject:
        data: JsonObject = {"schema_version": self.schema_version}
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
