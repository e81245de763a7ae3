"""pytest collection nodes: a suite file and its tasks."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

import pytest

from pytest_agentbench.errors import SuiteError
from pytest_agentbench.run import STATE_KEY, RunState
from pytest_agentbench.suites.task import Task

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

    def collect(self) -> Iterator[TaskItem]:
        from pytest_agentbench.models.sampling_wire import protocol_of, sampling_refusals
        from pytest_agentbench.scripted.script import Reply
        from pytest_agentbench.suites.load import load_suite

        state = self.config.stash[STATE_KEY]
        protocols = {protocol_of(one.model) for one in state.settings.lineup()}

        def reply_check(obj: Any, where: str) -> None:
            Reply.parse(obj, where)

        try:
            suite = load_suite(
                self.path,
                state.services.verifiers(),
                reply_check=reply_check,
                tools=state.services.tools(),
                max_bytes=round(state.settings.max_file_mb * 1024 * 1024),
                sampling_check=lambda table: [
                    refusal
                    for protocol in sorted(protocols)
                    for refusal in sampling_refusals(protocol, table)
                ],
            )
        except SuiteError as exc:
            shown = SuiteError(self._display_path(), exc.problems)
            raise self.CollectError(str(shown)) from None
        self._claim(suite.tasks)
        settings = state.settings
        lineup = settings.lineup()
        names = [one.model_name for one in lineup] if len(lineup) > 1 else [""]
        self.tasks = suite.tasks
        #: The copies this file's items run, by model name (handed to that model's client).
        self.model_tasks: dict[str, list[Task]] = {name: [] for name in names}
        for task in suite.tasks:
            epochs = settings.epochs or task.epochs
            for name in names:
                for epoch in range(1, epochs + 1) if epochs > 1 else (0,):
                    copy = task.for_item(name, epoch, name or settings.model_name)
                    self.model_tasks[name].append(copy)
                    item = TaskItem.from_parent(self, name=item_name(copy), task=copy)
                    for mark in task.marks:
                        item.add_marker(mark)
                    yield item

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

    def _display_path(self) -> str:
        """The suite's path as the user typed it: relative to where pytest was started."""
        try:
            return str(self.path.relative_to(self.config.invocation_params.dir))
        except ValueError:
            return str(self.path)


def item_name(task: Task) -> str:
    """``id``, ``id[model]``, ``id[epoch2]`` or ``id[model:epoch2]``: what ``-k`` selects
    on (``-k model-a``, ``-k epoch2``)."""
    parts = [task.model] if task.model else []
    if task.epoch:
        parts.append(f"epoch{task.epoch}")
    return f"{task.id}[{':'.join(parts)}]" if parts else task.id


def item_parts(name: str, models: Iterable[str]) -> tuple[str, str, int] | None:
    """The (task id, model name, epoch) an item name of ``item_name`` holds, given the
    run's model names (none in a one-model run); None for a plain task id."""
    if not name.endswith("]") or "[" not in name:
        return None
    task_id, _, inner = name[:-1].rpartition("[")
    head, colon, tail = inner.rpartition(":")
    known = set(models)
    if colon and head in known and tail.startswith("epoch") and tail[5:].isdigit():
        return task_id, head, int(tail[5:])
    if inner in known:
        return task_id, inner, 0
    if not known and inner.startswith("epoch") and inner[5:].isdigit():
        return task_id, "", int(inner[5:])
    return None


class TaskItem(pytest.Item):
    """One task. ``record`` is set after it runs; the plugin puts it on the report."""

    def __init__(self, *, task: Task, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.task = task
        self.record: dict[str, Any] | None = None

    def runtest(self) -> None:
        from pytest_agentbench.execution import run_task_item
        from pytest_agentbench.timeouts import pytest_timeout_s

        state: RunState = self.config.stash[STATE_KEY]

        def job(item: TaskItem) -> dict[str, Any]:
            parent = item.parent
            assert isinstance(parent, SuiteFile)
            return run_task_item(
                state,
                item.task,
                nodeid=item.nodeid,
                file=parent.nodeid,
                suite_tasks=parent.model_tasks.get(item.task.model, ()),
                limit_s=pytest_timeout_s(item),
            )

        self.record = record = state.inflight.record_for(self, job)
        self.user_properties.extend(
            [
                ("agentbench_outcome", record["outcome"]),
                ("agentbench_reward", record["reward"]),
                ("agentbench_tokens", (record.get("usage") or {}).get("total")),
            ]
        )
        if record["outcome"] != "passed":
            pytest.fail(record["trace"], pytrace=False)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> Any:
        """Our failures are reasons, not exceptions: the short summary shows the reason
        without pytest's ``Failed:`` prefix (the body is the reason plus each attempt)."""
        report = super().repr_failure(excinfo, style)
        crash = getattr(report, "reprcrash", None)
        if self.record is not None and crash is not None and hasattr(crash, "message"):
            crash.message = self.record.get("message") or crash.message
        return report

    def reportinfo(self) -> tuple[Any, int | None, str]:
        """Where the task is: its suite file (line 0; pytest's skip report needs a line
        number, and a None here made a task marked ``skip`` an INTERNALERROR)."""
        return self.path, 0, f"{self.task.suite}::{self.name}"
