"""The xdist controller's hooks (registered by start.py only in a controller that has
workers): crashed workers' in-flight tasks sent to run again, the scheduler that keeps
every worker's pool full, and the workers' counts (the marks themselves: workers.py)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import pytest

from pytest_agentbench.session.workers import interrupted_only

if TYPE_CHECKING:
    from pytest_agentbench.session.pytest_compat import Scheduling, WorkerNode
    from pytest_agentbench.session.run import RunState


class XdistController:
    """xdist controller only: a task that was merely in flight on a worker that another
    task's verifier killed is sent to run again (the killer is reported on its own); the
    scheduler that keeps every worker's rollouts in flight; and the workers' counts of
    selected and deselected tasks, which the controller does not collect itself."""

    def __init__(self, state: RunState) -> None:
        self.state = state

    def pytest_handlecrashitem(
        self, crashitem: str, report: pytest.TestReport, sched: Scheduling
    ) -> None:
        from pytest_agentbench.session.pytest_compat import report_worker

        worker = report_worker(report)
        if not interrupted_only(crashitem, worker, self.state.services.marks_dir):
            return
        try:
            sched.mark_test_pending(crashitem)
        except NotImplementedError:  # --dist loadscope/loadfile/each: reported as crashed
            return
        report.outcome = "rerun"  # type: ignore[assignment]
        report.agentbench_rerun = True  # type: ignore[attr-defined]

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_make_scheduler(self, config: pytest.Config, log: object) -> object | None:
        """``--dist load`` (xdist's default) with rollouts in flight: each worker keeps
        enough items queued to fill its pool (see pytest_compat.deep_load_scheduler)."""
        concurrency = self.state.settings.concurrency
        if config.getoption("dist", None) != "load" or concurrency <= 1:
            return None
        from pytest_agentbench.session.pytest_compat import deep_load_scheduler

        return deep_load_scheduler(config, log, depth=concurrency + 1)

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: WorkerNode, ids: Sequence[str]) -> None:
        """The tasks a worker collected and selected: what the run plans to cover."""
        from fnmatch import fnmatch
        from pathlib import PurePath

        patterns = self.state.settings.files
        tasks = [
            nodeid
            for nodeid in ids
            if any(fnmatch(PurePath(nodeid.partition("::")[0]).name, p) for p in patterns)
        ]
        results = self.state.results
        results.selected = max(results.selected, len(tasks))

    def pytest_testnodedown(self, node: WorkerNode, error: object | None) -> None:
        """A worker's count of tasks its selection left out (see pytest_deselected), and
        the plugin hooks that raised there."""
        output = getattr(node, "workeroutput", None) or {}
        self.state.hooks.merge(output.get("agentbench_hook_failures"))
        deselected = output.get("agentbench_deselected")
        if isinstance(deselected, int):
            results = self.state.results
            results.deselected = max(results.deselected, deselected)

    def pytest_report_teststatus(
        self, report: pytest.TestReport
    ) -> tuple[str, str, tuple[str, Mapping[str, bool]]] | None:
        if getattr(report, "agentbench_rerun", False):
            return "rerun", "R", ("RERUN", {"yellow": True})
        return None
