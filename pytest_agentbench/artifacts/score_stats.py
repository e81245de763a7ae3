"""The uncertainty of every score the reports show, and the repair curve.

One place computes them (summary.json, ctrf.json, the Markdown and the terminal call
it), so the numbers always agree. A score is the mean reward over the scored tasks (the
rule of ``artifacts.summary.score``); when every reward is 0 or 1 it is a pass rate and
gets the Wilson interval, else a bootstrap with the fixed seed ``DEFAULT_SEED``.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Literal, Protocol

from pytest_agentbench.core.jsontypes import JsonObject, JsonValue
from pytest_agentbench.core.record_parts import Round
from pytest_agentbench.core.records import Attempt
from pytest_agentbench.core.stats import (
    DEFAULT_LEVEL,
    DEFAULT_SEED,
    Estimate,
    bootstrap_mean,
    clustered_mean,
    wilson,
    wilson_bounds,
)
from pytest_agentbench.core.task_record import TaskRecord

#: The two rewards a record holds: the final one and the first try's.
RewardField = Literal["reward", "first_attempt_reward"]


class Scored(Protocol):
    """What a score reads of a record: a :class:`TaskRecord`, or the few fields of one a
    report kept (the HTML report's comparisons keep only these)."""

    @property
    def outcome(self) -> str: ...
    @property
    def reward(self) -> float | None: ...
    @property
    def first_attempt_reward(self) -> float | None: ...


def reward_of(record: Scored, field: RewardField = "reward") -> float | None:
    return record.reward if field == "reward" else record.first_attempt_reward


def scored_values(
    records: Sequence[Scored], field: RewardField = "reward", *, errors_as_failures: bool
) -> list[float]:
    """The rewards a score averages: harness errors out (unless counted as failures, or
    they still hold a reward for ``field``), a missing reward counts as 0."""
    values = []
    for record in records:
        number = reward_of(record, field)
        if errors_as_failures or number is not None or record.outcome != "harness_error":
            values.append(0.0 if number is None else float(number))
    return values


def estimate(
    values: Sequence[float], *, seed: int = DEFAULT_SEED, level: float = DEFAULT_LEVEL
) -> Estimate:
    """Wilson for pass/fail values, a seeded bootstrap for any other rewards. The same
    values give the same estimate, computed once (the terminal, the gate and each
    report ask for the same scores)."""
    return _estimate(tuple(values), seed, level)


@functools.lru_cache(maxsize=16)
def _estimate(values: tuple[float, ...], seed: int, level: float) -> Estimate:
    if all(v in (0.0, 1.0) for v in values):
        return wilson(sum(1 for v in values if v == 1.0), len(values), level)
    return bootstrap_mean(values, seed=seed, level=level)


def score_estimate(
    records: Sequence[Scored],
    field: RewardField = "reward",
    *,
    errors_as_failures: bool = False,
    seed: int = DEFAULT_SEED,
) -> Estimate:
    """The score of ``records`` with its interval. When a task was sampled more than once
    (epochs), the interval is clustered by task — repeated samples of one task are not
    independent evidence — and ``n`` counts tasks, not samples."""
    sampled = [record for record in records if isinstance(record, TaskRecord)]
    if len(sampled) == len(records) and any(record.epoch for record in sampled):
        return clustered_score(sampled, field, errors_as_failures=errors_as_failures)
    return estimate(scored_values(records, field, errors_as_failures=errors_as_failures), seed=seed)


def clustered_score(
    records: Sequence[TaskRecord], field: RewardField = "reward", *, errors_as_failures: bool
) -> Estimate:
    """The mean over every scored sample, with the cluster-robust interval (a task ×
    model is a cluster), clamped to 0–1; ``n`` is the number of tasks."""
    values: list[float] = []
    clusters: list[tuple[str, str, str]] = []
    for record in records:
        for value in scored_values([record], field, errors_as_failures=errors_as_failures):
            values.append(value)
            clusters.append((record.suite, record.model, record.task_id))
    found = clustered_mean(values, clusters)
    tasks = len(set(clusters))
    if found.value is not None and all(v in (0.0, 1.0) for v in values):
        return _effective_wilson(found.value, found.se, tasks, len(values), found.level)
    lo = None if found.lo is None else max(0.0, found.lo)
    hi = None if found.hi is None else min(1.0, found.hi)
    return Estimate(found.value, tasks, found.se, lo, hi, "clustered", found.level)


def _effective_wilson(
    p: float, se: float | None, tasks: int, samples: int, level: float
) -> Estimate:
    """A pass rate over clustered samples: the Wilson interval at the effective sample
    size p(1 − p)/se² (between the number of tasks and the number of samples; the
    number of tasks when the rate is 0 or 1, where the clustered error says nothing)."""
    if se and 0 < p < 1:
        effective = min(float(samples), max(float(tasks), p * (1 - p) / (se * se)))
    else:
        effective = float(tasks)
    lo, hi = wilson_bounds(p, effective, level)
    return Estimate(p, tasks, se, lo, hi, "clustered-wilson", level)


def score_stats(records: Sequence[Scored], *, errors_as_failures: bool = False) -> JsonObject:
    """The ``stats`` block of summary.json and ctrf.json: the repaired (final) score and
    the first-try score, each with n, standard error and interval; never merged."""
    return {
        "score": score_estimate(records, errors_as_failures=errors_as_failures).as_dict(),
        "first_try": score_estimate(
            records, "first_attempt_reward", errors_as_failures=errors_as_failures
        ).as_dict(),
    }


def interval_text(est: Estimate | Mapping[str, JsonValue]) -> str:
    """``0.620 ± 0.069 (n=50, 95 % CI 0.487–0.738)``: the value, its standard error, n and
    the interval ("no score" when nothing was scored)."""
    data = est.as_dict() if isinstance(est, Estimate) else est
    value, se, lo, hi = (_float(data.get(name)) for name in ("value", "se", "lo", "hi"))
    if value is None:
        return "no score"
    spread = f" ± {se:.3f}" if se is not None else ""
    pct = round((_float(data.get("level")) or DEFAULT_LEVEL) * 100)
    ci = f", {pct} % CI {lo:.3f}–{hi:.3f}" if lo is not None and hi is not None else ""
    return f"{value:.3f}{spread} (n={data.get('n')}{ci})"


def attempt_rounds(attempts: Sequence[Attempt]) -> tuple[Round, ...]:
    """Per attempt (round 0 is the first try): its reward (None without a verdict) and
    its total tokens, for the repair curve."""
    rounds = []
    for attempt in attempts:
        verdict = attempt.verdict
        reward = verdict.get("reward") if isinstance(verdict, Mapping) else None
        tokens = attempt.usage.get("total") if isinstance(attempt.usage, Mapping) else None
        rounds.append(
            Round(
                reward=float(reward) if isinstance(reward, int | float) else None,
                tokens=tokens if isinstance(tokens, int) and not isinstance(tokens, bool) else None,
            )
        )
    return tuple(rounds)


def _float(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _round_reward(record: TaskRecord, index: int, errors_as_failures: bool) -> float | None:
    """The task's reward after round ``index`` (its last round when it stopped earlier);
    None when it is not scored there (the harness lost that round)."""
    rounds = record.rounds
    if not rounds:
        field: RewardField = "first_attempt_reward" if index == 0 else "reward"
        values = scored_values([record], field, errors_as_failures=errors_as_failures)
        return values[0] if values else None
    reward = rounds[min(index, len(rounds) - 1)].reward
    if reward is not None:
        return float(reward)
    if record.outcome == "harness_error" and not errors_as_failures:
        return None
    return 0.0


def _depth(record: TaskRecord) -> int:
    """The rounds a task ran: its per-round entries (none when it never reached the
    model), else (a record written before they were kept) its attempt count."""
    if record.rounds is not None:
        return len(record.rounds)
    return record.attempts if record.attempts > 0 else 1


def _round_tokens(record: TaskRecord, index: int) -> int | None:
    rounds = record.rounds
    if rounds is None or index >= len(rounds):
        return None
    return rounds[index].tokens


def repair_curve(
    records: Sequence[TaskRecord], *, errors_as_failures: bool = False
) -> list[JsonValue] | None:
    """Per round (0 = first try): the score with its interval, the tasks that first
    passed in that round and the tokens that round used; None when no task had a repair
    round allowed. Round 0 is the first-try score, the last round the final score."""
    allowed = [r for r in records if r.repair.repairs]
    if not allowed:
        return None
    depth = max([1, *(_depth(r) for r in records)])
    curve: list[JsonValue] = []
    passed_before: set[int] = set()
    for index in range(depth):
        values = []
        new_passes = 0
        tokens: int | None = 0
        for position, record in enumerate(records):
            reward = _round_reward(record, index, errors_as_failures)
            if reward is not None:
                values.append(reward)
                threshold = record.pass_threshold
                limit = float(threshold) if threshold is not None else 1.0
                if reward >= limit and position not in passed_before:
                    passed_before.add(position)
                    new_passes += 1
            if index < _depth(record):
                used = _round_tokens(record, index)
                tokens = tokens + used if tokens is not None and used is not None else None
        curve.append(
            {
                "round": index,
                "score": estimate(values).as_dict(),
                "new_passes": new_passes,
                "tokens": tokens,
            }
        )
    return curve
