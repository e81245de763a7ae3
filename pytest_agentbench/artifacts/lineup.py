"""Scores of a run with several models or epochs: each task's samples reduced to its
score (mean, median, max, majority, pass@k, pass^k), and each pair of models compared
task by task.

A **sample** is one task × model × epoch (one record). A task's samples that are
harness errors are left out of its reduction (unless counted as failures); a task with
no sample left is excluded from its score and from every comparison, and counted.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Hashable, Mapping, Sequence

from pytest_agentbench.artifacts.controls import task_records
from pytest_agentbench.artifacts.score_stats import estimate, scored_values
from pytest_agentbench.core.jsontypes import JsonObject
from pytest_agentbench.core.paired import Comparison, compare_paired
from pytest_agentbench.core.stats import (
    Reducer,
    clustered_mean,
    pass_at_k,
    pass_hat_k,
    reduce_samples,
)
from pytest_agentbench.core.task_record import TaskRecord

_PASS_K = re.compile(r"^pass([@^])(\d+)$")

Samples = dict[str, list[TaskRecord]]


def task_samples(records: Sequence[TaskRecord]) -> dict[tuple[str, str], Samples]:
    """The records by (suite, model), then by task id, in the order they came."""
    groups: dict[tuple[str, str], Samples] = {}
    for record in records:
        key = (record.suite, record.model)
        groups.setdefault(key, {}).setdefault(record.task_id, []).append(record)
    return groups


def _passed(record: TaskRecord, value: float) -> bool:
    threshold = record.pass_threshold
    return value >= (float(threshold) if threshold is not None else 1.0)


def reduce_task(
    samples: Sequence[TaskRecord], reducer: str, *, errors_as_failures: bool = False
) -> float | None:
    """One task's score from its samples; None when no sample is scored (all harness
    errors) or pass@k / pass^k asks for more samples (k) than were scored."""
    scored = [
        (record, value)
        for record in samples
        for value in scored_values([record], errors_as_failures=errors_as_failures)
    ]
    if not scored:
        return None
    match = _PASS_K.match(reducer)
    if match:
        k, n = int(match.group(2)), len(scored)
        if k > n:
            return None
        c = sum(1 for record, value in scored if _passed(record, value))
        return pass_at_k(n, c, k) if match.group(1) == "@" else pass_hat_k(n, c, k)
    how: Reducer = reducer if reducer in ("mean", "median", "max", "majority") else "mean"  # type: ignore[assignment]
    return reduce_samples([value for _, value in scored], how)


def _reducer(samples: Mapping[str, Sequence[TaskRecord]]) -> str:
    """The reducer the records name (the first that names one), else mean."""
    for records in samples.values():
        for record in records:
            if record.reducer is not None:
                return record.reducer
    return "mean"


def reduced_score(
    samples: Mapping[str, Sequence[TaskRecord]], *, errors_as_failures: bool = False
) -> JsonObject | None:
    """The score of one suite × model over its tasks' reduced scores, with n (tasks), its
    interval and the tasks left out; None when no task ran more than once. The mean
    reducer gets a cluster-robust interval over the samples (tasks are the clusters);
    the others an interval over the task scores (Wilson when each is 0 or 1)."""
    epochs = max((len(records) for records in samples.values()), default=0)
    if epochs < 2 and not any(r.epoch for rs in samples.values() for r in rs):
        return None
    reducer = _reducer(samples)
    values = {
        task: reduce_task(records, reducer, errors_as_failures=errors_as_failures)
        for task, records in samples.items()
    }
    kept = {task: value for task, value in values.items() if value is not None}
    if reducer == "mean":
        flat: list[float] = []
        clusters: list[Hashable] = []
        for task in kept:
            for value in scored_values(samples[task], errors_as_failures=errors_as_failures):
                flat.append(value)
                clusters.append(task)
        result = clustered_mean(flat, clusters).as_dict()
        result["n"] = len(kept)
        result["samples"] = len(flat)
    else:
        result = estimate(list(kept.values())).as_dict()
    return {
        "reducer": reducer,
        "epochs": epochs,
        "excluded": len(values) - len(kept),
        "score": result,
    }


def task_scores(
    records: Sequence[TaskRecord], model: str, *, errors_as_failures: bool = False
) -> dict[tuple[str, str], float | bool | None]:
    """Each (suite, task id) of ``model`` → its reduced score: a bool when the task's
    score is pass/fail, None when it is not scored (harness errors)."""
    out: dict[tuple[str, str], float | bool | None] = {}
    for (suite, name), samples in task_samples(records).items():
        if name != model:
            continue
        reducer = _reducer(samples)
        for task, members in samples.items():
            out[suite, task] = reduce_task(members, reducer, errors_as_failures=errors_as_failures)
    return out


def compare_models(
    first: Mapping[Hashable, float | bool | None],
    second: Mapping[Hashable, float | bool | None],
    *,
    margin: float | None = None,
) -> Comparison:
    """Two models' task scores compared on the tasks both scored: McNemar exact when every
    score is pass/fail, else a sign test and a paired bootstrap (core.paired.compare_paired).
    The one place a model pair is compared, so another comparison can replace it."""
    binary = all(v in (0.0, 1.0) for v in [*first.values(), *second.values()] if v is not None)

    def shape(
        values: Mapping[Hashable, float | bool | None],
    ) -> dict[Hashable, float | bool | None]:
        return {
            k: (None if v is None else bool(v) if binary else float(v)) for k, v in values.items()
        }

    return compare_paired(shape(first), shape(second), margin=margin)


def comparison_row(comparison: Comparison, names: tuple[str, str]) -> JsonObject:
    """A model pair's entry in summary.json's ``comparisons``."""
    return {
        "difference": comparison.difference.as_dict(),
        "test": comparison.test,
        "p_value": comparison.p_value,
        "p_adjusted": comparison.adjusted,
        "family": comparison.family,
        "significant": comparison.significant,
        "excluded": comparison.excluded,
        "paired": comparison.difference.n,
        "verdict": comparison.decision.word,
        "decision": comparison.decision.as_dict(),
        "words": comparison.words(*names),
    }


def model_comparisons(
    records: Sequence[TaskRecord], *, errors_as_failures: bool = False, margin: float | None = None
) -> list[JsonObject] | None:
    """Each pair of the run's models (in the order first seen), compared over every task
    both ran (``suite`` None), then within each suite when there are several; None with
    fewer than two models. With three models or more, the pairs of one scope are one
    family: their p-values are Holm-adjusted and the adjusted ones decide significance.
    Control records are no model's: they are left out."""
    records = task_records(records)
    models = list(dict.fromkeys(r.model for r in records))
    if len(models) < 2:
        return None
    scores = {m: task_scores(records, m, errors_as_failures=errors_as_failures) for m in models}
    suites = list(dict.fromkeys(r.suite for r in records))
    scopes: list[str | None] = [None, *suites] if len(suites) > 1 else [None]
    rows = []
    for suite in scopes:
        pairs = list(itertools.combinations(models, 2))
        found = []
        for first, second in pairs:
            a, b = (
                {k: v for k, v in scores[m].items() if suite is None or k[0] == suite}
                for m in (first, second)
            )
            found.append(compare_models(a, b, margin=margin))  # type: ignore[arg-type]
        if len(found) > 1:
            from pytest_agentbench.core.verdicts import holm

            adjusted = holm([c.p_value if c.difference.n else None for c in found])
            found = [
                c.in_family(p, len(found), margin=margin)
                for c, p in zip(found, adjusted, strict=True)
            ]
        for (first, second), comparison in zip(pairs, found, strict=True):
            row = comparison_row(comparison, (first, second))
            rows.append({"first": first, "second": second, "suite": suite, **row})
    return rows
