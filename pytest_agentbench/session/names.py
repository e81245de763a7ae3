"""A task item's name: the task id, with its model and epoch when the run has several
(``id[model:epoch2]``), and the parts read back from one. Below the items, the crash
marks and the record sink, which all name items the same way."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pytest_agentbench.suites.task import Task


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
