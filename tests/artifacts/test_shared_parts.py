"""The repeating parts of task records kept once (artifacts/record.py ``SharedParts``):
equal values become one object, and a record shared already costs no second look."""

from __future__ import annotations

import dataclasses

from records_support import make_record

from pytest_agentbench.artifacts.record import SharedParts
from pytest_agentbench.core.jsontypes import JsonValue
from pytest_agentbench.core.task_record import TaskRecord


class Counted(dict[str, JsonValue]):
    """A sampling table that counts how often its repr is asked for (the share's key)."""

    reprs = 0

    def __repr__(self) -> str:
        Counted.reprs += 1
        return super().__repr__()


def record(task_id: str, sampling: dict[str, JsonValue]) -> TaskRecord:
    return dataclasses.replace(make_record(task_id=task_id), sampling=sampling)


def test_equal_parts_become_one_object_and_a_shared_record_is_not_looked_at_again() -> None:
    parts = SharedParts()
    first = parts.share(record("t1", Counted(seed=1)))
    second = parts.share(record("t2", Counted(seed=1)))
    assert second.sampling is first.sampling and second.repair is first.repair
    assert second is not first and second.task_id == "t2"
    other = parts.share(record("t3", Counted(seed=2)))
    assert other.sampling == {"seed": 2} and other.sampling is not first.sampling
    before = Counted.reprs
    again = parts.share(second)  # its report, shared once more: every part kept already
    assert again is second and Counted.reprs == before
    copied = dataclasses.replace(second, sampling=Counted(seed=1))  # equal, not the kept one
    assert parts.share(copied).sampling is first.sampling and Counted.reprs == before + 1
