"""The run's cost, defined once: every report (terminal, Markdown, summary.json, the CTRF
run extra, the HTML page) shows this module's answer for the records it shows, so a
report's cost is always the sum of its tasks' records.

A record's ``cost`` (core/cost.CostRecord) is set where the task ends, from its usage and
its model's price. The totals are:

* ``usd``: the sum of the records' known costs (the model under test and any judge);
  None when no record's cost is known;
* ``model_usd`` and ``judge_usd``: the same for each part (``judge_usd`` None when no
  judged task's judge cost is known); a record whose model part or judge part is not
  known has no known ``usd`` and counts in ``unknown``, its known part still counts in
  its own total, so ``usd`` equals ``model_usd + judge_usd`` only when ``unknown`` is 0;
* ``unknown``: how many records that reached the model have no known cost (no price, or
  usage the provider did not report), so a sum that misses some says so;
* ``tasks``: records with a cost; ``solved``: records that passed; ``judged``: records
  a judge graded (their judge part is priced at the judge model's own price);
* ``per_solved_usd``: ``usd`` over the solved tasks (None when none passed, or a cost is
  unknown: an unknown part would make it look cheaper than it was);
* ``saved_usd``: what the requests replayed from the response cache would have cost.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import replace

from pytest_agentbench.core.cost import CostRecord, Price, task_cost, usage_cost
from pytest_agentbench.core.jsontypes import JsonObject
from pytest_agentbench.core.task_record import TaskRecord
from pytest_agentbench.core.usage import Usage


def reached_model(record: TaskRecord) -> bool:
    """Whether the task reached the model and may have been billed: it reported usage,
    or made an attempt that the provider did not refuse outright. A task whose only
    request was answered with an HTTP error (a 400, a 401, a 529 after its retries) and
    no usage was not billed: providers charge for what they generate."""
    usage = record.usage
    if any(usage.get(name) is not None for name in ("input", "output", "total")):
        return True
    failure = record.failure
    refused = failure is not None and failure.status is not None and record.attempts <= 1
    return record.attempts > 0 and not refused


def judge_cost(record: TaskRecord, price: Price | None) -> float | None:
    """What the judge that graded ``record`` cost at ``price`` (the judge model's own):
    0 when it made no call, None when its price or its usage is not known."""
    table = record.judge or {}
    if table.get("calls") == 0:
        return 0.0
    usage = table.get("usage")
    return usage_cost(Usage.from_json(usage), price) if isinstance(usage, dict) else None


def with_cost(
    record: TaskRecord,
    price: Price | None,
    *,
    cached_usage: Usage | None = None,
    judge_price: Price | None = None,
    batch_usage: Usage | None = None,
) -> TaskRecord:
    """``record`` with its cost at ``price``, and, when a judge graded it, the judge's
    usage at ``judge_price`` apart. A task that never reached the model cost nothing (0,
    known), whatever the price."""
    judged = record.judge is not None
    if not reached_model(record) and not judged:
        source = price.source if price is not None else None
        return replace(record, cost=CostRecord(usd=0.0, model_usd=0.0, price=source))
    cost = task_cost(
        record.usage if reached_model(record) else Usage(),
        price if reached_model(record) else Price(input=0.0, output=0.0),
        judged=judged,
        judge_usd=judge_cost(record, judge_price) if judged else None,
        judge_price=judge_price.source if judge_price is not None else None,
        cached_usage=cached_usage,
        batch_usage=batch_usage,
    )
    if not reached_model(record):
        cost = replace(cost, price=price.source if price is not None else None)
    return replace(record, cost=cost)


def _sum(values: list[float]) -> float | None:
    return math.fsum(values) if values else None


def run_cost(records: Iterable[TaskRecord]) -> JsonObject | None:
    """The cost totals of ``records`` (see the module docstring); None when no record
    carries a cost (a run that priced nothing: the offline scripted default)."""
    whole: list[float] = []
    model: list[float] = []
    judge: list[float] = []
    saved: list[float] = []
    unknown = tasks = solved = judged = 0
    for record in records:
        cost = record.cost
        if cost is None:
            continue
        tasks += 1
        judged += record.judge is not None
        solved += record.outcome == "passed"
        if cost.usd is None:
            unknown += 1
        else:
            whole.append(cost.usd)
        if cost.model_usd is not None:
            model.append(cost.model_usd)
        if cost.judge_usd is not None:
            judge.append(cost.judge_usd)
        if cost.saved_usd is not None:
            saved.append(cost.saved_usd)
    if not tasks:
        return None
    usd = _sum(whole)
    per_solved = usd / solved if usd is not None and solved and not unknown else None
    return {
        "usd": usd,
        "model_usd": _sum(model),
        "judge_usd": _sum(judge),
        "tasks": tasks,
        "judged": judged,
        "unknown": unknown,
        "solved": solved,
        "per_solved_usd": per_solved,
        "saved_usd": _sum(saved),
    }


def cache_totals(records: Iterable[TaskRecord]) -> JsonObject | None:
    """What the response cache did for ``records``: ``hits`` (model calls replayed, not
    sent), ``tasks`` (records with a hit) and ``saved_usd`` (what the hits would have
    cost, None when no price is known); None when nothing was replayed."""
    hits = tasks = 0
    saved: list[float] = []
    for record in records:
        if not record.cached:
            continue
        hits += record.cached
        tasks += 1
        cost = record.cost
        if cost is not None and cost.saved_usd is not None:
            saved.append(cost.saved_usd)
    if not hits:
        return None
    return {"hits": hits, "tasks": tasks, "saved_usd": _sum(saved)}


def batch_totals(records: Iterable[TaskRecord]) -> JsonObject | None:
    """What the providers' batch APIs did for ``records`` (``--agentbench-batch``):
    ``requests`` (model calls a batch answered), ``tasks`` (records with one), ``live``
    (records whose planned batched request went live, and so were paid at the live
    price) and ``saved_usd`` (what the batch price saved against the live one, None
    when no price is known); None when nothing was batched or planned."""
    requests = tasks = live = 0
    saved: list[float] = []
    for record in records:
        live += record.batch_live is not None
        if not record.batch:
            continue
        requests += record.batch
        tasks += 1
        cost = record.cost
        if cost is not None and cost.batch_saved_usd is not None:
            saved.append(cost.batch_saved_usd)
    if not requests and not live:
        return None
    return {"requests": requests, "tasks": tasks, "live": live, "saved_usd": _sum(saved)}
