"""The score gate: for teams who fail CI on a pass rate rather than on any failed task.

``--agentbench-min-score X`` gates the run's score; a suite's ``min_score`` gates that
suite (per model). Harness errors are not the model's fault and not a score: they fail the
gate on their own, unless ``--agentbench-errors-as-failures`` counts them as failed tasks.
``--agentbench-gate-on lower`` compares the lower bound of the score's 95 % interval
(artifacts/score_stats.py) with the threshold instead of the score itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict

from pytest_agentbench.artifacts.controls import invalid_reason, task_records
from pytest_agentbench.artifacts.score_stats import score_estimate
from pytest_agentbench.artifacts.summary import score
from pytest_agentbench.core.choices import GATE_ON as GATE_ON
from pytest_agentbench.core.choices import GateOn as GateOn
from pytest_agentbench.core.fastclass import dataclass
from pytest_agentbench.core.jsontypes import JsonObject
from pytest_agentbench.core.task_record import TaskRecord


@dataclass(frozen=True)
class GateCheck:
    """One threshold: what it covers, the number compared (the score, or with ``on``
    "lower" its interval's lower bound), the score required, and the score itself."""

    label: str
    score: float | None
    threshold: float
    on: str = "point"
    point: float | None = None

    @property
    def ok(self) -> bool:
        return self.score is not None and self.score >= self.threshold - 1e-12


@dataclass(frozen=True)
class GateResult:
    checks: tuple[GateCheck, ...]
    harness_errors: int
    errors_as_failures: bool
    #: Why the run's result is invalid (a canary control passed); None when it is not.
    invalid: str | None = None

    @property
    def ok(self) -> bool:
        errors_ok = self.errors_as_failures or self.harness_errors == 0
        return errors_ok and self.invalid is None and all(check.ok for check in self.checks)

    def as_dict(self) -> JsonObject:
        return {
            "ok": self.ok,
            "invalid": self.invalid,
            "harness_errors": self.harness_errors,
            "errors_as_failures": self.errors_as_failures,
            "checks": [asdict(c) | {"ok": c.ok} for c in self.checks],
        }


def evaluate_gate(
    records: Sequence[TaskRecord],
    *,
    min_score: float | None,
    errors_as_failures: bool,
    gate_on: str = "point",
) -> GateResult | None:
    """The gate's verdict, or None when no threshold is set anywhere (pytest's own exit
    status then applies). Control records are not scored; a canary among them that
    passed makes the result invalid, and the gate fails whatever the scores."""
    invalid = invalid_reason(records)
    records = task_records(records)
    if gate_on not in GATE_ON:
        raise ValueError(f"gate on: expected one of {', '.join(GATE_ON)}, got {gate_on!r}")

    def check(label: str, members: Sequence[TaskRecord], threshold: float) -> GateCheck:
        point = score(members, errors_as_failures=errors_as_failures)
        if gate_on == "point":
            return GateCheck(label, point, threshold)
        lower = score_estimate(members, errors_as_failures=errors_as_failures).lo
        return GateCheck(label, lower, threshold, "lower", point)

    checks: list[GateCheck] = []
    if min_score is not None:
        checks.append(check("run", records, min_score))
    groups: dict[tuple[str, str], list[TaskRecord]] = {}
    thresholds: dict[tuple[str, str], float] = {}
    for record in records:
        if record.min_score is not None:
            key = (record.suite, record.model)
            groups.setdefault(key, []).append(record)
            thresholds.setdefault(key, float(record.min_score))
    for (suite, model), members in sorted(groups.items()):
        checks.append(check(f"{suite} [{model}]", members, thresholds[suite, model]))
    if not checks and invalid is None:
        return None
    harness = sum(1 for r in records if r.outcome == "harness_error")
    return GateResult(tuple(checks), harness, errors_as_failures, invalid)


def gate_lines(result: GateResult) -> list[str]:
    """One line per threshold, then the verdict."""
    lines = []
    for check in result.checks:
        reached = "no score" if check.score is None else f"{check.score:.3f}"
        mark = "✓" if check.ok else "✗"
        sign = "≥" if check.ok else "<"
        if check.on == "lower":
            point = "" if check.point is None else f" (score {check.point:.3f})"
            lines.append(
                f"gate {mark} {check.label}: 95 % CI lower bound {reached} {sign} "
                f"{check.threshold:g}{point}"
            )
            continue
        lines.append(f"gate {mark} {check.label}: score {reached} {sign} {check.threshold:g}")
    if result.harness_errors and not result.errors_as_failures:
        lines.append(
            f"gate ✗ {result.harness_errors} harness error(s): the run cannot be judged "
            "(--agentbench-errors-as-failures counts them as failed tasks)"
        )
    if result.invalid:
        lines.append(f"gate ✗ result invalid: {result.invalid}")
    lines.append("gate: passed" if result.ok else "gate: FAILED")
    return lines
