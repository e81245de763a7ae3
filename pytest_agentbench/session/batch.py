"""``--agentbench-batch``: the run's first-round requests through the providers' batch
APIs (OpenAI's Batch API, Anthropic's Message Batches: half the price, answered within
24 hours), before the first item runs; everything after them goes live.

Which requests: the first request of every task the run will send (each model, each
epoch): a plain answer's, and the first turn of the built-in agent loop (its tools
offered), built by the function the rollout builds it with
(runner/turn_requests.first_request), so its body and its cache key are the rollout's. Left
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

This module plans and submits (and keeps ``batches.json``); ``session/batch_answers.py``
waits for the batches, stores and charges their answers, and shows the progress.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from pytest_agentbench.core.jsontypes import JsonObject, JsonValue
from pytest_agentbench.session.batch_answers import BatchPlan, batch_outcomes, store_answers

if TYPE_CHECKING:
    from pytest_agentbench.models.batch import BatchEntry
    from pytest_agentbench.models.batch_store import BatchStore
    from pytest_agentbench.models.budget import BudgetLedger
    from pytest_agentbench.session.run import RunState
    from pytest_agentbench.session.task_item import TaskItem

#: The run folder's file of submitted batches (schemas/batches.schema.json).
BATCHES_FILE = "batches.json"
BATCHES_VERSION = 1


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
    from pytest_agentbench.session.task_item import TaskItem

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


def _plan(items: Sequence[TaskItem], state: RunState) -> dict[str, BatchPlan]:
    """Per model: the first-round requests of the items to run, by cache key."""
    from pytest_agentbench.artifacts.paths import task_dir
    from pytest_agentbench.models.batch import BatchEntry
    from pytest_agentbench.runner.forecast import batched
    from pytest_agentbench.runner.turn_requests import first_request
    from pytest_agentbench.session.items import SuiteFile
    from pytest_agentbench.session.task_setup import resumable_task, with_overrides

    services = state.services
    tools = services.tools()
    plans: dict[str, BatchPlan] = {}
    for item in items:
        raw = item.task
        if item.planned is not None or not batched(raw):
            continue
        settings = state.settings.for_model(raw.model)
        task = with_overrides(raw, settings)
        if settings.resume:
            name = settings.model_name
            directory = task_dir(state.folder.path, task.suite, task.id, name, task.epoch)
            if resumable_task(settings, task, directory, item.nodeid) is not None:
                continue  # done in the earlier session: not sent again
        parent = item.parent
        assert isinstance(parent, SuiteFile)
        services.prepare(
            f"{parent.nodeid}[{raw.model}]", parent.model_tasks.get(raw.model, ()), raw.model
        )
        client = services.bare(raw.model)
        assert client is not None  # refuse_unsupported said so at the start
        plan = plans.get(settings.model_name)
        if plan is None:
            plan = plans[settings.model_name] = BatchPlan(settings.model_name, settings, client)
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
    items: Sequence[TaskItem], state: RunState, store: BatchStore, say: Callable[[str], None]
) -> None:
    """Submit every model's batch first, then wait for them all (a hosted provider takes
    up to 24 hours: models are not waited for one after the other), then store the
    answers and say why each request without one goes live."""
    plans = _plan(items, state)
    failures: dict[str, str] = {}
    run_dir = state.folder.ensure()
    # batches already submitted: by an earlier session of the run folder (resume), or
    # by a process of this run that died waiting (an xdist worker): fetched, not re-sent
    earlier = _read_batches(store.folder, say)
    if state.settings.resume:
        for model, (ids, keys) in _read_batches(run_dir, say).items():
            known = earlier.setdefault(model, ([], set()))
            known[0].extend(i for i in ids if i not in known[0])
            known[1].update(keys)
    ledger = state.services.budget() if state.settings.max_cost is not None else None
    #: per model, the groups of batches to wait for (earlier ones, this one) and the
    #: requests each holds
    waiting: dict[str, list[tuple[list[str], list[str]]]] = {}
    for plan in plans.values():
        old_ids, covered = earlier.get(plan.name, ([], set()))
        groups = waiting[plan.name] = []
        held = [key for key in plan.entries if key in covered]
        if held:  # already paid for: fetched, not sent again
            groups.append((list(old_ids), held))
            say(f"{plan.name}: fetching the earlier batch(es) {', '.join(old_ids)}")
        fresh = [e for key, e in plan.entries.items() if key not in covered]
        fresh = _within_cap(plan, fresh, ledger, failures)
        if fresh:
            made, why = _submit(plan, fresh, run_dir, store.folder, say)
            if made:
                groups.append((made, [entry.custom_id for entry in fresh]))
            if why is not None:
                for entry in fresh:
                    failures.setdefault(entry.custom_id, why)
    summary: JsonObject = {}
    until = time.monotonic() + state.settings.batch_wait_s  # one wait for every batch
    try:
        for plan in plans.values():
            outcomes = batch_outcomes(
                plan, waiting[plan.name], state.settings, say, failures, until
            )
            summary[plan.name] = store_answers(plan, outcomes, store, ledger, failures, say)
    except KeyboardInterrupt:
        running = [i for groups in waiting.values() for ids, _ in groups for i in ids]
        say(
            f"interrupted; {', '.join(running)} keep(s) running at the provider: "
            f"--agentbench-resume {run_dir} fetches the results instead of paying again"
        )
        raise
    store.finish(failures, {"models": summary})


def _submit(
    plan: BatchPlan,
    fresh: list[BatchEntry],
    run_dir: Path,
    store_dir: Path,
    say: Callable[[str], None],
) -> tuple[list[str], str | None]:
    """Submit ``fresh`` and write the batch ids (and the requests they hold) to the run
    folder at once. A batch the provider refuses, or cannot take, is not the end of the
    run: its requests go live, and why is said (the second value)."""
    from pytest_agentbench.errors import ModelError
    from pytest_agentbench.models import batch as wire

    keys = [entry.custom_id for entry in fresh]
    try:
        ids = wire.submit(plan.client, fresh)
    except ModelError as exc:
        made = list(exc.batch_ids) if isinstance(exc, wire.BatchError) else []
        if made:  # some were made before the failure: they run, and cost
            _write_batches((run_dir, store_dir), plan.name, made, keys)
        say(f"{plan.name}: the batch could not be submitted, its requests go live: {exc}")
        return made, f"the batch could not be submitted: {exc}"
    _write_batches((run_dir, store_dir), plan.name, ids, keys)
    say(
        f"{plan.name}: {len(fresh)} first-round request(s) submitted as {', '.join(ids)} "
        "(results at the provider; --agentbench-resume fetches them if this run stops)"
    )
    return ids, None


def _within_cap(
    plan: BatchPlan,
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


def _read_batches(
    run_dir: Path, say: Callable[[str], None]
) -> dict[str, tuple[list[str], set[str]]]:
    """The batch ids an earlier session of this run folder submitted, and the requests
    (cache keys) they hold, by model. A file that is there but cannot be read is said
    and moved aside (``batches.json.unreadable``), never overwritten: the ids it holds
    were paid for."""
    path = run_dir / BATCHES_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        kept = path.with_name(BATCHES_FILE + ".unreadable")
        with contextlib.suppress(OSError):
            os.replace(path, kept)
        say(
            f"{path} cannot be read ({exc}): the batches it names are not fetched and "
            f"their requests are submitted again; the file is kept as {kept}"
        )
        return {}
    found: dict[str, tuple[list[str], set[str]]] = {}
    batches = data.get("batches") if isinstance(data, dict) else None
    for entry in batches if isinstance(batches, list) else []:
        if not isinstance(entry, dict) or not isinstance(entry.get("model"), str):
            continue
        ids, keys = entry.get("ids"), entry.get("custom_ids")
        if isinstance(ids, list) and isinstance(keys, list):
            known = found.setdefault(str(entry["model"]), ([], set()))
            known[0].extend(str(i) for i in ids)
            known[1].update(str(k) for k in keys)
    return found


def _write_batches(folders: tuple[Path, Path], model: str, ids: list[str], keys: list[str]) -> None:
    """Add the batches just submitted to ``batches.json`` (atomically) in the run folder
    (an interrupted run's resume finds them) and in the batch store's folder (a process
    of this run that takes the lock after the submitter died finds them), before waiting
    for them."""
    from pytest_agentbench.artifacts.jsonio import write_json_atomic

    added: JsonObject = {
        "model": model,
        "ids": list(ids),
        "requests": len(keys),
        "submitted_at": time.time(),
        "custom_ids": list(keys),
    }
    for folder in folders:
        path = folder / BATCHES_FILE
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            data = None
        batches: list[JsonValue] = []
        if isinstance(data, dict) and isinstance(data.get("batches"), list):
            batches = list(data["batches"])
        batches.append(added)
        write_json_atomic(path, {"schema_version": BATCHES_VERSION, "batches": batches})
