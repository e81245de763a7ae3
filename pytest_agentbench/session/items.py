"""pytest collection nodes: a suite file and its tasks."""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Iterable, Iterator
from fnmatch import fnmatch
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from pytest_agentbench.core.task_record import TaskRecord
from pytest_agentbench.errors import SuiteError
from pytest_agentbench.session.control_items import (
    control_item_name,
    control_plan,
    missing_control_record,
)
from pytest_agentbench.session.names import item_name as item_name
from pytest_agentbench.session.names import item_parts as item_parts
from pytest_agentbench.session.run import RunState
from pytest_agentbench.session.stash import STATE_KEY
from pytest_agentbench.suites.task import Task

if TYPE_CHECKING:
    import random

    from _pytest._code.code import TerminalRepr, TracebackStyle

    from pytest_agentbench.suites.controls import Planned
    from pytest_agentbench.suites.load import SamplingCheck, Suite

#: (suite name, task id) → the suite file that holds it, over every file collected so
#: far: two files may declare the same suite name, but never the same task in it.
_TASK_FILES = pytest.StashKey[dict[tuple[str, str], str]]()
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


def special_suite_files(directory: pytest.Dir, patterns: Iterable[str]) -> list[SuiteFile]:
    """The ``bench_*`` entries of a plain directory that are not regular files (a FIFO, a
    device, a socket, a symlink to one or to nothing), as suite files of ``directory``.
    pytest skips such entries without a word; collected, each is a clear collection
    error naming its path (the suite loader refuses it before opening it, so nothing
    blocks). An entry pytest is told to ignore stays ignored."""
    patterns = tuple(patterns)
    with os.scandir(directory.path) as entries:
        special = sorted(
            Path(entry.path)
            for entry in entries
            if not entry.is_dir()
            and not entry.is_file()
            and any(fnmatch(entry.name, pattern) for pattern in patterns)
        )
    ihook, config = directory.ihook, directory.config
    return [
        SuiteFile.from_parent(directory, path=path)
        for path in special
        if not ihook.pytest_ignore_collect(collection_path=path, config=config)
    ]


class SuiteFile(pytest.File):
    """A ``bench_*`` suite file; collecting it loads and validates the whole suite."""

    #: True for a ``bench_*`` file no ``agentbench_files`` pattern names, collected only
    #: because a plugin implements ``pytest_agentbench_load_suite``: unclaimed, it is no suite.
    claim_only = False

    def collect(self) -> Iterator[TaskItem]:
        from pytest_agentbench.models.sampling_wire import protocol_of, sampling_refusals

        state = self.config.stash[STATE_KEY]
        protocols = {protocol_of(one.model) for one in state.settings.lineup()}

        def reply_check(obj: object, where: str) -> None:
            from pytest_agentbench.scripted.script import Reply  # suites with replies only

            Reply.parse(obj, where)

        tools = state.services.tools()
        max_bytes = round(state.settings.max_file_mb * 1024 * 1024)
        sampling_check = lambda table: [  # noqa: E731
            refusal
            for protocol in sorted(protocols)
            for refusal in sampling_refusals(protocol, table)
        ]
        try:
            suite = self._read_suite(sampling_check, reply_check, tools, max_bytes)
        except SuiteError as exc:
            shown = SuiteError(self._display_path(), exc.problems)
            raise self.CollectError(str(shown)) from None
        if suite is None:
            return
        tasks = selected = _selected(suite.tasks, state)
        if state.settings.max_cost is not None:
            self._judges_priced(tasks)
        if state.settings.perturb:
            tasks = self._with_perturbed(tasks, state.settings.perturb, state.settings.seed)
        self._claim(tasks)
        self.tasks = tasks
        settings = state.settings
        planned = control_plan(suite.tasks, settings, suite.name)  # the original tasks'
        if settings.controls and len(selected) < len(suite.tasks):  # limit, sample
            kept = {task.id for task in selected}
            planned = [plan for plan in planned if plan.task.id in kept]
        #: The control runs of this file, registered with the scripted provider together.
        self.control_runs = tuple(p.run for p in planned if p.run is not None)
        lineup = settings.lineup()
        names = [one.model_name for one in lineup] if len(lineup) > 1 else [""]
        #: The copies this file's items run, by model name (handed to that model's client).
        self.model_tasks: dict[str, list[Task]] = {name: [] for name in names}
        if not settings.controls and not settings.calibrate:
            for task in tasks:
                epochs = settings.epochs or task.epochs
                for name in names:
                    for epoch in range(1, epochs + 1) if epochs > 1 else (0,):
                        copy = task.for_item(name, epoch, name or settings.model_name)
                        self.model_tasks[name].append(copy)
                        item = TaskItem.from_parent(self, name=item_name(copy), task=copy)
                        for mark in task.marks:
                            item.add_marker(mark)
                        self._skip_without_engine(item)
                        yield item
        for plan in planned:  # a control carries its task's marks: -m selects both alike
            control = TaskItem.from_parent(
                self, name=control_item_name(plan), task=plan.run or plan.task, planned=plan
            )
            for mark in plan.task.marks:
                control.add_marker(mark)
            self._skip_without_engine(control)
            yield control

    def _read_suite(
        self,
        sampling_check: SamplingCheck,
        reply_check: Callable[[object, str], None],
        tools: Collection[str],
        max_bytes: int,
    ) -> Suite | None:
        """The suite this file holds (None: a ``bench_*`` file no plugin claimed); raises
        SuiteError with every problem found."""
        from pytest_agentbench.suites.load import load_document, load_suite

        state = self.config.stash[STATE_KEY]
        document = self._plugin_document()
        if document is None and self.claim_only:
            return None
        if document is None:
            return load_suite(
                self.path,
                state.services.verifiers(),
                sampling_check=sampling_check,
                find_dataset=self._find_dataset,
                reply_check=reply_check,
                tools=tools,
                max_bytes=max_bytes,
            )
        return load_document(
            self.path,
            document,
            state.services.verifiers(),
            sampling_check=sampling_check,
            reply_check=reply_check,
            tools=tools,
            max_bytes=max_bytes,
        )

    def _skip_without_engine(self, item: TaskItem) -> None:
        """A task that runs in a container is skipped, saying why, where no container
        engine answers (session/containers.py)."""
        if item.task.environment is None:
            return
        from pytest_agentbench.session.containers import engine_missing

        why = engine_missing(self.config.stash[STATE_KEY])
        if why is not None:
            item.add_marker(pytest.mark.skip(reason=why))

    def _judges_priced(self, tasks: tuple[Task, ...]) -> None:
        """Under ``--agentbench-max-cost`` every judge needs a price, as every model does
        (config/settings.with_prices): a collection error naming the first judge without
        one, before anything is sent."""
        services = self.config.stash[STATE_KEY].services
        for task in tasks:
            if task.verifier.kind != "judge":
                continue
            judge = services.judges.of(task.verifier.options)
            if judge is not None and services.judges.price(judge) is None:
                raise self.CollectError(
                    f"{self._display_path()}: task {task.id!r}: --agentbench-max-cost needs "
                    f"the price of every model, and its judge {judge.spec.label} has none: "
                    "give it in a price file (--agentbench-prices; the offline scripted "
                    "judge as [models.scripted]) or its own models list line; see "
                    "docs/cost.md"
                )

    def _with_perturbed(
        self, tasks: tuple[Task, ...], names: tuple[str, ...], seed: int
    ) -> tuple[Task, ...]:
        """Each task followed by its perturbed copies (suites/perturb.py), in the order
        the perturbations were named."""
        from pytest_agentbench.suites.perturb import perturb_task

        hook = self.config.hook

        def paraphrase(task: Task, rng: random.Random) -> str | None:
            text = hook.pytest_agentbench_paraphrase(task=task, rng=rng)
            return None if text is None else str(text)

        if "paraphrase" in names and not hook.pytest_agentbench_paraphrase.get_hookimpls():
            raise self.CollectError(
                "--agentbench-perturb paraphrase: no plugin implements the "
                "pytest_agentbench_paraphrase hook (see docs/robustness.md)"
            )
        out: list[Task] = []
        for task in tasks:
            out.append(task)
            for name in names:
                copy = perturb_task(task, name, seed, paraphrase=paraphrase)
                if copy is not None:
                    out.append(copy)
        return tuple(out)

    def _plugin_document(self) -> object:
        """What ``pytest_agentbench_load_suite`` made of this file (None: no plugin read
        it); a plugin that raises is a collection error naming it."""
        try:
            return self.ihook.pytest_agentbench_load_suite(path=self.path)
        except SuiteError:
            raise
        except Exception as exc:
            from pytest_agentbench.hooks.plugin_hooks import plugin_names

            names = ", ".join(
                plugin_names(self.config.pluginmanager, "pytest_agentbench_load_suite")
            )
            raise SuiteError(
                str(self.path),
                [
                    f"a pytest_agentbench_load_suite plugin ({names}) raised "
                    f"{type(exc).__name__}: {exc}"
                ],
            ) from None

    def _find_dataset(self, name: str, manifest: Path) -> Path | None:
        """A plugin's local path for a manifest's dataset (pytest_agentbench_dataset)."""
        found = self.ihook.pytest_agentbench_dataset(
            name=name, manifest=manifest, config=self.config
        )
        return None if found is None else Path(found)

    def _claim(self, tasks: tuple[Task, ...]) -> None:
        """Register this file's tasks run-wide; a task another file of the same suite
        already holds would share its artifact folder and its results, so it is a
        collection error naming both files."""
        owners = self.config.stash.setdefault(_TASK_FILES, {})
        here = self._display_path()
        clashes = [
            f'task {task.index + 1} ("{task.id}"): the suite "{task.suite}" already has a task '
            f'"{task.id}" in {owners[task.suite, task.id]}; the two would share one artifact '
            "folder: rename one of them, or give one file its own [suite] name"
            for task in tasks
            if owners.get((task.suite, task.id), here) != here
        ]
        if clashes:
            raise self.CollectError(str(SuiteError(here, clashes)))
        for task in tasks:
            owners[task.suite, task.id] = here

    @staticmethod
    def forget_owners(config: pytest.Config) -> None:
        """After collection: the clash check is done, and the map of every task to its
        file would only hold memory to the end of the run (docs/scale.md, memory)."""
        if _TASK_FILES in config.stash:
            del config.stash[_TASK_FILES]

    def _display_path(self) -> str:
        """The suite's path as the user typed it: relative to where pytest was started."""
        try:
            return str(self.path.relative_to(self.config.invocation_params.dir))
        except ValueError:
            return str(self.path)


def _selected(tasks: tuple[Task, ...], state: RunState) -> tuple[Task, ...]:
    """The tasks ``--agentbench-limit`` and ``--agentbench-sample`` keep, in file order
    (the same on every xdist worker: the sample is seeded)."""
    from pytest_agentbench.suites.dataset import pick_indexes

    settings = state.settings
    if settings.limit is None and settings.sample is None:
        return tasks
    seed = settings.seed_of_sample()
    kept = pick_indexes(len(tasks), settings.limit, settings.sample, seed)
    return tuple(tasks[i] for i in kept)


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
        parent = self.parent
        assert isinstance(parent, SuiteFile)
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
