"""The control items of a suite file: which controls it runs (all of them, a canary,
the judge's calibration), their item names, and the stand-in record of a positive
control that has no known-good answer to play."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_agentbench.core.task_record import TaskRecord
from pytest_agentbench.suites.task import Task

if TYPE_CHECKING:
    from pytest_agentbench.config.settings import Settings
    from pytest_agentbench.suites.controls import Planned


def control_plan(tasks: tuple[Task, ...], settings: Settings, suite: str) -> list[Planned]:
    """The controls a suite file's items run: all of them with ``--agentbench-controls``,
    one sampled negative control with ``--agentbench-canary``, else none. The canary is
    drawn with the run's seed (``--agentbench-seed``)."""
    labelled = calibration_plan(tasks, settings)
    if settings.calibrate:
        return labelled
    if settings.controls:
        from pytest_agentbench.suites.controls import plan_controls

        return plan_controls(tasks) + labelled
    if settings.canary:
        from pytest_agentbench.suites.controls import plan_canary

        canary = plan_canary(tasks, int(settings.seed or 0), suite)
        return ([canary] if canary is not None else []) + labelled
    return labelled


def calibration_plan(tasks: tuple[Task, ...], settings: Settings) -> list[Planned]:
    """The labelled answers judged to calibrate the judge of this file's judge tasks:
    from ``--agentbench-judge-labels`` (or the ini's ``agentbench_judge_labels``), else
    from a judge task's ``labels`` option (a file beside the suite). None without labels."""
    judged = [task for task in tasks if task.verifier.kind == "judge"]
    if not judged:
        return []
    from pytest_agentbench.suites.calibration import load_labels, plan_calibration

    paths: list[Path] = []
    if settings.judge_labels is not None:
        paths.append(settings.judge_labels)
    else:
        for task in judged:
            own = task.verifier.options.get("labels")
            if isinstance(own, str) and (path := task.path.parent / own) not in paths:
                paths.append(path)
    planned: list[Planned] = []
    for path in paths:
        planned += plan_calibration(judged, load_labels(path))
    return planned


def control_item_name(plan: Planned) -> str:
    """A control item's name: the task id and the control, ``add[control-empty]`` (a
    canary: ``add[canary-empty]``), so ``-k empty`` or ``-k control`` selects them."""
    if plan.control.calibration:
        return f"{plan.task.id}[{plan.control.name}]"
    kind = "canary" if plan.control.canary else "control"
    return f"{plan.task.id}[{kind}-{plan.control.name}]"


def missing_control_record(plan: Planned, nodeid: str, file: str) -> TaskRecord:
    """The record of a positive control that cannot run (no known-good answer): counted
    and reported as "no positive control", never silently left out. No answer was
    played: its outcome is ``failed`` with no verdict, no failure, and the control's
    ``missing`` saying why (its item is skipped, its CTRF status ``skipped``)."""
    import time

    from pytest_agentbench.artifacts.controls import control_fields
    from pytest_agentbench.artifacts.record import record_without_rollout

    control = plan.control
    record = record_without_rollout(
        nodeid=nodeid,
        file=file,
        suite=plan.task.suite,
        task_id=plan.task.id,
        model="scripted",
        outcome="failed",
        cause=plan.missing,
        failure_kind="harness",
        start_ms=int(time.time() * 1000),
        duration_ms=0,
    )
    fields = control_fields(
        name=control.name,
        expect=control.expect,
        source=control.source,
        canary=control.canary,
        outcome=None,
        missing=plan.missing,
    )
    return replace(record, failure=None, failure_kind=None, control=fields)
