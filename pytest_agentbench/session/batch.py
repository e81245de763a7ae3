"""``--agentbench-batch``: the run's first-round requests through the providers' batch
APIs (OpenAI's Batch API, Anthropic's Message Batches: half the price, answered within
24 hours), before the first item runs; everything after them goes live.

Which requests: the first request of every task the run will send (each model, each
epoch): a plain answer's, and the first turn of the built-in agent loop (its tools
offered), built by the function the rollout builds it with
(runner/agent.first_request), so its body and its cache key are the rollout's. Left
out: tasks ``--agentbench-resume`` finds done, deselected items, controls, tasks run by
an agent under test (its requests come through the gateway, live), requests the
response cache answers, and requests the spending cap cannot reserve at the batch price.

How: one process of the run (the first to take the store's lock; the others wait for
it and read) submits one batch per model, writes its ids to the run folder
(``batches.json``) before waiting, waits (showing done/total), and writes the answers
to the run's batch store (models/batch_store.py), which every process's clients read: a
rollout's first request whose key has an answer is replayed from it, like a cache hit.
A request whose entry failed, expired or was canceled is sent live, its record saying
why. ``--agentbench-resume`` fetches the results of the batches ``batches.json`` names
instead of submitting them again. Ctrl-C while waiting leaves the batches running at
the provider: resume fetches them.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from pytest_agentbench.core.jsontypes import JsonObject, JsonValue

if TYPE_CHECKING:
    from pytest_agentbench.config.settings import Settings
    from pytest_agentbench.models.base import ModelRequest
    from pytest_agentbench.models.batch import BatchEntry, BatchOutcome, BatchStatus
    from pytest_agentbench.models.batch_store import BatchStore
    from pytest_agentbench.models.budget import BudgetLedger
    from pytest_agentbench.models.http import ProtocolClient, Received
    from pytest_agentbench.session.run import RunState

#: The run folder's file of submitted batches (schemas/batches.schema.json).
BATCHES_FILE = "batches.json"
BATCHES_VERSION = 1
#: Seconds between status checks: a hosted provider's batch takes minutes to hours; the
#: offline scripted provider answers at once.
HOSTED_POLL_S = 30.0
SCRIPTED_POLL_S = 0.2


def poll_s(settings: Settings) -> float:
    if settings.batch_poll_s is not None:
        return settings.batch_poll_s
    return SCRIPTED_POLL_S if settings.model.provider == "scripted" else HOSTED_POLL_S


@dataclass
class _Planned:
    """One model's requests for the batch, by cache key."""

    name: str
    settings: Settings
    client: ProtocolClient[Received]
    entries: dict[str, BatchEntry] = field(default_factory=dict)
    requests: dict[str, ModelRequest] = field(default_factory=dict)
    reserved: dict[str, float] = field(default_factory=dict)


def refuse_unsupported(state: RunState) -> None:
    """At the start of a run with ``--agentbench-batch``: a clear error naming each model
    whose provider has no batch API (nothing was sent)."""
    from pytest_agentbench.models.batch import batch_support

    services = state.services
    missing = []
    for one in state.settings.lineup():
        client = services.bare(one.model_name if one is not state.settings else "")
        why = None if client is None else batch_support(client)
        if client is None:
            why = "its client is a plugin's, not a built-in protocol client"
        if why is not None:
            missing.append(f"{one.model_name} ({why})")
    if missing:
        raise pytest.UsageError(
            "--agentbench-batch: no batch API for " + "; ".join(missing) + ". OpenAI's Batch "
            "API and Anthropic's Message Batches (and the offline scripted provider) have "
            "one; run without --agentbench-batch for these models (docs/cost.md)"
        )


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def run_batches(session: pytest.Session, state: RunState) -> None:
    """Before the first item runs: make sure the run's batch store is complete (submit
    and wait here, or wait for the process that does), then give it to the clients."""
    from pytest_agentbench.models.batch_store import BatchStore
    from pytest_agentbench.session.items import TaskItem

    items = [item for item in session.items if isinstance(item, TaskItem)]
    if not items:
        return
    store = BatchStore(state.services.marks() / "batch")
    say = _sayer(session, store)
    with _locked(store.lock_path):
        if not store.done:
            _submit_and_wait(items, state, store, say)
    store.load()
    state.services.attach_batch(store)


def _sayer(session: pytest.Session, store: BatchStore) -> Callable[[str], None]:
    """Print a line on the terminal (this process's, when it has one) and keep it in the
    store's log, which the xdist controller shows (``watch``)."""
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    worker = hasattr(session.config, "workerinput")

    def say(line: str) -> None:
        text = f"agentbench batch: {line}"
        store.say(text)
        if reporter is not None and not worker:
            reporter.write_line(text)

    return say


def _plan(items: Sequence[pytest.Item], state: RunState) -> dict[str, _Planned]:
    """Per model: the first-round requests of the items to run, by cache key."""
    from pytest_agentbench.artifacts.paths import task_dir
    from pytest_agentbench.models.batch import BatchEntry
    from pytest_agentbench.runner.agent import first_request
    from pytest_agentbench.runner.forecast import batched
    from pytest_agentbench.session.execution import resumable_record, with_overrides
    from pytest_agentbench.session.items import SuiteFile

    services = state.services
    tools = services.tools()
    plans: dict[str, _Planned] = {}
    for item in items:
        raw = item.task  # type: ignore[attr-defined]
        if getattr(item, "planned", None) is not None or not batched(raw):
            continue
        settings = state.settings.for_model(raw.model)
        task = with_overrides(raw, settings)
        if settings.resume:
            name = settings.model_name
            directory = task_dir(state.folder.path, task.suite, task.id, name, task.epoch)
            done = resumable_record(settings, directory, item.nodeid)
            if done is not None and (done.sampling or {}) == task.sampling.public():
                continue
        parent = item.parent
        assert isinstance(parent, SuiteFile)
        services.prepare(
            f"{parent.nodeid}[{raw.model}]", parent.model_tasks.get(raw.model, ()), raw.model
        )
        client = services.bare(raw.model)
        assert client is not None  # refuse_unsupported said so at the start
        plan = plans.get(settings.model_name)
        if plan is None:
            plan = plans[settings.model_name] = _Planned(settings.model_name, settings, client)
        if task.mode == "agent" and any(name not in tools for name in task.tools):
            continue  # the rollout says which tool is missing
        request = first_request(
            task,
            max_tokens=settings.max_tokens or task.max_tokens,
            stream=settings.stream,
            tools=tools,
        )
        key = client.request_key(request)
        if key in plan.entries:
            continue
        cache = client.cache
        if cache is not None and cache.reads and cache.path(key).is_file():
            continue  # the response cache answers it: nothing to pay for
        body = {k: v for k, v in client.build_body(request).items() if k not in _LIVE_ONLY}
        headers = client.request_headers(request)
        plan.entries[key] = BatchEntry(custom_id=key, body=body, headers=headers)
        plan.requests[key] = request
    return plans


#: Body fields of a live request only: a batch entry's reply is one JSON document.
_LIVE_ONLY = ("stream", "stream_options")


def _submit_and_wait(
    items: Sequence[pytest.Item], state: RunState, store: BatchStore, say: Callable[[str], None]
) -> None:
    from pytest_agentbench.errors import ModelError

    plans = _plan(items, state)
    failures: dict[str, str] = {}
    run_dir = state.folder.ensure()
    earlier = _read_batches(run_dir) if state.settings.resume else {}
    ledger = state.services.budget() if state.settings.max_cost is not None else None
    submitted: JsonObject = {"models": {}}
    for plan in plans.values():
        outcomes: dict[str, BatchOutcome] = {}
        old_ids = earlier.get(plan.name, [])
        if old_ids:  # --agentbench-resume: a batch already paid for is fetched, not sent again
            say(f"{plan.name}: fetching the earlier batch(es) {', '.join(old_ids)}")
            try:
                fetched = _wait(plan, old_ids, state.settings, say)
            except ModelError as exc:  # gone at the provider: submitted again below
                say(f"{plan.name}: the earlier batch(es) could not be read: {exc}")
                fetched = []
            outcomes = {o.custom_id: o for o in fetched if o.custom_id in plan.entries}
        fresh = [e for key, e in plan.entries.items() if key not in outcomes]
        fresh = _within_cap(plan, fresh, ledger, failures)
        if fresh:
            got, why = _submit(plan, fresh, run_dir, state.settings, say)
            outcomes.update({o.custom_id: o for o in got if o.custom_id in plan.entries})
            if why is not None:
                for entry in fresh:
                    failures.setdefault(entry.custom_id, why)
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
        models = submitted["models"]
        assert isinstance(models, dict)
        models[plan.name] = {"requests": len(plan.entries), "answered": answered}
        if plan.entries:
            left = len(plan.entries) - answered
            say(
                f"{plan.name}: {answered} of {len(plan.entries)} answered by the batch"
                + (f"; {left} go live" if left else "")
            )
    store.finish(failures, submitted)


def _submit(
    plan: _Planned,
    fresh: list[BatchEntry],
    run_dir: Path,
    settings: Settings,
    say: Callable[[str], None],
) -> tuple[list[BatchOutcome], str | None]:
    """Submit ``fresh``, write the batch ids to the run folder, wait for the outcomes.
    A batch API that fails (the provider refuses the batch, or cannot be reached) is not
    the end of the run: its requests go live, and why is said (the second value)."""
    from pytest_agentbench.errors import ModelError
    from pytest_agentbench.models import batch as wire

    try:
        ids = wire.submit(plan.client, fresh)
    except wire.BatchError as exc:
        if exc.batch_ids:  # some were made before the failure: they run, and cost
            _write_batches(run_dir, plan.name, list(exc.batch_ids), len(fresh))
        say(f"{plan.name}: the batch could not be submitted, its requests go live: {exc}")
        return [], f"the batch could not be submitted: {exc}"
    except ModelError as exc:
        say(f"{plan.name}: the batch could not be submitted, its requests go live: {exc}")
        return [], f"the batch could not be submitted: {exc}"
    _write_batches(run_dir, plan.name, ids, len(fresh))
    say(
        f"{plan.name}: {len(fresh)} first-round request(s) submitted as {', '.join(ids)} "
        "(results at the provider; --agentbench-resume fetches them if this run stops)"
    )
    try:
        return _wait(plan, ids, settings, say), None
    except KeyboardInterrupt:
        say(
            f"{plan.name}: interrupted; {', '.join(ids)} keep(s) running at the provider: "
            f"--agentbench-resume {run_dir} fetches the results instead of paying again"
        )
        raise
    except ModelError as exc:
        say(f"{plan.name}: the batch could not be read, its requests go live: {exc}")
        return [], f"the batch could not be read: {exc}"


def _within_cap(
    plan: _Planned,
    entries: list[BatchEntry],
    ledger: BudgetLedger | None,
    failures: dict[str, str],
) -> list[BatchEntry]:
    """The entries whose worst case at the batch price the spending cap can reserve;
    the others are not submitted (they meet the cap live, as any request does)."""
    from pytest_agentbench.models.budget import worst_case

    price = plan.settings.price
    if ledger is None or price is None:
        return entries
    kept = []
    for entry in entries:
        worst = worst_case(plan.requests[entry.custom_id], price.batched())
        if ledger.reserve(worst):
            plan.reserved[entry.custom_id] = worst
            kept.append(entry)
        else:
            failures[entry.custom_id] = (
                "not submitted: its worst case would pass the --agentbench-max-cost cap"
            )
    return kept


def _charge(ledger: BudgetLedger, plan: _Planned, reserved: float, outcome: BatchOutcome) -> None:
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
    plan: _Planned, ids: list[str], settings: Settings, say: Callable[[str], None]
) -> list[BatchOutcome]:
    """Wait for ``ids`` (showing done/total now and then) and return their outcomes."""
    from pytest_agentbench.models import batch as wire

    shown: list[tuple[int, int] | float] = [-1.0, (-1, -1)]

    def progress(states: Sequence[BatchStatus]) -> None:
        done, total = sum(_done(s) for s in states), sum(s.total for s in states)
        now = time.monotonic()
        last = shown[0]
        assert isinstance(last, float)
        if shown[1] != (done, total) and (done == total or now - last >= 5.0):
            shown[0], shown[1] = now, (done, total)
            say(f"{plan.name}: {done}/{total} done")

    return wire.wait(
        plan.client,
        ids,
        poll_s=poll_s(settings),
        timeout_s=settings.batch_wait_s,
        on_progress=progress,
        expected=list(plan.entries),
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


def _read_batches(run_dir: Path) -> dict[str, list[str]]:
    """The batch ids an earlier session of this run folder submitted, by model."""
    try:
        data = json.loads((run_dir / BATCHES_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    found: dict[str, list[str]] = {}
    batches = data.get("batches") if isinstance(data, dict) else None
    for entry in batches if isinstance(batches, list) else []:
        if isinstance(entry, dict) and isinstance(entry.get("model"), str):
            ids = entry.get("ids")
            if isinstance(ids, list):
                found.setdefault(str(entry["model"]), []).extend(str(i) for i in ids)
    return found


def _write_batches(run_dir: Path, model: str, ids: list[str], requests: int) -> None:
    """Add the batches just submitted to the run folder's ``batches.json`` (atomically),
    before waiting for them: an interrupted run's resume finds them."""
    from pytest_agentbench.artifacts.jsonio import write_json_atomic

    path = run_dir / BATCHES_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        data = None
    batches: list[JsonValue] = []
    if isinstance(data, dict) and isinstance(data.get("batches"), list):
        batches = list(data["batches"])
    batches.append(
        {"model": model, "ids": list(ids), "requests": requests, "submitted_at": time.time()}
    )
    write_json_atomic(path, {"schema_version": BATCHES_VERSION, "batches": batches})


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
