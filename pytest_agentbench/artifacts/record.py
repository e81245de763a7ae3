"""The small per-task record that travels from a worker to the controller and feeds
ctrf.json, summary.json and the terminal summary: a :class:`TaskRecord` made by
:func:`build_record` alone, travelling as its JSON form (a few hundred bytes)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from pytest_agentbench.artifacts.score_stats import attempt_rounds
from pytest_agentbench.core.jsontypes import JsonObject
from pytest_agentbench.core.record_parts import LoopRecord, RepairSettings, VerdictRecord
from pytest_agentbench.core.records import Rollout
from pytest_agentbench.core.task_record import Failure, FailureKind, Outcome, TaskRecord
from pytest_agentbench.core.usage import Usage


def _evidence(failure: Failure | None, rollout_dir: Path) -> Failure | None:
    """``failure`` pointing at the file that shows it, when it points nowhere yet: the
    verifier dir for a verifier's failure, the trajectory for the model's and the loop
    watch's, nothing for the harness's own."""
    if failure is None or failure.evidence is not None or failure.stage == "harness":
        return failure
    where = rollout_dir / ("verifier" if failure.stage == "verifier" else "trajectory.json")
    return replace(failure, evidence=str(where))


def verdict_record(verdict: Mapping[str, object]) -> VerdictRecord:
    """The part of a verifier's verdict the reports read: its reward (None unless a
    number), its metrics ({} unless an object) and its error (None when it judged)."""
    reward = verdict.get("reward")
    metrics = verdict.get("metrics")
    error = verdict.get("error")
    return VerdictRecord(
        reward=reward if isinstance(reward, int | float) and not isinstance(reward, bool) else None,
        metrics=dict(metrics) if isinstance(metrics, dict) else {},
        error=None if error is None else str(error),
    )


def task_record(
    rollout: Rollout,
    *,
    nodeid: str,
    file: str,
    rollout_dir: Path,
    max_tokens: int | None,
    min_score: float | None = None,
    sampling: JsonObject | None = None,
    epoch: int | None = None,
    reducer: str | None = None,
) -> TaskRecord:
    """Summarise ``rollout`` for the run-level reports (the details stay in result.json).
    ``sampling`` is the sampling settings sent with its requests (``Sampling.public()``);
    ``epoch`` and ``reducer`` are given for a task run more than once (what the summary
    reduces its samples with)."""
    verdict, loop = rollout.verdict, rollout.loop
    feedback = [
        str(a.verdict.get("feedback"))
        for a in rollout.attempts
        if a.verdict is not None and a.verdict.get("feedback")
    ]
    waited = sum(attempt.waited_s for attempt in rollout.attempts)
    record = build_record(
        nodeid=nodeid,
        file=file,
        suite=rollout.suite,
        task_id=rollout.task_id,
        model=rollout.model,
        outcome=rollout.outcome,
        reward=rollout.reward,
        first_attempt_reward=rollout.first_attempt_reward,
        pass_threshold=rollout.pass_threshold,
        attempts=len(rollout.attempts),
        rounds=attempt_rounds(rollout.attempts),
        repaired=rollout.repaired,
        incomplete=rollout.incomplete,
        failure_kind=rollout.failure_kind,
        repair=RepairSettings.from_json(rollout.repair),
        loop=None if loop is None else LoopRecord.from_json(loop),
        last_feedback=feedback[-1] if feedback else None,
        usage=Usage.from_json(rollout.usage),
        error=rollout.error,
        verdict=None if verdict is None else verdict_record(verdict),
        max_tokens=max_tokens,
        sampling=dict(sampling or {}),
        min_score=min_score,
        start_ms=int(rollout.started_at * 1000),
        duration_ms=max(0, int(rollout.elapsed_s * 1000)),
        rollout_dir=str(rollout_dir),
        verifier_dir=f"{rollout_dir}{os.sep}verifier",
        failure=_evidence(rollout.failure, rollout_dir),
        judge=judge_totals([a.judge for a in rollout.attempts if a.judge is not None]),
        waited_s=round(waited, 3) if waited >= 0.0005 else None,
        length_limit=(
            rollout.attempts[-1].length_limit
            if rollout.outcome == "length_exceeded" and rollout.attempts
            else None
        ),
        epoch=epoch,
        reducer=reducer,
    )
    return SHARED.share(record)


def judge_totals(parts: list[JsonObject]) -> JsonObject | None:
    """The task record's ``judge`` table from its attempts' judging: the last one's
    model, fingerprint, hashes, score and error, with calls, usage and wall time summed
    over all of them. None when no judge graded the task."""
    if not parts:
        return None
    from pytest_agentbench.core.usage import sum_usage

    last = parts[-1]
    usages = [u for u in (p.get("usage") for p in parts) if isinstance(u, dict)]
    calls = [c for c in (p.get("calls") for p in parts) if isinstance(c, int)]
    elapsed = [e for e in (p.get("elapsed_s") for p in parts) if isinstance(e, int | float)]
    keep = ("model", "base_url", "fingerprint", "template_hash", "rubric_digest")
    table: JsonObject = {k: last.get(k) for k in (*keep, "scale", "samples")}
    table.update(
        {
            "calls": sum(calls),
            "usage": sum_usage(usages),
            "elapsed_s": round(sum(elapsed), 6),
            "score": last.get("score"),
            "sample_scores": last.get("sample_scores"),
            "agreement": last.get("agreement"),
            "error": last.get("error"),
        }
    )
    return table


def record_without_rollout(
    *,
    nodeid: str,
    file: str,
    suite: str,
    task_id: str,
    model: str,
    outcome: Outcome,
    cause: str,
    failure_kind: FailureKind,
    start_ms: int,
    duration_ms: int,
    rollout_dir: str | None = None,
    pass_threshold: float | None = None,
    usage: Usage | None = None,
) -> TaskRecord:
    """The record of a task that ended without a rollout record (a plugin's exception,
    pytest-timeout, a crashed xdist worker): the same fields as :func:`task_record`, no
    attempts, and ``cause`` kept whole as its error, message and trace."""
    return build_record(
        nodeid=nodeid,
        file=file,
        suite=suite,
        task_id=task_id,
        model=model,
        outcome=outcome,
        reward=None,
        first_attempt_reward=None,
        pass_threshold=pass_threshold,
        attempts=0,
        rounds=(),
        repaired=False,
        incomplete=False,
        failure_kind=failure_kind,
        repair=RepairSettings(),
        loop=None,
        last_feedback=None,
        usage=usage if usage is not None else Usage(),
        error=cause,
        verdict=None,
        max_tokens=None,
        min_score=None,
        start_ms=start_ms,
        duration_ms=duration_ms,
        rollout_dir=rollout_dir,
        verifier_dir=str(Path(rollout_dir) / "verifier") if rollout_dir else None,
        failure=Failure.of(failure_kind, cause),
        message=cause,
        trace=cause,
    )


#: Fields whose values repeat from task to task (the repair settings, the sampling sent,
#: the empty sampling table too, a verdict without metrics, the rounds of a task tried
#: once): a record keeps the one copy the process has seen (equal values, shared), so a
#: long run holds each distinct value once. Bounded: short values only, and at most
#: SHARED_LIMIT of them.
SHARED_FIELDS = ("repair", "sampling", "verdict", "rounds")
SHARED_LIMIT = 256
SHARED_REPR_MAX = 200


class SharedParts:
    """The repeating parts of the records one process made or received, kept once. The
    record is shared where it is built (so the item, its report and the run's list hold
    one record, not an unshared original beside a shared copy) and again where a record
    arrives from an xdist worker."""

    def __init__(self) -> None:
        self.kept: dict[str, object] = {}
        #: the ids of the kept values (each held alive by ``kept``, so never reused): a
        #: record shared already — an item's, again at its report — skips the repr
        self.kept_ids: set[int] = set()

    def share(self, record: TaskRecord) -> TaskRecord:
        """``record`` with its repeating parts replaced by the equal ones kept already
        (``record`` itself when they are those already)."""
        changes: dict[str, object] = {}
        for name in SHARED_FIELDS:
            value = getattr(record, name)
            if value is None or id(value) in self.kept_ids:
                continue
            key = f"{name}={value!r}"
            if len(key) > SHARED_REPR_MAX:
                continue
            kept = self.kept.get(key)
            if kept is None and len(self.kept) < SHARED_LIMIT:
                self.kept[key] = value
                self.kept_ids.add(id(value))
            elif kept is not None and kept is not value:
                changes[name] = kept
        return replace(record, **changes) if changes else record  # type: ignore[arg-type]


#: The process's shared parts (thread-safe enough: a race only misses a share).
SHARED = SharedParts()

build_record = TaskRecord
"""The one place a :class:`TaskRecord` is made (its constructor, named for the readers)."""
