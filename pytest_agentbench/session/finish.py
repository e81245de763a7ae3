"""The end of a run in the process that reports it (serial, or the xdist controller):
the run reports, the Markdown summary, the HTML report and the terminal section
(session/end_guard.py keeps a late Ctrl-C or SIGTERM from cutting them short).

Nothing is written for a session in which no task ran (``--collect-only``, a collection
that failed, a selection that left nothing): no run folder, no ``latest``, no step
summary, so ``--agentbench-resume latest`` still finds the last real run.
"""

from __future__ import annotations

import os
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from pytest_agentbench import __version__
from pytest_agentbench.artifacts.controls import misbehaved, task_records
from pytest_agentbench.artifacts.coverage import partial_line, run_coverage
from pytest_agentbench.artifacts.usability import unusable
from pytest_agentbench.core.jsontypes import JsonObject
from pytest_agentbench.core.task_record import RunSummary, TaskRecord
from pytest_agentbench.session.run import RunState

if TYPE_CHECKING:
    from pytest_agentbench.config.settings import Settings
    from pytest_agentbench.report.gate import GateResult


def _gate(records: Sequence[TaskRecord], settings: Settings) -> GateResult | None:
    """The score gate's verdict (report/gate.py), its module imported only when a
    threshold is set or a control ran (a canary that passed fails the gate): else None."""
    if settings.min_score is None and all(
        r.min_score is None and r.control is None for r in records
    ):
        return None
    from pytest_agentbench.report.gate import evaluate_gate

    return evaluate_gate(
        records,
        min_score=settings.min_score,
        errors_as_failures=settings.errors_as_failures,
        gate_on=settings.gate_on,
    )


def write_reports(session: pytest.Session, exitstatus: int, state: RunState) -> None:
    """ctrf.json, summary.json and the Markdown summary, when a task ran; the score gate
    may turn pytest's exit status."""
    from pytest_agentbench.artifacts.reports import write_run_reports
    from pytest_agentbench.artifacts.summary import RunFacts

    settings, results, run = state.settings, state.results, state.run
    records = results.records
    stopped = session.shouldstop or session.shouldfail
    results.coverage = run_coverage(
        tasks=len(results.records),
        selected=results.selected,
        deselected=results.deselected,
        skipped=len(results.skipped),
        interrupted=exitstatus == pytest.ExitCode.INTERRUPTED,
        stopped=str(stopped) if stopped else None,
        over_budget=len(results.over_budget),
        saved=len(results.sequential_saved),
    )
    if not results.records and not state.folder.started:
        return
    results.gate = gate = _gate(records, settings)
    if gate is not None and exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
        other_failures = session.testsfailed - results.failed_reports
        judged_ok = gate.ok and other_failures <= 0 and not misbehaved(records)
        session.exitstatus = pytest.ExitCode.OK if judged_ok else pytest.ExitCode.TESTS_FAILED
    if settings.judge_min_kappa is not None and exitstatus in (
        pytest.ExitCode.OK,
        pytest.ExitCode.TESTS_FAILED,
    ):
        from pytest_agentbench.artifacts.judge_summary import judge_summary

        judged = judge_summary(records, settings.judge_min_kappa)
        if (
            judged is not None and judged["calibrated"] is False
        ):  # the gate needs a calibrated judge
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
    sections = _compare(state)
    if state.sequential is not None:
        sections["sequential"] = state.sequential.section()
    budget = budget_section(state)
    if budget is not None:
        sections["budget"] = budget
        if budget["not_run"] and exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
            session.exitstatus = BUDGET_EXIT
    results.pairwise = _pairwise(session, state)
    if results.pairwise is not None:
        sections["judge_pairwise"] = results.pairwise
    worse = [c for c in results.compared if c.verdict == "worse"]
    if (
        settings.fail_on_regression
        and worse
        and exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED)
    ):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    run_dir = state.folder.ensure()
    if unusable(task_records(records)) is not None and session.exitstatus in (
        pytest.ExitCode.OK,
        pytest.ExitCode.TESTS_FAILED,
    ):  # too many harness errors: the score is not usable (artifacts/usability.py)
        session.exitstatus = UNUSABLE_EXIT
    facts = RunFacts(
        run_id=run.run_id,
        settings=settings.public(),
        tool_version=__version__,
        start_ms=run.start_ms,
        stop_ms=int(time.time() * 1000),
        partial=bool(results.coverage["partial"]),
        coverage=results.coverage,
        exit_status=int(session.exitstatus),
        gate=gate.as_dict() if gate is not None else None,
        errors_as_failures=settings.errors_as_failures,
        sections=sections,
        margin=settings.margin,
    )
    summary = write_run_reports(run_dir, records, facts)
    _write_markdown(state, summary)
    _write_html(state, run_dir)
    if state.hooks.has("pytest_agentbench_run_finished"):
        state.hooks.notify("pytest_agentbench_run_finished", summary=summary, run_dir=run_dir)


#: The exit status of a run the spending cap stopped before every task was sent (pytest's
#: own statuses are 0-5): not a pass, not a failure of the model.
BUDGET_EXIT = 6

#: The exit status of a run whose harness errors reached half its tasks
#: (artifacts/usability.py): its score is not usable, whatever the gate says.
UNUSABLE_EXIT = 7


def budget_section(state: RunState) -> JsonObject | None:
    """summary.json's ``budget`` (with --agentbench-max-cost): the cap, what this session
    spent (the ledger: known costs, and the worst case of replies of unknown usage),
    whether the cap stopped the run, and how many tasks were not run."""
    cap = state.settings.max_cost
    if cap is None:
        return None
    spent, _, stopped = state.services.budget().state()
    return {
        "max_usd": cap,
        "spent_usd": spent,
        "stopped": stopped,
        "not_run": len(state.results.over_budget),
    }


def _write_html(state: RunState, run_dir: Path) -> None:
    """report.html (or ``--agentbench-html``), rebuilt from the files just written. A
    failure here costs the page only: it is a warning, the run's other reports stand."""
    from pytest_agentbench.report.html_report import write_html_report

    try:
        write_html_report(run_dir, state.settings.html, secrets=state.run.secrets)
    except Exception as exc:  # the page must never cost the run its result
        warnings.warn(
            pytest.PytestWarning(f"agentbench: the HTML report was not written: {exc}"),
            stacklevel=1,
        )


def _compare(state: RunState) -> JsonObject:
    """This run against its baseline, and each perturbation against the originals
    (report/compare.py): kept on the results for the terminal, returned as the sections
    of summary.json."""
    results = state.results
    sections: JsonObject = {}
    if results.baseline is None and not state.settings.perturb:
        return sections  # nothing to compare: report/compare.py is not even imported
    from pytest_agentbench.report.run_comparisons import (
        baseline_comparisons,
        robustness_comparisons,
    )

    if results.baseline is not None:
        scored, earlier = task_records(results.records), task_records(results.baseline.records)
        results.compared = baseline_comparisons(  # controls: never compared
            earlier, scored, margin=state.settings.margin
        )
        sections["baseline"] = {
            "path": str(results.baseline.path),
            "run_id": results.baseline.run_id,
            "comparisons": [c.as_dict() for c in results.compared],
        }
    if state.settings.perturb:
        scored = task_records(results.records)
        results.robustness = robustness_comparisons(
            scored, order=state.settings.perturb, margin=state.settings.margin
        )
        sections["robustness"] = [
            c.as_dict() | {"perturbation": name} for name, c in results.robustness
        ]
    return sections


def _pairwise(session: pytest.Session, state: RunState) -> JsonObject | None:
    """Judge tasks with ``mode = "pairwise"`` in a run of several models: each pair of
    models' final answers compared by the judge in both orders
    (verifiers/judge_pairwise.py); None when there are none."""
    import json

    from pytest_agentbench.suites.task import Task
    from pytest_agentbench.verifiers.base import resolved

    models = [one.model_name for one in state.settings.lineup()]
    if len(models) < 2:
        return None
    tasks: dict[tuple[str, str], Task] = {}
    for item in session.items:
        task = getattr(item, "task", None)
        if (
            isinstance(task, Task)
            and task.control is None
            and task.verifier.kind == "judge"
            and task.verifier.options.get("mode") == "pairwise"
        ):
            tasks.setdefault((task.suite, task.id), task)
    if not tasks:
        return None
    from pytest_agentbench.verifiers.judge import JudgeVerifier

    judge = resolved(state.services.verifiers().get("judge"))
    if not isinstance(judge, JudgeVerifier) or judge.runtime is None:
        return None
    answers: dict[tuple[str, str], dict[str, str]] = {}
    for record in task_records(state.results.records):
        key = (record.suite, record.task_id)
        if key not in tasks or record.outcome == "harness_error" or not record.rollout_dir:
            continue
        if record.epoch not in (None, 1):
            continue  # one answer per model: the first epoch's
        try:
            data = json.loads((Path(record.rollout_dir) / "result.json").read_text("utf-8"))
            answer = data["attempts"][-1]["answer"]
        except (OSError, ValueError, KeyError, IndexError, TypeError):
            continue
        if isinstance(answer, str):
            answers.setdefault(key, {})[record.model] = answer
    from pytest_agentbench.verifiers.judge_pairwise import pairwise

    return pairwise(judge.runtime, tasks, answers, models)


def _write_markdown(state: RunState, summary: RunSummary) -> None:
    targets = [state.settings.markdown] if state.settings.markdown else []
    step_summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if not targets and not step_summary:
        return
    from pytest_agentbench.report.markdown import markdown_summary

    text = markdown_summary(summary, run_dir=str(state.run.run_dir))
    for path in targets:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    if step_summary:
        with open(step_summary, "a", encoding="utf-8") as handle:
            handle.write(text)


def summary_section(
    terminalreporter: pytest.TerminalReporter, config: pytest.Config, state: RunState
) -> None:
    """The ``agentbench`` section of pytest's terminal summary (nothing when no task ran
    and nothing was written)."""
    from pytest_agentbench.report.terminal import shown_path, summary_lines

    records = state.results.records
    if not records and not state.folder.started:
        if not config.getoption("collectonly", False):
            terminalreporter.section("agentbench")
            terminalreporter.write_line("no task ran; nothing written")
        return
    wall_s = (time.time() * 1000 - state.run.start_ms) / 1000
    terminalreporter.section("agentbench")
    lines = summary_lines(
        records,
        run_dir=str(state.run.run_dir),
        wall_s=wall_s,
        relative_to=str(config.invocation_params.dir),
        partial=partial_line(state.results.coverage),
        min_kappa=state.settings.judge_min_kappa,
    )
    from pytest_agentbench.report.lineup import lineup_lines

    errors_as_failures = state.settings.errors_as_failures
    at = next((i for i, line in enumerate(lines) if line.startswith("tokens ")), 1)
    scored = task_records(records)  # controls and calibration items are never compared
    lines[at:at] = lineup_lines(
        scored, errors_as_failures=errors_as_failures, margin=state.settings.margin
    )
    for line in lines:
        terminalreporter.write_line(line)
    not_sent = [r for r in records if r.failure_kind == "circuit_open"]
    if not_sent:
        terminalreporter.write_line(
            f"circuit breaker: {len(not_sent)} task(s) not sent — {not_sent[0].error}"
        )
    budget = budget_section(state)
    if budget is not None:
        from pytest_agentbench.core.cost import money

        spent, cap = budget["spent_usd"], budget["max_usd"]
        assert isinstance(spent, float) and isinstance(cap, float)
        line = f"budget: {money(spent)} spent of the {money(cap)} cap"
        if budget["not_run"]:
            line += (
                f"; {budget['not_run']} task(s) not run (reason budget): finish them with "
                "--agentbench-resume"
            )
        terminalreporter.write_line(line, yellow=bool(budget["not_run"]))
    if state.sequential is not None:
        terminalreporter.write_line(state.sequential.line())
    resumed = sum(1 for record in records if record.resumed)
    if resumed:
        terminalreporter.write_line(
            f"{resumed} task(s) resumed from the earlier run (not sent again)"
        )
    if state.results.baseline is not None:
        from pytest_agentbench.report.run_comparisons import comparison_lines

        terminalreporter.write_line(
            f"against the baseline {state.results.baseline.run_id} "
            f"({shown_path(str(state.results.baseline.path), str(config.invocation_params.dir))}):"
        )
        for comparison in state.results.compared or []:
            for line in comparison_lines(comparison):
                terminalreporter.write_line(line)
        if not state.results.compared:
            terminalreporter.write_line("no model of this run ran in the baseline")
    if state.results.pairwise is not None:
        from pytest_agentbench.verifiers.judge_pairwise import pairwise_lines

        for line in pairwise_lines(state.results.pairwise):
            terminalreporter.write_line(line)
    if state.results.robustness:
        from pytest_agentbench.report.run_comparisons import robustness_line

        for name, comparison in state.results.robustness:
            terminalreporter.write_line(robustness_line(name, comparison))
    for line in state.hooks.lines():
        terminalreporter.write_line(line, yellow=True)
    if state.results.gate is not None:
        from pytest_agentbench.report.gate import gate_lines

        for line in gate_lines(state.results.gate):
            terminalreporter.write_line(line)
