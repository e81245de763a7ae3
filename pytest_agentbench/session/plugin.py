"""The session plugin: the pytest hooks of a run, in the order pytest calls them.

``start.py`` registers one ``SessionPlugin`` only under ``--agentbench`` (as pytest-xdist
registers its distributed session only when distributing), so no hook here asks whether
a run is active: the plugin exists only while one is. ``plugin.py``, the entry point,
keeps what pytest needs before any run: the options, the hook specs, the fixture.
"""

from __future__ import annotations

import os
from collections.abc import Generator, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pathlib import Path

    from execnet import XSpec

    from pytest_agentbench.session.pytest_compat import WorkerNode
    from pytest_agentbench.session.run import RunState


class SessionPlugin:
    """The hooks of one run (``state``), in one process: the controller or a worker."""

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
