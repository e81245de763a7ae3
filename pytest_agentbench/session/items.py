"""pytest collection nodes: a suite file, collected into its task items (one per task,
model and epoch, and one per control); the item itself is ``session/task_item.py``."""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Iterable, Iterator
from fnmatch import fnmatch
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from pytest_agentbench.errors import SuiteError
from pytest_agentbench.session.control_items import (
    control_item_name,
    control_plan,
)
from pytest_agentbench.session.names import item_name as item_name
from pytest_agentbench.session.names import item_parts as item_parts
from pytest_agentbench.session.run import RunState
from pytest_agentbench.session.stash import STATE_KEY
from pytest_agentbench.session.task_item import TaskItem
from pytest_agentbench.suites.task import Task

if TYPE_CHECKING:
    import random

    from pytest_agentbench.suites.load import SamplingCheck, Suite

#: (suite name, task id) → the suite file that holds it, over every file collected so
#: far: two files may declare the same suite name, but never the same task in it.
_TASK_FILES = pytest.StashKey[dict[tuple[str, str], str]]()


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
    settings = state.settings
    if settings.limit is None and settings.sample is None:
        return tasks
    from pytest_agentbench.suites.dataset import pick_indexes

    seed = settings.seed_of_sample()
    kept = pick_indexes(len(tasks), settings.limit, settings.sample, seed)
    return tuple(tasks[i] for i in kept)
