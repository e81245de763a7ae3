"""A task before it runs: the run's settings applied over it (``with_overrides``), the
record ``--agentbench-resume`` keeps instead of running it again (``resumable_record``,
``resumable_task``) and the forecast ``--agentbench-dry-run`` prints instead of running
anything (``dry_run``). Running it is session/execution.py.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TypedDict

import pytest

from pytest_agentbench.artifacts.rollout_files import read_result
from pytest_agentbench.config.settings import Settings
from pytest_agentbench.core.sampling import Sampling
from pytest_agentbench.core.task_record import TaskRecord
from pytest_agentbench.session.run import RunState
from pytest_agentbench.suites.task import (
    AgentConfig,
    FeedbackLevel,
    RepairMode,
    Task,
    VerifierConfig,
)

#: Verifiers that run code in the sandbox and take an ``isolation`` option.
SANDBOXED_KINDS = ("python_tests", "python_checks", "command")


class _TaskChanges(TypedDict, total=False):
    """The fields of a task ``with_overrides`` may replace."""

    verifier: VerifierConfig
    repairs: int
    repair_mode: RepairMode
    feedback: FeedbackLevel
    sampling: Sampling
    agent: AgentConfig


def with_overrides(task: Task, settings: Settings) -> Task:
    """The task with the run's repair, sandbox and sampling settings applied where the
    user set them, and the run-wide agent (``--agentbench-agent``) on an agent task that
    names none of its own (never on a control: Harbor's oracle and nop run no agent)."""
    changes: _TaskChanges = {}
    run_agent = settings.agent
    if (
        run_agent is not None
        and task.mode == "agent"
        and task.agent is None
        and task.control is None
    ):
        changes["agent"] = run_agent.config()
    if settings.sandbox is not None and task.verifier.kind in SANDBOXED_KINDS:
        options = {**task.verifier.options, "isolation": settings.sandbox}
        changes["verifier"] = replace(task.verifier, options=options)
    if settings.repairs is not None:
        changes["repairs"] = settings.repairs
    if settings.repair_mode is not None:
        changes["repair_mode"] = settings.repair_mode
    if settings.feedback is not None:
        changes["feedback"] = settings.feedback
    if task.control is not None:  # a control is its one answer: no repair round
        changes["repairs"] = 0
    sampling = task.sampling
    if settings.sampling != Sampling():  # the task's and suite's own settings win
        changes["sampling"] = sampling = task.sampling.over(settings.sampling)
    if task.epoch > 1 and sampling.seed is not None:  # each epoch its own seed
        changes["sampling"] = replace(sampling, seed=sampling.seed + task.epoch - 1)
    return replace(task, **changes) if changes else task


def resumable_record(settings: Settings, directory: Path, nodeid: str) -> TaskRecord | None:
    """With ``--agentbench-resume``: the record of a task this run folder already finished
    under the same settings (re-run instead when it was a harness error and
    ``--agentbench-retry-errors`` is given); None when the task must run."""
    if not settings.resume:
        return None
    result = read_result(directory)
    if result is None or result.get("fingerprint") != settings.fingerprint():
        return None
    try:
        record = TaskRecord.from_json(result.get("record"))
    except ValueError:  # not a task record (damaged, or from a tool it never was): run again
        return None
    if record.nodeid != nodeid:
        return None
    if settings.retry_errors and record.outcome == "harness_error":
        return None
    return replace(record, resumed=True)


def resumable_task(
    settings: Settings, task: Task, directory: Path, nodeid: str
) -> TaskRecord | None:
    """``resumable_record``, unless the task's sampling or its agent under test changed
    since (not comparable: run it again)."""
    resumed = resumable_record(settings, directory, nodeid)
    if resumed is None or (resumed.sampling or {}) != task.sampling.public():
        return None
    from pytest_agentbench.suites.agent_file import agent_record, same_agent

    now = None if task.agent is None else agent_record(task.agent, settings.agent)
    return resumed if same_agent(resumed.extras.get("agent"), now) else None


def dry_run(session: pytest.Session, state: RunState) -> None:
    """Print the forecast of the selected tasks (runner/forecast.py), each with its
    model's price and max_tokens; nothing is sent, nothing is written."""
    from pytest_agentbench.runner.forecast import JudgePlan, forecast, forecast_lines

    planned = []
    services = state.services
    for item in session.items:
        task = getattr(item, "task", None)
        if not isinstance(task, Task) or task.control is not None:
            continue
        settings = state.settings.for_model(task.model)
        task = with_overrides(task, settings)
        judge = None
        if task.verifier.kind == "judge":
            model = services.judges.of(task.verifier.options)
            if model is not None:
                judge = JudgePlan(services.judges.price(model), model.max_tokens)
        max_tokens = settings.max_tokens or task.max_tokens
        planned.append((task, settings.price, max_tokens, judge))
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    for line in forecast_lines(forecast(planned, batch=state.settings.batch)):
        if reporter is not None:
            reporter.write_line(line)
