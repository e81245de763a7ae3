"""The task item: one task of a suite file as a pytest item, which runs its rollout (or
takes the one the pool ran ahead), fails or skips with the record's reason, and puts the
outcome, reward and tokens in its user_properties. ``session/items.py`` collects it.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Protocol, cast

import pytest

from pytest_agentbench.core.task_record import TaskRecord
from pytest_agentbench.session.control_items import missing_control_record
from pytest_agentbench.session.run import RunState
from pytest_agentbench.session.stash import STATE_KEY
from pytest_agentbench.suites.task import Task

if TYPE_CHECKING:
    from _pytest._code.code import TerminalRepr, TracebackStyle

    from pytest_agentbench.suites.controls import Planned

#: The (name, value) pairs of the items' user_properties, kept once: they live to the end
#: of the run on each item and its reports, and their values repeat (the outcome always,
#: the reward and the tokens mostly). Keyed by the value's type too (1 == 1.0 == True);
#: at most _PROPERTIES_MAX values, then new ones are not kept (docs/scale.md, Memory).
_PROPERTIES: dict[tuple[str, type, object], tuple[str, object]] = {}
_PROPERTIES_MAX = 1024


def _property(name: str, value: object) -> tuple[str, object]:
    """``(name, value)``, the one kept already when there is one."""
    key = (name, type(value), value)
    pair = _PROPERTIES.get(key)
    if pair is None:
        pair = (name, value)
        if len(_PROPERTIES) < _PROPERTIES_MAX:
            _PROPERTIES[key] = pair
    return pair


class TaskSource(Protocol):
    """What a task item reads of the suite file that collected it (``SuiteFile``,
    session/items.py, which imports this module): the copies its items run, by model
    name, and its control runs. Every task item's parent is one."""

    model_tasks: dict[str, list[Task]]
    control_runs: tuple[Task, ...]

    @property
    def nodeid(self) -> str: ...


class TaskItem(pytest.Item):
    """One task. ``record`` is set after it runs; the plugin puts it on the report."""

    #: why the task was not run, when it was not ("budget": the spending cap was reached)
    not_run: str | None = None

    def __init__(
        self,
        *,
        name: str,
        parent: pytest.Collector | None,
        task: Task,
        planned: Planned | None = None,
    ) -> None:
        super().__init__(name, parent)
        self.task = task
        self.planned = planned
        self.record: TaskRecord | None = None

    def rollout_record(self) -> TaskRecord:
        """Run this task's rollout and return its record (a missing control: its stand-in);
        the rollout pool may call it ahead, on another thread (inflight.py)."""
        from pytest_agentbench.session.execution import run_task_item
        from pytest_agentbench.session.timeouts import pytest_timeout_s

        state: RunState = self.config.stash[STATE_KEY]
        parent = cast("TaskSource", self.parent)
        if self.planned is not None and self.planned.run is None:
            return missing_control_record(self.planned, self.nodeid, parent.nodeid)
        record = run_task_item(
            state,
            self.task,
            nodeid=self.nodeid,
            file=parent.nodeid,
            suite_tasks=(
                parent.model_tasks.get(self.task.model, ())
                if self.planned is None
                else parent.control_runs
            ),
            limit_s=pytest_timeout_s(self),
        )
        if state.sequential is not None and self.nodeid not in state.sequential.stopped:
            state.sequential.observe(record)
        return record

    def runtest(self) -> None:
        state: RunState = self.config.stash[STATE_KEY]
        self.record = record = state.inflight.record_for(self)
        if record.failure_kind == "budget":  # not sent: the spending cap was reached
            self.record = None
            self.not_run = "budget"
            pytest.skip(f"not run (budget): {record.error}")
        saved = state.sequential.stopped.get(self.nodeid) if state.sequential else None
        if saved is not None:  # not sent: the sequential comparison was decided
            self.record = None
            self.not_run = "sequential"
            pytest.skip(saved)
        self.user_properties.extend(
            [
                _property("agentbench_outcome", record.outcome),
                _property("agentbench_reward", record.reward),
                _property("agentbench_tokens", record.usage.total),
            ]
        )
        control = record.control
        if control is None:
            if record.outcome != "passed":
                pytest.fail(record.trace or record.outcome, pytrace=False)
        elif control.calibration:  # a measurement of the judge: only a harness error fails
            if record.outcome == "harness_error":
                pytest.fail(record.trace or record.outcome, pytrace=False)
        elif control.missing:
            pytest.skip(control.missing)
        elif control.behaved is not True:
            pytest.fail(record.trace or record.outcome, pytrace=False)

    def repr_failure(
        self, excinfo: pytest.ExceptionInfo[BaseException], style: TracebackStyle | None = None
    ) -> str | TerminalRepr:
        """Our failures are reasons, not exceptions: the short summary shows the reason
        without pytest's ``Failed:`` prefix (the body is the reason plus each attempt)."""
        report = super().repr_failure(excinfo, style)
        crash = getattr(report, "reprcrash", None)
        if self.record is not None and crash is not None and hasattr(crash, "message"):
            crash.message = self.record.message or crash.message
        return report

    def reportinfo(self) -> tuple[os.PathLike[str] | str, int | None, str]:
        """Where the task is: its suite file (line 0; pytest's skip report needs a line
        number, and a None here made a task marked ``skip`` an INTERNALERROR); the name
        is the item's, so a control's carries the control."""
        return self.path, 0, f"{self.task.suite}::{self.name}"
