"""The session plugin's report hooks: a task's record put on its pytest report (with the
rollout's own duration, or a stand-in record when the item ended without one), carried
from an xdist worker to the controller as JSON and read back once, and shown as the
report's status word. ``SessionPlugin`` (session/plugin.py) inherits them, so pytest
finds them on the one plugin object a run registers.
"""

from __future__ import annotations

from collections.abc import Generator, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pytest_agentbench.session.run import RunState


class ReportHooks:
    """The hooks of one run that make and carry its reports (in the order pytest calls
    them); ``state`` is the run's, set by ``SessionPlugin``."""

    state: RunState

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        """Put the task's record on its report, and make the report's duration the rollout's
        own wall time (not the time the item waited for it among the rollouts in flight), so
        ``--durations``, junitxml and pytest-split time tasks, not the queue. A task item
        whose setup or call ended without a record (pytest-timeout, a fixture, another
        plugin) gets a stand-in record saying why, so it is in every report."""
        report = yield
        state = self.state
        task = getattr(item, "task", None)
        if call.when == "teardown":
            return report
        if task is None:
            model = getattr(item, "agentbench_model", None)
            if model is not None and (call.when == "call" or report.failed):
                from pytest_agentbench.session.execution import plugin_reason

                record = model.record(item, report)
                if record.outcome != "passed" and (reason := plugin_reason(state, record)):
                    record = replace(record, message=reason)
                report.agentbench = record  # type: ignore[attr-defined]
            return report
        record = getattr(item, "record", None)
        if report.skipped and record is None:  # skipped before it ran (an xfail task has one)
            if getattr(item, "not_run", None):  # stopped by the spending cap: not run
                report.agentbench_not_run = item.not_run  # type: ignore[attr-defined]
            else:
                report.agentbench_skipped = True  # type: ignore[attr-defined]
            return report
        if record is None and call.excinfo is not None:
            from pytest_agentbench.session.collector import stand_in_record
            from pytest_agentbench.session.execution import plugin_reason

            model = task.model or state.settings.model_name
            record = stand_in_record(item, call, task=task, model=model, start_ms=None)
            if (reason := plugin_reason(state, record)) is not None:
                record = replace(record, message=reason)
            item.record = record  # type: ignore[attr-defined]
        if call.when == "call" and record is not None:
            report.agentbench = record  # type: ignore[attr-defined]
            if not record.resumed:
                report.duration = max(0, record.duration_ms) / 1000
        elif call.when == "setup" and record is not None and report.failed:
            report.agentbench = record  # type: ignore[attr-defined]
        return report

    @pytest.hookimpl(wrapper=True)
    def pytest_report_to_serializable(
        self, config: pytest.Config, report: object
    ) -> Generator[None, dict[str, object] | None, dict[str, object] | None]:
        """The task record leaves a worker as its JSON form (xdist sends reports as JSON)."""
        data = yield
        record = getattr(report, "agentbench", None)
        if isinstance(data, dict) and record is not None:
            data["agentbench"] = record.to_json()
        return data

    @pytest.hookimpl(wrapper=True)
    def pytest_report_from_serializable(
        self, config: pytest.Config, data: object
    ) -> Generator[None, object, object]:
        """... and reaches the controller as a TaskRecord again, read once."""
        report = yield
        record = getattr(report, "agentbench", None)
        if isinstance(record, dict):
            from pytest_agentbench.core.task_record import TaskRecord

            setattr(report, "agentbench", TaskRecord.from_json(record))  # noqa: B010
        return report

    def pytest_report_teststatus(
        self, report: pytest.TestReport, config: pytest.Config
    ) -> tuple[str, str, tuple[str, Mapping[str, bool]]] | None:
        record = getattr(report, "agentbench", None)
        outcome: str = report.outcome  # pytest-rerunfailures adds "rerun" to pytest's three
        if not record or report.when != "call" or outcome == "rerun" or report.skipped:
            return None
        if hasattr(report, "wasxfail"):  # pytest's own xfail / xpass words
            return None
        from pytest_agentbench.report.progress import verbose_word

        word = verbose_word(record)
        if record.outcome == "harness_error":
            return "error", "E", (word, {"red": True})
        if report.passed:
            return "passed", ".", (word, {"green": True})
        return "failed", "F", (word, {"red": True})
