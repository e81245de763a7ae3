"""The session plugin: the pytest hooks of a run, in the order pytest calls them.

``start.py`` registers one ``SessionPlugin`` only under ``--agentbench`` (as pytest-xdist
registers its distributed session only when distributing), so no hook here asks whether
a run is active: the plugin exists only while one is. ``plugin.py``, the entry point,
keeps what pytest needs before any run: the options, the hook specs, the fixture.

Here are the run's phases (start, collection, the test loop, the finish); the hooks that
put each task's record on its pytest report and carry it across xdist are
``session/report_hooks.py``, which ``SessionPlugin`` inherits.
"""

from __future__ import annotations

import os
from collections.abc import Generator, Sequence
from typing import TYPE_CHECKING

import pytest

from pytest_agentbench.session.report_hooks import ReportHooks

if TYPE_CHECKING:
    from pathlib import Path

    from execnet import XSpec

    from pytest_agentbench.session.pytest_compat import WorkerNode
    from pytest_agentbench.session.run import RunState


class SessionPlugin(ReportHooks):
    """The hooks of one run (``state``), in one process: the controller or a worker. Those
    that make and carry the reports (``pytest_runtest_makereport`` and the report hooks
    after it) are inherited from ``ReportHooks`` (session/report_hooks.py)."""

    def __init__(self, state: RunState) -> None:
        self.state = state

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: WorkerNode) -> None:
        """xdist: hand each worker the run id, folder and scripted server URL."""
        node.workerinput.update(self.state.worker_input())

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_setupnodes(self, config: pytest.Config, specs: Sequence[XSpec]) -> None:
        """xdist, before it starts the workers: they get the keys over the execnet channel,
        never in their start-up environment, so no worker (nor a restarted one) has a window
        before its own guard in which another process could read them from
        ``/proc/<pid>/environ`` (docs/sandbox.md, "The harness's secrets")."""
        from pytest_agentbench.sandbox.environ_guard import secret_items, withhold_from_children
        from pytest_agentbench.session.pytest_compat import give_workers_env

        held = secret_items(os.environ)
        give_workers_env(specs, held)
        withhold_from_children(held)
        self.state.withheld_env = tuple(held)

    def pytest_report_header(self, config: pytest.Config) -> list[str]:
        settings = self.state.settings
        if settings.model.provider == "scripted":
            model = f"{settings.model.label} (offline)"
            if not settings.model_configured:
                model += " — set --agentbench-model to benchmark a real model"
        else:
            from pytest_agentbench.core.urls import public_url

            default = "the provider default URL"
            where = public_url(settings.base_url) if settings.base_url else default
            model = f"{settings.model.label} at {where}"
        lines = [f"agentbench: model {model}", f"agentbench: results in {self.state.run.run_dir}"]
        if settings.models:
            names = ", ".join(one.model_name for one in settings.lineup())
            lines[0] = f"agentbench: {len(settings.models)} models: {names}"
        if settings.concurrency_from_slots:
            lines.append(
                f"agentbench: {settings.concurrency} rollouts in flight (the server's /slots)"
            )
        if settings.sandbox is not None or _has_code_tasks(config):
            from pytest_agentbench.sandbox.isolation import containment

            found = containment(settings.sandbox or "auto")
            lines.append(f"agentbench: sandbox {found['level']} — {found['detail']}")
        return lines

    @pytest.hookimpl(trylast=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        """Refuse ``--agentbench-batch`` for a model with no batch API; turn the live status
        line on where a person watches a terminal."""
        config = session.config
        state = self.state
        if state.settings.batch and not state.run.is_worker:
            from pytest_agentbench.session.batch import refuse_unsupported

            refuse_unsupported(state)
        if state.run.is_worker or config.getoption("dist", "no") != "no":
            return
        from pytest_agentbench.session.pytest_compat import terminal_stream, uncaptured

        reporter = config.pluginmanager.get_plugin("terminalreporter")
        found = terminal_stream(config)
        if reporter is None or found is None or not reporter.isatty or config.get_verbosity() < 0:
            return
        from pytest_agentbench.report.live import LiveStatus, StatusWriter

        writer, stream = found
        state.inflight.live = LiveStatus()
        state.inflight.status = StatusWriter(
            stream, writer.fullwidth, lambda: writer.width_of_current_line, uncaptured(config)
        )

    @pytest.hookimpl(wrapper=True)
    def pytest_make_collect_report(
        self, collector: pytest.Collector
    ) -> Generator[None, pytest.CollectReport, pytest.CollectReport]:
        """A plain directory's collection also holds the bench files pytest skips for not
        being regular files, each a collection error saying why (packages are left as they
        are). Added to pytest's own report, so its directory collection stays as it is."""
        report = yield
        if type(collector) is not pytest.Dir or not report.passed:
            return report
        import contextlib

        from pytest_agentbench.session.items import special_suite_files

        with contextlib.suppress(OSError):  # gone since pytest listed it: nothing to add
            report.result.extend(special_suite_files(collector, self.state.settings.files))
        return report

    def pytest_ignore_collect(self, collection_path: Path, config: pytest.Config) -> bool | None:
        """Nothing in a Harbor task folder but its task file is collected: its tests are
        run by the verifier in the task's container, never by pytest on the host."""
        from pytest_agentbench.session.harbor_items import inside_task_folder

        return True if inside_task_folder(collection_path) else None

    def pytest_collect_file(
        self, file_path: Path, parent: pytest.Collector
    ) -> pytest.Collector | None:
        from fnmatch import fnmatch

        from pytest_agentbench.session.harbor_items import collect_harbor

        harbor = collect_harbor(file_path, parent)
        if harbor is not None:
            return harbor
        if any(fnmatch(file_path.name, pattern) for pattern in self.state.settings.files):
            from pytest_agentbench.session.items import SuiteFile

            return SuiteFile.from_parent(parent, path=file_path)
        if file_path.name.startswith("bench_") and _plugin_formats(parent.config):
            from pytest_agentbench.session.items import SuiteFile

            suite = SuiteFile.from_parent(parent, path=file_path)
            suite.claim_only = True  # a suite only if a plugin's load_suite reads it
            return suite
        return None

    def pytest_collection_modifyitems(
        self, config: pytest.Config, items: list[pytest.Item]
    ) -> None:
        if self.state.settings.shard is None:
            return
        from pytest_agentbench.runner.shard import in_shard
        from pytest_agentbench.session.task_item import TaskItem

        shard, total = self.state.settings.shard
        keep, drop = [], []
        for item in items:
            if isinstance(item, TaskItem) and not in_shard(item.task, shard, total):
                item.agentbench_other_shard = True  # type: ignore[attr-defined]
                drop.append(item)
            else:
                keep.append(item)
        if drop:
            config.hook.pytest_deselected(items=drop)
            items[:] = keep

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        from pytest_agentbench.session.items import SuiteFile
        from pytest_agentbench.session.task_item import TaskItem

        state = self.state
        SuiteFile.forget_owners(session.config)
        tasks = [item for item in session.items if isinstance(item, TaskItem)]
        # a task marked to skip never runs: the pool does not run it ahead either
        queue = [item for item in tasks if item.get_closest_marker("skip") is None]
        if state.settings.calibrate and not tasks and not state.run.is_worker:
            _no_labels(session)
        tests = sum(1 for item in session.items if "agentbench_model" in _fixtures(item))
        state.results.selected = max(state.results.selected, len(tasks) + tests)
        state.inflight.set_queue(queue)
        if any(item.task.environment is not None for item in queue):
            from pytest_agentbench.session.containers import reap_earlier_containers

            reap_earlier_containers(state)
        if state.sequential is not None:
            state.sequential.plan([item.task for item in queue])
        import gc

        # What exists now (modules, items, tasks) lives to the end of the run: the cyclic
        # garbage collector need not scan it again in each full collection, nor in the
        # gc.collect() calls pytest makes at exit (docs/scale.md, start-up). Undone when
        # the session ends (plugin.pytest_configure).
        gc.freeze()

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> bool | None:
        """``--agentbench-dry-run``: the forecast instead of the run; nothing is sent.
        ``--agentbench-batch``: the first-round requests' batches before the first item
        (session/batch.py); xdist's controller shows what the submitting worker says."""
        settings = self.state.settings
        if settings.batch and not settings.dry_run:
            if session.items:
                from pytest_agentbench.session.batch import run_batches

                run_batches(session, self.state)
            elif not self.state.run.is_worker and session.config.getoption("dist", "no") != "no":
                import threading

                from pytest_agentbench.session.batch_answers import watch

                self.state.batch_watch = threading.Event()
                watch(session, self.state.services.marks() / "batch", self.state.batch_watch)
        if not settings.dry_run:
            return None
        from pytest_agentbench.session.task_setup import dry_run

        dry_run(session, self.state)
        return True

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        """Forget the record of an earlier run of a task item: a rerun starts afresh, and a
        failure before it runs must not find the earlier record."""
        if getattr(item, "task", None) is not None:
            item.record = None  # type: ignore[attr-defined]

    def pytest_deselected(self, items: list[pytest.Item]) -> None:
        """Count the tasks a selection left out (-k, -m, pytest-split, --lf…), tests using
        the agentbench_model fixture included: a score over the rest is partial. Tasks of
        another --agentbench-shard are not counted."""
        self.state.results.deselected += sum(
            1
            for item in items
            if (getattr(item, "task", None) is not None or "agentbench_model" in _fixtures(item))
            and not getattr(item, "agentbench_other_shard", False)
        )

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        state = self.state
        if state.batch_watch is not None:
            state.batch_watch.set()
        if state.run.is_worker:
            workeroutput = getattr(session.config, "workeroutput", None)
            if workeroutput is not None:
                workeroutput["agentbench_deselected"] = state.results.deselected
                workeroutput["agentbench_hook_failures"] = state.hooks.export()
            return
        from pytest_agentbench.session.finish import write_reports

        write_reports(session, exitstatus, state)

    def pytest_terminal_summary(
        self, terminalreporter: pytest.TerminalReporter, exitstatus: int, config: pytest.Config
    ) -> None:
        if self.state.run.is_worker:
            return
        from pytest_agentbench.session.finish import summary_section

        summary_section(terminalreporter, config, self.state)

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        state = self.state
        state.close()
        if state.withheld_env:
            from pytest_agentbench.sandbox.environ_guard import give_back_to_children

            give_back_to_children(state.withheld_env)
        if state.restore_sigterm is not None:
            import signal

            signal.signal(signal.SIGTERM, state.restore_sigterm)


def _has_code_tasks(config: pytest.Config) -> bool:
    """Whether the run's arguments name a suite folder or file likely to hold code tasks:
    cheap (file names only); the sandbox line is informative, never required."""
    from pathlib import Path

    from pytest_agentbench.suites.read import read_head

    for arg in config.args:
        path = Path(str(arg).split("::")[0])
        files = [path] if path.is_file() else list(path.glob("**/bench_*"))[:200]
        for file in files:
            text = read_head(file, 200_000) or ""  # a FIFO or a device is skipped unread
            if any(word in text for word in ("python_tests", "python_checks", "command", "agent")):
                return True
    return False


def _plugin_formats(config: pytest.Config) -> bool:
    """Whether a plugin (not the built-ins) implements ``pytest_agentbench_load_suite``."""
    from pytest_agentbench.hooks.plugin_hooks import plugin_names

    return bool(plugin_names(config.pluginmanager, "pytest_agentbench_load_suite"))


def _fixtures(item: pytest.Item) -> list[str]:
    names: list[str] = getattr(item, "fixturenames", [])
    return names


def _no_labels(session: pytest.Session) -> None:
    """``--agentbench-calibrate`` found no labelled answer to judge: a usage error saying
    how to give them (unless a collection error, or -k / -m, explains the empty run)."""
    config = session.config
    if session.testsfailed or config.getoption("keyword") or config.getoption("markexpr"):
        return
    raise pytest.UsageError(
        "--agentbench-calibrate judges answers people labelled, and none were found: give "
        "them with --agentbench-judge-labels FILE (JSONL or CSV: task, answer, label; e.g. "
        "example_suites/support_replies_labels.jsonl), the ini key agentbench_judge_labels, "
        'or a judge task\'s labels = "FILE" beside its suite (docs/judges.md, "Calibrating '
        'a judge")'
    )
