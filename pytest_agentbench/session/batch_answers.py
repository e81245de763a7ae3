"""``--agentbench-batch``, the collecting side: the wait for each model's batches
(done/total shown as it changes), their answers written to the run's batch store and
charged at the batch price, why each request without one goes live, and the xdist
controller's view of the submitting worker's log (``watch``). ``session/batch.py`` plans
and submits the batches and calls this once they are made.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import field
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from pytest_agentbench.core.fastclass import dataclass
from pytest_agentbench.core.jsontypes import JsonObject

if TYPE_CHECKING:
    from pytest_agentbench.config.settings import Settings
    from pytest_agentbench.models.base import ModelRequest
    from pytest_agentbench.models.batch import BatchEntry
    from pytest_agentbench.models.batch_results import BatchOutcome, BatchStatus
    from pytest_agentbench.models.batch_store import BatchStore
    from pytest_agentbench.models.budget import BudgetLedger
    from pytest_agentbench.models.http import ProtocolClient
    from pytest_agentbench.models.reply_reader import Received

#: Seconds between status checks: a hosted provider's batch takes minutes to hours; the
#: offline scripted provider answers at once.
HOSTED_POLL_S = 30.0
SCRIPTED_POLL_S = 0.2


def poll_s(settings: Settings) -> float:
    if settings.batch_poll_s is not None:
        return settings.batch_poll_s
    return SCRIPTED_POLL_S if settings.model.provider == "scripted" else HOSTED_POLL_S


@dataclass
class BatchPlan:
    """One model's requests for the batch, by cache key."""

    name: str
    settings: Settings
    client: ProtocolClient[Received]
    entries: dict[str, BatchEntry] = field(default_factory=dict)
    requests: dict[str, ModelRequest] = field(default_factory=dict)
    reserved: dict[str, float] = field(default_factory=dict)


def batch_outcomes(
    plan: BatchPlan,
    groups: list[tuple[list[str], list[str]]],
    settings: Settings,
    say: Callable[[str], None],
    failures: dict[str, str],
    until: float,
) -> dict[str, BatchOutcome]:
    """The outcomes of ``plan``'s requests in each group of batches (a group that cannot
    be read gives none: its requests go live, and why is said)."""
    from pytest_agentbench.errors import ModelError

    found: dict[str, BatchOutcome] = {}
    for ids, keys in groups:
        try:
            got = _wait(plan, ids, keys, settings, say, until)
        except ModelError as exc:
            say(f"{plan.name}: {', '.join(ids)} could not be read, its requests go live: {exc}")
            for key in keys:
                failures.setdefault(key, f"the batch could not be read: {exc}")
            continue
        held = set(keys)
        found.update((o.custom_id, o) for o in got if o.custom_id in held)
    return found


def store_answers(
    plan: BatchPlan,
    outcomes: dict[str, BatchOutcome],
    store: BatchStore,
    ledger: BudgetLedger | None,
    failures: dict[str, str],
    say: Callable[[str], None],
) -> JsonObject:
    """Write ``plan``'s answers to the store and charge them; note why the others go
    live. What ``done.json`` says of the model."""
    answered = 0
    for key in plan.entries:
        outcome = outcomes.get(key)
        reserved = plan.reserved.pop(key, None)
        if outcome is not None and outcome.recorded is not None:
            store.put_reply(
                key, outcome.recorded, model=plan.name, endpoint=plan.client.public_endpoint
            )
            answered += 1
            if ledger is not None:  # (an earlier session's batch: charged now, unreserved)
                _charge(ledger, plan, reserved or 0.0, outcome)
            continue
        if ledger is not None and reserved is not None:
            ledger.settle(reserved, 0.0)  # a failed entry is not billed
        if key not in failures:
            why = outcome.failure if outcome is not None else None
            failures[key] = f"the batch did not answer it: {why or 'missing from the results'}"
    if plan.entries:
        left = len(plan.entries) - answered
        say(
            f"{plan.name}: {answered} of {len(plan.entries)} answered by the batch"
            + (f"; {left} go live" if left else "")
        )
    return {"requests": len(plan.entries), "answered": answered}


def _charge(ledger: BudgetLedger, plan: BatchPlan, reserved: float, outcome: BatchOutcome) -> None:
    """Replace a batched request's reservation with what it cost at the batch price (its
    whole worst case when its usage is not known)."""
    from pytest_agentbench.core.cost import usage_cost
    from pytest_agentbench.models.budget import worst_case

    price = plan.settings.price
    assert price is not None and outcome.recorded is not None
    usage = plan.client.reply_usage(outcome.recorded)
    cost = usage_cost(usage, price.batched()) if usage is not None else None
    if cost is None:
        cost = reserved or worst_case(plan.requests[outcome.custom_id], price.batched())
    ledger.settle(reserved, cost)


def _wait(
    plan: BatchPlan,
    ids: list[str],
    keys: list[str],
    settings: Settings,
    say: Callable[[str], None],
    until: float,
) -> list[BatchOutcome]:
    """Wait for ``ids`` until the monotonic instant ``until`` (then the batches still
    running are canceled), showing done/total when it changes (at most every 5 s), and
    return their outcomes."""
    from pytest_agentbench.models.batch_results import wait

    last_said = -math.inf
    last_seen = (-1, -1)

    def progress(states: Sequence[BatchStatus]) -> None:
        nonlocal last_said, last_seen
        seen = (sum(_done(s) for s in states), sum(s.total for s in states))
        now = time.monotonic()
        if seen != last_seen and (seen[0] == seen[1] or now - last_said >= 5.0):
            last_said, last_seen = now, seen
            say(f"{plan.name}: {seen[0]}/{seen[1]} done")

    return wait(
        plan.client,
        ids,
        poll_s=poll_s(settings),
        timeout_s=max(until - time.monotonic(), 0.0),
        on_progress=progress,
        expected=keys,
    )


def _done(state: BatchStatus) -> int:
    """How many of a batch's requests have ended (OpenAI counts ``completed`` and
    ``failed``, Anthropic ``processing`` and the ended kinds)."""
    if state.ended:
        return state.total
    counts = state.counts
    if "processing" in counts:
        return state.total - counts["processing"]
    return counts.get("completed", 0) + counts.get("failed", 0)


def watch(session: pytest.Session, store_dir: Path, stop: threading.Event) -> threading.Thread:
    """xdist's controller: show the batch log the submitting worker writes, line by line,
    until the store is done or ``stop`` is set."""
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")

    def run() -> None:
        seen = 0
        log = store_dir / "log.txt"
        while True:
            finished = (store_dir / "done.json").is_file() or stop.is_set()
            try:
                lines = log.read_text(encoding="utf-8").splitlines()
            except OSError:
                lines = []
            for line in lines[seen:]:
                if reporter is not None:
                    reporter.write_line(line)
            seen = len(lines)
            if finished:
                return
            stop.wait(0.2)

    thread = threading.Thread(target=run, name="agentbench-batch-watch", daemon=True)
    thread.start()
    return thread
