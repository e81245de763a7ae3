"""A record's ``verifier_dir`` kept as a marker when it is its ``rollout_dir`` and
``/verifier`` (core/derived_slot.py): whatever reads the record sees the same value as
before, the usual one and any other."""

from __future__ import annotations

import copy
import dataclasses
import os
import pickle
from dataclasses import dataclass

import pytest

from pytest_agentbench.core.derived_slot import DerivedSlot
from pytest_agentbench.core.record_parts import RepairSettings
from pytest_agentbench.core.task_record import TaskRecord
from pytest_agentbench.core.usage import Usage

BESIDE = TaskRecord.__dict__["verifier_dir"]
assert isinstance(BESIDE, DerivedSlot)


def record(rollout_dir: str | None, verifier_dir: str | None) -> TaskRecord:
    return TaskRecord(
        nodeid="bench_a.toml::t",
        file="bench_a.toml",
        suite="a",
        task_id="t",
        model="scripted",
        outcome="passed",
        reward=1.0,
        first_attempt_reward=1.0,
        pass_threshold=1.0,
        attempts=1,
        repaired=False,
        incomplete=False,
        failure_kind=None,
        repair=RepairSettings(),
        loop=None,
        last_feedback=None,
        usage=Usage(),
        error=None,
        verdict=None,
        max_tokens=None,
        min_score=None,
        start_ms=1,
        duration_ms=2,
        rollout_dir=rollout_dir,
        verifier_dir=verifier_dir,
    )


USUAL = ("/runs/r1/a/t", f"/runs/r1/a/t{os.sep}verifier")
CASES = [
    USUAL,
    ("/runs/r1/a/t", "/elsewhere/verifier"),  # a rescore's or a hand-edited file's
    ("/runs/r1/a/t", "/runs/r1/a/tt/verifier"),  # longer
    ("/runs/r1/a/t", f"/runs/r1/a/t{os.sep}verifiex"),  # as long, another ending
    ("/runs/r1/a/t", f"/runs/r1/a/x{os.sep}verifier"),  # as long, another start
    ("/runs/r1/a/t", None),
    (None, "/runs/r1/a/t/verifier"),
    (None, None),
]


@pytest.mark.parametrize(("rollout_dir", "verifier_dir"), CASES)
def test_every_reader_sees_the_value_given(
    rollout_dir: str | None, verifier_dir: str | None
) -> None:
    one = record(rollout_dir, verifier_dir)
    assert (one.rollout_dir, one.verifier_dir) == (rollout_dir, verifier_dir)
    assert one.to_json()["verifier_dir"] == verifier_dir
    assert TaskRecord.from_json(one.to_json()) == one
    assert f"verifier_dir={verifier_dir!r}" in repr(one)
    for other in (pickle.loads(pickle.dumps(one)), copy.copy(one), copy.deepcopy(one)):
        assert other == one
        assert other.verifier_dir == verifier_dir
    moved = dataclasses.replace(one, rollout_dir="/moved")
    assert (moved.rollout_dir, moved.verifier_dir) == ("/moved", verifier_dir)
    assert dataclasses.replace(one, verifier_dir="/v").verifier_dir == "/v"
    assert BESIDE.derived(one) is ((rollout_dir, verifier_dir) == USUAL)


def test_records_that_differ_only_there_are_not_equal() -> None:
    assert record(*USUAL) != record(USUAL[0], "/elsewhere/verifier")
    assert record(*USUAL) == record(*USUAL)


def test_only_slots_can_be_derived() -> None:
    @dataclass
    class Plain:
        a: str
        b: str

    with pytest.raises(TypeError, match="must be slots"):
        DerivedSlot.install(Plain, "b", "a", "/x")
