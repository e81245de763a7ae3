"""Run one task for an item: the rollout, its files, and the record for the reports (the
task as the run's settings make it, and whether a finished record resumes it instead, are
session/task_setup.py)."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from pytest_agentbench.artifacts.controls import control_fields
from pytest_agentbench.artifacts.cost_totals import with_cost
from pytest_agentbench.artifacts.paths import control_dir, task_dir
from pytest_agentbench.artifacts.record import task_record
from pytest_agentbench.artifacts.rollout_files import (
    redact,
    write_result,
    write_rollout,
)
from pytest_agentbench.config.settings import DEFAULT_TIMEOUT_S, Settings
from pytest_agentbench.core.cost import Price
from pytest_agentbench.core.jsontypes import JsonObject
from pytest_agentbench.core.records import Rollout
from pytest_agentbench.core.stream import EventSink, RolloutEvent, StreamEvent
from pytest_agentbench.core.task_record import TaskRecord
from pytest_agentbench.core.usage import Usage, sum_usage
from pytest_agentbench.errors import BudgetExhausted, ModelError, unexpected_cause
from pytest_agentbench.report.reason_text import collapse, cut
from pytest_agentbench.runner.agent_run import OpenAgent
from pytest_agentbench.runner.loopguard import KillPolicy
from pytest_agentbench.runner.rollout import run_rollout
from pytest_agentbench.session.run import RunState
from pytest_agentbench.session.task_setup import resumable_task, with_overrides
from pytest_agentbench.suites.task import Task

if TYPE_CHECKING:
    from pytest_agentbench.runner.container_session import EnvironmentPlace

ANSWER_PREVIEW = 300


def _place(state: RunState, task: Task) -> EnvironmentPlace | None:
    """Where the task's container comes from; None (and no container module imported)
    for a task without one."""
    if task.environment is None:
        return None
    from pytest_agentbench.session.containers import environment_place

    return environment_place(state)


def failure_details(rollout: Rollout, reason: str, rollout_dir: str) -> str:
    """The readable body of a failed item's report (pytest's failure section, the CTRF
    ``trace``): the reason line, the whole cause (never cut: the reason line is), then
    each attempt with its whole error."""
    lines = [reason, ""]
    lines.append(
        f"outcome: {rollout.outcome} · model {rollout.model} · "
        f"{len(rollout.attempts)} attempt(s) · {rollout.elapsed_s:.2f}s"
    )
    cause = collapse(rollout.error) if rollout.error else ""
    if cause:
        lines.append(f"cause: {cause}")
    for attempt in rollout.attempts:
        answer = cut(collapse(attempt.answer), ANSWER_PREVIEW) if attempt.answer else "(none)"
        reward = attempt.verdict["reward"] if attempt.verdict else None
        lines.append(f"attempt {attempt.index + 1}: reward {reward} · answer: {answer}")
        feedback = attempt.verdict.get("feedback") if attempt.verdict else None
        if feedback:
            lines.append(f"  feedback: {cut(collapse(str(feedback)), 200)}")
        if attempt.verdict and attempt.verdict.get("error"):
            lines.append(f"  verifier error: {collapse(str(attempt.verdict['error']))}")
        if attempt.error:
            error = collapse(attempt.error)
            lines.append("  error: " + ("(the cause above)" if error == cause else error))
    lines.append(f"rollout: {rollout_dir}")
    return "\n".join(lines)


def run_task_item(
    state: RunState,
    task: Task,
    *,
    nodeid: str,
    file: str,
    suite_tasks: Sequence[Task] = (),
    limit_s: float | None = None,
) -> TaskRecord:
    """Run ``task`` with the run's client and verifier, write its rollout directory, and
    return its record (with ``message``, the one-line reason, and ``trace``, the details).
    ``suite_tasks`` are handed to the client once per suite file before the first runs.
    ``limit_s`` (pytest-timeout's limit for the item) caps the rollout's own timeout.
    Any exception out of the rollout (a bug here, in a plugin's client, tool or verifier,
    or in a library) makes a ``harness_error`` record with its whole cause, written like
    any other: a task never goes missing from the reports, and never gets a score."""
    settings = state.settings.for_model(task.model)
    task = with_overrides(task, settings)
    model = sys.intern(settings.model_name)  # one string for every record of the model
    control = task.control
    if control is None:
        directory = task_dir(state.folder.ensure(), task.suite, task.id, model, task.epoch)
    else:
        directory = control_dir(state.folder.ensure(), task.suite, task.id, control.name)
    ran_here = state.results.ran_here
    resumed = None if nodeid in ran_here else resumable_task(settings, task, directory, nodeid)
    ran_here.add(nodeid)  # a rerun in this session runs it again, never resumes it
    if resumed is not None:
        return resumed
    sequential = state.sequential
    if sequential is not None and control is None:
        why = sequential.stop(nodeid)
        if why is not None:  # decided: not sent, and no folder written (items.py skips it)
            saved = Rollout.harness_error(task.key, task.suite, task.id, model, why)
            return task_record(
                saved, nodeid=nodeid, file=file, rollout_dir=directory, max_tokens=None
            )
    services = state.services
    verifier = services.verifiers()[task.verifier.kind]
    own_s = settings.timeout_s or task.timeout_s or DEFAULT_TIMEOUT_S
    timeout_s = min(own_s, limit_s) if limit_s else own_s
    live = state.inflight.live
    if live is not None:
        live.begin(nodeid, f"{task.suite}::{nodeid.rpartition('::')[2]}")
    try:
        if control is None:
            services.prepare(f"{file}[{task.model}]", suite_tasks or (task,), task.model)
        else:  # controls run once, whatever the models: on the scripted control client
            services.prepare(file, suite_tasks or (task,), controls=True)
        rollout = run_rollout(
            task,
            services.client(task.model) if control is None else services.control_client(),
            verifier,
            timeout_s=timeout_s,
            max_tokens=settings.max_tokens or task.max_tokens,
            verifier_dir=directory / "verifier",
            stream=settings.stream,
            kill_policy=KillPolicy(
                settings.loop_kill / 100, settings.loop_kill_seconds, settings.loop_kill_tokens
            ),
            on_event=_event_sink(state, task, nodeid),
            on_phase=None if live is None else lambda phase: live.phase(nodeid, phase),
            tools=services.tools() if task.mode == "agent" else None,  # (plain: none)
            isolation=settings.sandbox,
            open_agent=_agent_opener(state, task, settings) if task.agent is not None else None,
            place=_place(state, task),
        )
    except ModelError as exc:
        rollout = Rollout.harness_error(
            task.key, task.suite, task.id, model, str(exc), task.pass_threshold
        )
        if isinstance(exc, BudgetExhausted):
            rollout.failure_kind = "budget"
    except Exception as exc:  # a bug (ours, a plugin's, a library's): recorded, never lost
        cause = f"unexpected {unexpected_cause(exc)}"
        rollout = Rollout.harness_error(
            task.key, task.suite, task.id, model, cause, task.pass_threshold
        )
    finally:
        if live is not None:
            live.end(nodeid)
    rollout.model = model  # the model's name (its spec's label unless the user named it)
    if limit_s and limit_s < own_s and rollout.outcome == "timeout" and rollout.error:
        rollout.error += " (the item's pytest-timeout limit)"
    secrets = state.run.secrets
    # the reason of a task that did not pass is mined from its files (report/evidence.py,
    # and a plugin's may read them): written before it is asked. A passed task's are
    # written with its result, on the file writer when it ran ahead (inflight.py)
    rollout_written = (
        rollout.outcome != "passed" or control is not None or state.hooks.has(FAILURE_REASON_HOOK)
    )
    if rollout_written:
        write_rollout(directory, rollout, secrets)
    record = task_record(
        rollout,
        nodeid=nodeid,
        file=file,
        rollout_dir=directory,
        max_tokens=settings.max_tokens or task.max_tokens,
        min_score=task.min_score,
        sampling=task.sampling.public(),
        # the epoch and reducer of a task run more than once (the summary reduces by them)
        epoch=task.epoch or None,
        reducer=(settings.reducer or task.reducer) if task.epoch else None,
    )
    cached = sum(attempt.cached for attempt in rollout.attempts)
    if cached:
        record = replace(record, cached=cached)
    batched = sum(attempt.batch for attempt in rollout.attempts)
    went_live = next((a.batch_live for a in rollout.attempts if a.batch_live), None)
    if batched or went_live:
        record = replace(record, batch=batched or None, batch_live=went_live)
    if control is None and (priced(settings) or _hosted_judge(record)):
        replayed = [a.cached_usage for a in rollout.attempts if a.cached_usage is not None]
        in_batch = [a.batch_usage for a in rollout.attempts if a.batch_usage is not None]
        record = with_cost(  # (no price: a cost of None, said so)
            record,
            settings.price,
            cached_usage=Usage.from_json(sum_usage(replayed)) if replayed else None,
            judge_price=_judge_price(state, record),
            batch_usage=Usage.from_json(sum_usage(in_batch)) if in_batch else None,
        )
    if task.perturbation is not None:
        perturbation: JsonObject = {
            "name": task.perturbation,
            "of": task.original_id,
            "seed": task.perturbation_seed,
        }
        record = replace(record, extras={**record.extras, "perturbation": perturbation})
    if task.agent is not None:  # which agent under test ran: reports tell agents apart
        from pytest_agentbench.suites.agent_file import agent_record

        record = replace(
            record, extras={**record.extras, "agent": agent_record(task.agent, settings.agent)}
        )
    if control is not None:
        fields = control_fields(
            name=control.name,
            expect=control.expect,
            source=control.source,
            canary=control.canary,
            outcome=rollout.outcome,
            label=control.label,
        )
        record = replace(record, model="scripted", control=fields)
    # the evidence miner (report/evidence.py) is imported by a run's first failure only
    if record.control is not None and record.control.calibration:
        if rollout.outcome == "harness_error":
            from pytest_agentbench.report.evidence import failure_reason

            reason = plugin_reason(state, record) or failure_reason(record)
            record = replace(
                record, message=reason, trace=failure_details(rollout, reason, str(directory))
            )
    elif record.control is not None and record.control.behaved is False:
        from pytest_agentbench.report.controls import control_message

        reason = control_message(record)
        trace = failure_details(rollout, reason, str(directory))
        record = replace(record, message=reason, trace=trace)
    elif rollout.outcome != "passed":
        from pytest_agentbench.report.evidence import failure_reason

        reason = plugin_reason(state, record) or failure_reason(record)
        trace = failure_details(rollout, reason, str(directory))
        record = replace(record, message=reason, trace=trace)
    data = record.to_json()
    redacted: JsonObject = redact(data, secrets)  # ``data`` itself when no secret is in it
    if redacted is not data:  # a secret in a message: the record keeps it out too
        record = TaskRecord.from_json(redacted)
    # not a result (no result.json), so --agentbench-resume sends the task again: not
    # sent (the spending cap was reached: the item reports it as not run), or the run
    # stopped under this rollout (its client closed)
    finished = rollout.failure_kind != "budget" and not (
        rollout.outcome == "harness_error" and state.inflight.closing
    )
    fingerprint = settings.fingerprint()

    def write() -> None:
        if not rollout_written:
            write_rollout(directory, rollout, secrets)
        if finished:  # result.json last: its presence means the task finished
            write_result(directory, rollout, redacted, fingerprint=fingerprint, secrets=secrets)

    state.inflight.write(nodeid, write)
    return record


def _hosted_judge(record: TaskRecord) -> bool:
    """Whether a judge other than the offline scripted one graded the task (its cost is
    then reported, said to be not known when it has no price)."""
    model = (record.judge or {}).get("model")
    return isinstance(model, str) and model.split("/")[0] != "scripted"


def _judge_price(state: RunState, record: TaskRecord) -> Price | None:
    """The price of the judge that graded ``record`` (services.judges.price_by: the price
    the cap charged its calls at)."""
    table = record.judge
    if table is None:
        return None
    model, base_url = table.get("model"), table.get("base_url")
    if not isinstance(model, str):
        return None
    return state.services.judges.price_by(model, base_url if isinstance(base_url, str) else None)


def priced(settings: Settings) -> bool:
    """Whether the run reports cost: a model with a price, a price file, or a model that
    is not the offline scripted one (its cost is then said to be not known)."""
    return (
        settings.price is not None
        or settings.prices_file is not None
        or settings.model.provider != "scripted"
    )


def _agent_opener(state: RunState, task: Task, settings: Settings) -> OpenAgent:
    """How the rollout opens the session of the task's agent under test: through this
    process's gateway to the task's model (agents/runners.py)."""
    from pytest_agentbench.agents.runners import AgentContext, agent_opener

    services = state.services
    context = AgentContext(
        gateway=services.gateway(),
        clients=lambda protocol: services.protocol_client(task.model, protocol),
        model_label=settings.model_name,
        isolation=settings.sandbox or str(task.verifier.options.get("isolation", "auto")),
        kill_policy=KillPolicy(
            settings.loop_kill / 100, settings.loop_kill_seconds, settings.loop_kill_tokens
        ),
        place=_place(state, task),
    )
    return agent_opener(context)


FAILURE_REASON_HOOK = "pytest_agentbench_failure_reason"
ROLLOUT_EVENT_HOOK = "pytest_agentbench_rollout_event"


def plugin_reason(state: RunState, record: TaskRecord) -> str | None:
    """A plugin's one-line reason for ``record`` (``pytest_agentbench_failure_reason``),
    made one line; None when no plugin answers (or the one that would raised)."""
    if not state.hooks.has(FAILURE_REASON_HOOK):
        return None
    answer = state.hooks.first(FAILURE_REASON_HOOK, record=record)
    if not isinstance(answer, str) or not answer.strip():
        return None
    return collapse(answer)


def _event_sink(state: RunState, task: Task, nodeid: str) -> EventSink | None:
    """What hears the rollout's stream events: the live status line and the plugins that
    observe ``pytest_agentbench_rollout_event`` (None when nobody listens)."""
    live = state.inflight.live
    hooks = state.hooks
    observed = hooks.has(ROLLOUT_EVENT_HOOK)
    if live is None and not observed:
        return None

    def sink(event: StreamEvent) -> None:
        if live is not None:
            live.event(nodeid, event)
        if observed:
            seen = RolloutEvent(nodeid, task.suite, task.id, event.kind, event.text, event.data)
            hooks.notify(ROLLOUT_EVENT_HOOK, event=seen)

    return sink
