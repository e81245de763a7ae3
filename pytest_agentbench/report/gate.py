"""The score gate: for teams who fail CI on a pass rate rather than on any failed task.

``--agentbench-min-score X`` gates the run's score; a suite's ``min_score`` gates that
suite (per model). Harness errors are not the model's fault and not a score: they fail the
gate on their own, unless ``--agentbench-errors-as-failures`` counts them as failed tasks.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from pytest_agentbench.artifacts.summary import score


@dataclass(frozen=True)
class GateCheck:
    """One threshold: what it covers, the score reached and the score required."""

    label: str
    score: float | None
    threshold: float

    @property
    def ok(self) -> bool:
        return self.score is not None and self.score >= self.threshold - 1e-12


@dataclass(frozen=True)
class GateResult:
    checks: tuple[GateCheck, ...]
    harness_errors: int
    errors_as_failures: bool

    @property
    def ok(self) -> bool:
        errors_ok = self.errors_as_failures or self.harness_errors == 0
        return errors_ok and all(check.ok for check in self.checks)

    def as_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "harness_errors": self.harness_errors,
            "errors_as_failures": self.errors_as_failures,
            "checks": [asdict(c) | {"ok": c.ok} for c in self.checks],
        }


def evaluate_gate(
    records: Sequence[Mapping[str, Any]],
    *,
    min_score: float | None,
    errors_as_failures: bool,
) -> GateResult | None:
    """The gate's verdict, or None when no threshold is set anywhere (pytest's own exit
    status then applies)."""
    checks: list[GateCheck] = []
    if min_score is not None:
        run_score = score(records, errors_as_failures=errors_as_failures)
        checks.append(GateCheck("run", run_score, min_score))
    groups: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for record in records:
        if isinstance(record.get("min_score"), int | float):
            key = (str(record.get("suite")), str(record.get("model")))
            groups.setdefault(key, []).append(record)
    for (suite, model), members in sorted(groups.items()):
        threshold = float(members[0]["min_score"])
        group_score = score(members, errors_as_failures=errors_as_failures)
        checks.append(GateCheck(f"{suite} [{model}]", group_score, threshold))
    if not checks:
        return None
    harness = sum(1 for r in records if r.get("outcome") == "harness_error")
    return GateResult(tuple(checks), harness, errors_as_failures)


def gate_lines(result: GateResult) -> list[str]:
    """One line per threshold, then the verdict."""
    lines = []
    for check in result.checks:
        reached = "no score" if check.score is None else f"{check.score:.3f}"
        mark = "✓" if check.ok else "✗"
        sign = "≥" if check.ok else "<"
        lines.append(f"gate {mark} {check.label}: score {reached} {sign} {check.threshold:g}")
    if result.harness_errors and not result.errors_as_failures:
        lines.append(
            f"gate ✗ {result.harness_errors} harness error(s): the run cannot be judged "
            "(--agentbench-errors-as-failures counts them as failed tasks)"
        )
    lines.append("gate: passed" if result.ok else "gate: FAILED")
    return lines
