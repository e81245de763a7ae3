"""``--agentbench-sequential [LOOKS]``: stop sending once a two-sided comparison is decided.

A run of exactly two sides — two models, or one model and ``--agentbench-baseline`` —
plans LOOKS equally spaced looks over its paired tasks (``core.sequential_looks.looks_for``,
O'Brien–Fleming bounds that keep the overall error rate at 5 %). Each finished rollout
is paired with its other side (the same suite, task and epoch); when the number of
complete pairs reaches a look, the paired z statistic is checked against that look's
bound, and once it crosses, the items not yet sent are skipped with the reason
``sequential: decided at look k``: saved, not failed, and the run is not partial for
them. Harness errors pair with nothing (left out, as every comparison leaves them)."""

from __future__ import annotations

import threading
from collections.abc import Hashable, Sequence

import pytest

from pytest_agentbench.core.jsontypes import JsonObject
from pytest_agentbench.core.sequential_looks import Look, looks_for, paired_z
from pytest_agentbench.core.task_record import TaskRecord
from pytest_agentbench.suites.task import Task

DEFAULT_LOOKS = 4
OPTION = "--agentbench-sequential"


def _key(suite: str, task_id: str, epoch: int | None) -> tuple[str, str, int]:
    return (suite, task_id, epoch or 0)


def _value(record: TaskRecord) -> float | None:
    """A side's value of a task: its reward (0 when none), None for a harness error."""
    if record.outcome == "harness_error":
        return None
    return 0.0 if record.reward is None else float(record.reward)


class Sequential:
    """The looks of one run and what it has seen; thread-safe (rollouts run in a pool).
    ``first`` and ``second`` name the sides: two models, or ``baseline`` and the run's
    one model (then ``baseline`` holds the baseline's values by key)."""

    def __init__(
        self,
        looks: int,
        first: str,
        second: str,
        baseline: dict[Hashable, float | None] | None = None,
        level: float = 0.95,
    ) -> None:
        self.wanted = looks
        self.first, self.second = first, second
        self.level = level
        self.looks: tuple[Look, ...] = ()
        self.planned = 0
        self._values: dict[Hashable, dict[str, float | None]] = {}
        if baseline is not None:
            for key, value in baseline.items():
                self._values[key] = {first: value}
        self._pairs: list[float] = []
        self._checked = 0
        self.decided: Look | None = None
        self.decided_after = 0
        self.z = 0.0
        #: node id → why it was not sent (the items the decision saved)
        self.stopped: dict[str, str] = {}
        self._lock = threading.Lock()

    def plan(self, tasks: Sequence[Task]) -> None:
        """The planned paired tasks: the keys the run holds on both sides."""
        sides: dict[Hashable, set[str]] = {}
        for task in tasks:
            if task.control is None:
                sides.setdefault(_key(task.suite, task.id, task.epoch), set()).add(task.model)
        baseline = {k for k, v in self._values.items() if self.first in v}
        if baseline:
            self.planned = sum(1 for k in sides if k in baseline)
        else:
            self.planned = sum(1 for found in sides.values() if len(found) >= 2)
        self.looks = looks_for(self.planned, self.wanted, self.level)

    def side_of(self, record: TaskRecord) -> str | None:
        if record.control is not None:
            return None
        if record.model == self.second:
            return self.second
        if record.model == self.first:
            return self.first
        return None

    def observe(self, record: TaskRecord) -> None:
        """A finished rollout: pair it, and look when the pairs reach the next look."""
        side = self.side_of(record)
        if side is None:
            return
        key = _key(record.suite, record.task_id, record.epoch)
        with self._lock:
            if self.decided is not None:
                return
            found = self._values.setdefault(key, {})
            if side in found:
                return  # a rerun: the first result stands
            found[side] = _value(record)
            if len(found) < 2:
                return
            a, b = found[self.first], found[self.second]
            if a is None or b is None:
                return
            self._pairs.append(b - a)
            n = len(self._pairs)
            while self._checked < len(self.looks) and self.looks[self._checked].tasks <= n:
                look = self.looks[self._checked]
                self._checked += 1
                z = paired_z(self._pairs)
                if abs(z) >= look.bound and look.index < len(self.looks):
                    self.decided, self.decided_after, self.z = look, n, z
                    return

    def stop(self, nodeid: str) -> str | None:
        """Why ``nodeid`` is not to be sent (the comparison is decided), else None."""
        with self._lock:
            if self.decided is None:
                return None
            why = f"sequential: decided at look {self.decided.index} of {len(self.looks)}"
            self.stopped[nodeid] = why
            return why

    def line(self) -> str:
        """The terminal's line on the looks."""
        count = len(self.looks)
        if self.decided is None:
            return (
                f"sequential: not decided early ({count} look(s) over {self.planned} paired "
                "task(s)); every task was sent"
            )
        word = "better" if self.z > 0 else "worse"
        return (
            f"sequential: decided at look {self.decided.index} of {count} after "
            f"{self.decided_after} paired tasks ({self.second} {word} than {self.first}, "
            f"z={self.z:+.2f}, bound {self.decided.bound:.2f}); {len(self.stopped)} tasks "
            "not sent (saved)"
        )

    def section(self) -> JsonObject:
        """summary.json's ``sequential``."""
        return {
            "first": self.first,
            "second": self.second,
            "looks": [
                {"index": look.index, "tasks": look.tasks, "bound": look.bound}
                for look in self.looks
            ],
            "planned": self.planned,
            "decided_at": None if self.decided is None else self.decided.index,
            "paired": self.decided_after if self.decided is not None else len(self._pairs),
            "z": self.z if self.decided is not None else paired_z(self._pairs),
            "saved": len(self.stopped),
        }


def make_sequential(
    config: pytest.Config, models: Sequence[str], baseline: Sequence[TaskRecord] | None
) -> Sequential | None:
    """The run's Sequential with ``--agentbench-sequential``, None without it; a usage
    error under xdist, with other than two sides, or with fewer than one look."""
    looks = config.getoption("agentbench_sequential", None)
    if looks is None:
        return None
    if not isinstance(looks, int) or looks < 1:
        raise pytest.UsageError(f"{OPTION}: expected a whole number of looks from 1, got {looks}")
    if config.getoption("dist", "no") != "no" or config.getoption("numprocesses", None):
        raise pytest.UsageError(
            f"{OPTION}: the looks follow the results as they come in one process; run "
            "without -n (xdist), and raise --agentbench-concurrency instead"
        )
    if len(models) == 2 and baseline is None:
        return Sequential(looks, models[0], models[1])
    if len(models) == 1 and baseline is not None:
        values: dict[Hashable, float | None] = {}
        for record in baseline:
            if record.control is None:
                values[_key(record.suite, record.task_id, record.epoch)] = _value(record)
        return Sequential(looks, "baseline", models[0], baseline=values)
    sides = f"{len(models)} model(s)" + (" and a baseline" if baseline is not None else "")
    raise pytest.UsageError(
        f"{OPTION}: compares exactly two sides — two models (--agentbench-model twice), or "
        f"one model and --agentbench-baseline RUN_DIR; this run has {sides}"
    )
