"""Collecting Harbor task folders (suites/harbor.py): a folder's ``task.toml`` is a
suite file of one task, so its items are ordinary task items (models, epochs, controls,
shards, every report); an older Terminal-Bench folder is one collection error saying
why it is not run. Nothing else inside a task folder is collected: its tests are the
verifier's, run in the container, never pytest's own on the host."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from pytest_agentbench.errors import SuiteError
from pytest_agentbench.session.items import SuiteFile

if TYPE_CHECKING:
    from pytest_agentbench.suites.load import SamplingCheck, Suite


def collect_harbor(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    """The collector of ``file_path`` when it is a Harbor ``task.toml`` (beside an
    ``instruction.md``) or an older Terminal-Bench ``task.yaml``; None otherwise."""
    from pytest_agentbench.suites.harbor_layout import (
        OLD_TASK_FILE,
        TASK_FILE,
        is_old_task_folder,
        is_task_folder,
    )

    folder = file_path.parent
    if file_path.name == TASK_FILE and is_task_folder(folder):
        return HarborTaskFile.from_parent(parent, path=file_path)
    if file_path.name == OLD_TASK_FILE and is_old_task_folder(folder):
        return RefusedTaskFolder.from_parent(parent, path=file_path)
    return None


def inside_task_folder(path: Path) -> bool:
    """True for a path directly in a Harbor (or older Terminal-Bench) task folder other
    than its task file: pytest must not collect the task's own tests or files."""
    from pytest_agentbench.suites.harbor_layout import (
        OLD_TASK_FILE,
        TASK_FILE,
        is_old_task_folder,
        is_task_folder,
    )

    folder = path.parent
    if path.name != TASK_FILE and is_task_folder(folder):
        return True
    return path.name != OLD_TASK_FILE and is_old_task_folder(folder)


class HarborTaskFile(SuiteFile):
    """A Harbor task folder's ``task.toml``: a suite of one task, named after the folder
    that holds the task folder (the dataset)."""

    def _read_suite(
        self,
        sampling_check: SamplingCheck,
        reply_check: Callable[[object, str], None],
        tools: Collection[str],
        max_bytes: int,
    ) -> Suite | None:
        from pytest_agentbench.suites.harbor import load_harbor_task
        from pytest_agentbench.suites.load import Suite

        task, warnings = load_harbor_task(self.path, reply_check=reply_check, max_bytes=max_bytes)
        for warning in warnings:
            self.warn(pytest.PytestWarning(f"{self._display_path()}: {warning}"))
        return Suite(name=task.suite, path=self.path, tasks=(task,))


class RefusedTaskFolder(pytest.File):
    """An older Terminal-Bench task folder: one collection error saying it is not run."""

    def collect(self) -> Iterator[pytest.Item]:
        from pytest_agentbench.suites.harbor import old_layout_problem

        try:
            shown = self.path.relative_to(self.config.invocation_params.dir)
        except ValueError:
            shown = self.path
        raise self.CollectError(str(SuiteError(str(shown), [old_layout_problem()])))
