"""Where task records reach the run: one record per task, whatever ended it.

The serial process and the xdist controller collect the records the reports are made
of. Two promises hold here, for every plugin a user combines us with:

* one task, one record. A task run again in the same session (pytest-rerunfailures, an
  xdist crash retry) replaces its earlier record; the earlier runs stay listed in the
  record's ``reruns`` (outcome, reward, reason, duration), never counted as tasks;
* every task that started has a record. A task whose item ended without one (pytest-timeout
  failing it, a fixture erroring in setup, an exception from another plugin) gets a
  stand-in record from the item's report: a ``timeout`` when pytest-timeout ended it,
  else a ``harness_error`` with the cause.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import TYPE_CHECKING

import pytest

from pytest_agentbench.core.record_parts import Rerun
from pytest_agentbench.core.task_record import TaskRecord

if TYPE_CHECKING:
    from pytest_agentbench.core.task_record import Outcome
    from pytest_agentbench.session.run import RunState
    from pytest_agentbench.suites.task import Task

#: What pytest-timeout's failure message starts with (both of its methods).
PYTEST_TIMEOUT_PREFIX = "Timeout (>"


def stand_in_record(
    item: pytest.Item,
    call: pytest.CallInfo[None],
    *,
    task: Task,
    model: str,
    start_ms: int | None,
) -> TaskRecord:
    """The record of a task item whose ``call.when`` phase ended with ``call.excinfo`` and
    no rollout record. The cause is kept whole (``error``, ``trace``); a task ended by
    pytest-timeout is a ``timeout``, anything else a ``harness_error``."""
    from pytest_agentbench.artifacts.record import record_without_rollout
    from pytest_agentbench.errors import unexpected_cause
    from pytest_agentbench.report.evidence import failure_reason
    from pytest_agentbench.report.reason_text import collapse

    excinfo = call.excinfo
    text = collapse(str(excinfo.value)) if excinfo is not None else ""
    kind = excinfo.typename if excinfo is not None else "error"
    if text.startswith(PYTEST_TIMEOUT_PREFIX):
        outcome: Outcome = "timeout"
        cause = f"pytest-timeout ended the task: {text}"
    else:
        outcome = "harness_error"
        where = "setting up" if call.when == "setup" else "running"
        cause = f"{kind} while {where} the task item: {text or kind}"
    parent = getattr(item, "parent", None)
    duration_ms = max(0, int(call.duration * 1000))
    record = record_without_rollout(
        nodeid=item.nodeid,
        file=getattr(parent, "nodeid", item.nodeid.rpartition("::")[0]),
        suite=task.suite,
        task_id=task.id,
        model=model,
        outcome=outcome,
        cause=cause,
        failure_kind="harness",
        start_ms=start_ms or int(call.start * 1000),
        duration_ms=duration_ms,
        pass_threshold=task.pass_threshold,
    )
    reason = failure_reason(record)  # the readable line; ``error`` is whole
    control = getattr(task, "control", None)
    if control is not None:  # a control stays a control (never scored), verdict unknown
        from pytest_agentbench.artifacts.controls import control_fields

        fields = control_fields(
            name=control.name,
            expect=control.expect,
            source=control.source,
            canary=control.canary,
            outcome="harness_error",
        )
        record = replace(record, control=fields)
    if excinfo is not None:
        record = replace(record, trace=f"{cause}\ncause: {unexpected_cause(excinfo.value)}")
    return replace(record, message=reason)


class RecordCollector:
    """Collects task records where reports arrive: the serial process or the xdist
    controller (worker reports reach it with the record attached)."""

    def __init__(self, state: RunState) -> None:
        self.state = state
        self.started: dict[str, int] = {}
        self.suites: dict[str, str] = {}
        #: where each task's record is: by node id, and by (node id, worker) under
        #: ``--dist each`` (the same task on every worker)
        self.index: dict[str | tuple[str, str], int] = {}
        self.each = state.run.config.getoption("dist", "no") == "each"

    def pytest_runtest_logstart(self, nodeid: str, location: object) -> None:
        self.started[nodeid] = int(time.time() * 1000)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        record: TaskRecord | None = getattr(report, "agentbench", None)
        if record is None and report.when not in ("setup", "call", "teardown"):
            record = self._crash_record(report)
        if report.when == "teardown":
            self.started.pop(report.nodeid, None)
        if getattr(report, "agentbench_skipped", False):
            self.state.results.skipped.add(report.nodeid)
        if getattr(report, "agentbench_not_run", None) == "budget":
            self.state.results.over_budget.add(report.nodeid)
        if getattr(report, "agentbench_not_run", None) == "sequential":
            self.state.results.sequential_saved.add(report.nodeid)
        if record is None:
            return
        self.suites.setdefault(record.file, record.suite)
        record = self._share(record)
        if getattr(report, "agentbench", None) is not None:
            report.agentbench = record  # type: ignore[attr-defined]  # one copy, not two
        self._keep(report, record)
        if report.failed:
            self.state.results.failed_reports += 1

    def _share(self, record: TaskRecord) -> TaskRecord:
        """``record`` with its repeating values replaced by the equal ones kept already
        (artifacts/record.py SHARED: a worker's record arrives with its own copies)."""
        from pytest_agentbench.artifacts.record import SHARED

        return SHARED.share(record)

    def _keep(self, report: pytest.TestReport, record: TaskRecord) -> None:
        """Add ``record``, or replace the same task's earlier record and list it."""
        worker = ""
        if self.each:  # the same task runs once on every worker
            from pytest_agentbench.session.pytest_compat import report_worker

            worker = report_worker(report)
        nodeid = record.nodeid or report.nodeid
        key: str | tuple[str, str] = (nodeid, worker) if self.each else nodeid
        records = self.state.results.records
        at = self.index.get(key)
        if at is None:
            self.index[key] = len(records)
            records.append(record)
        else:
            earlier = records[at]
            run = Rerun(
                outcome=earlier.outcome,
                reward=earlier.reward,
                message=earlier.message,
                error=earlier.error,
                start_ms=earlier.start_ms,
                duration_ms=earlier.duration_ms,
                attempts=earlier.attempts,
                usage=earlier.usage,
            )
            records[at] = record = replace(record, reruns=(*(earlier.reruns or ()), run))
        self._finished(record)

    def _finished(self, record: TaskRecord) -> None:
        """Tell the plugins observing ``pytest_agentbench_task_finished`` (the record is
        frozen: nothing they do reaches the one the reports are made of)."""
        hooks = self.state.hooks
        if hooks.has("pytest_agentbench_task_finished"):
            hooks.notify("pytest_agentbench_task_finished", record=record)

    def _crash_record(self, report: pytest.TestReport) -> TaskRecord | None:
        """A harness-error record for a task whose xdist worker died under it."""
        from fnmatch import fnmatch
        from pathlib import PurePath

        from pytest_agentbench.session.names import item_parts
        from pytest_agentbench.session.pytest_compat import is_crash_report, report_worker
        from pytest_agentbench.session.workers import crash_record

        name = PurePath(report.nodeid.partition("::")[0]).name
        if not is_crash_report(report) or not any(
            fnmatch(name, pattern) for pattern in self.state.settings.files
        ):
            return None
        settings = self.state.settings
        names = [one.model_name for one in settings.models]
        return crash_record(
            report.nodeid,
            report_worker(report),
            model=settings.model_name,
            sample=item_parts(report.nodeid.rpartition("::")[2], names),
            marks_dir=self.state.services.marks_dir,
            suites=self.suites,
            start_ms=self.started.pop(report.nodeid, None),
            now_ms=int(time.time() * 1000),
        )
