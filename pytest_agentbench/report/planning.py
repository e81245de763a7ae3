"""``python -m pytest_agentbench plan``: how many tasks × epochs a paired comparison needs
to detect a given difference, from a baseline run or a base rate.

From a baseline run, the base rate is its score and the run-to-run noise is the mean
variance of its tasks' epochs (``core.verdicts.task_noise``). When every task ran once
the noise is unknown, and (as with ``--rate`` alone) two plans are printed: the
optimistic one (no noise: every task's outcome is fixed) and the conservative one (each
task as noisy as a coin of the base rate, p(1 − p))."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pytest_agentbench.artifacts.baseline import load_baseline
from pytest_agentbench.artifacts.score_stats import scored_values
from pytest_agentbench.artifacts.summary import score
from pytest_agentbench.core.fastclass import dataclass
from pytest_agentbench.core.jsontypes import JsonObject
from pytest_agentbench.core.task_record import TaskRecord
from pytest_agentbench.core.verdicts import DEFAULT_POWER, Plan, plan, task_noise
from pytest_agentbench.errors import AgentbenchError

DEFAULT_EPOCHS = (1, 2, 3, 5)


@dataclass(frozen=True)
class Planning:
    """The plans for one question, and where the base rate came from."""

    base_rate: float | None
    source: str
    plans: tuple[Plan, ...]

    def lines(self) -> list[str]:
        out = []
        if self.base_rate is not None:
            out.append(f"base rate {self.base_rate:.3f} ({self.source})")
        for index, found in enumerate(self.plans):
            if index:
                out.append("")
            out.extend(found.lines())
        return out

    def as_dict(self) -> JsonObject:
        return {
            "base_rate": self.base_rate,
            "source": self.source,
            "plans": [found.as_dict() for found in self.plans],
        }


def baseline_noise(records: Sequence[TaskRecord]) -> tuple[float | None, float | None, int]:
    """A baseline's score, its tasks' run-to-run noise (None when no task ran twice) and
    its number of tasks (a task × model; controls are not scored)."""
    scored = [r for r in records if r.control is None]
    samples: dict[tuple[str, str, str], list[float]] = {}
    for record in scored:
        key = (record.suite, record.model, record.task_id)
        samples.setdefault(key, []).extend(scored_values([record], errors_as_failures=False))
    return score(scored), task_noise(list(samples.values())), len(samples)


def make_planning(
    difference: float,
    *,
    baseline: Path | None = None,
    rate: float | None = None,
    power: float = DEFAULT_POWER,
    level: float = 0.95,
    epochs: Sequence[int] = DEFAULT_EPOCHS,
) -> Planning:
    """The plans for ``difference``; ValueError / AgentbenchError naming the bad input."""
    if (baseline is None) == (rate is None):
        raise AgentbenchError("plan: give either --baseline RUN_DIR or --rate P (not both)")
    noise: float | None = None
    if baseline is not None:
        run = load_baseline(baseline)
        base_rate, noise, tasks = baseline_noise(run.records)
        if base_rate is None:
            raise AgentbenchError(f"plan: {baseline}: no scored task to take a base rate from")
        source = f"baseline {run.run_id}: {tasks} task(s)"
    else:
        assert rate is not None
        if not 0 <= rate <= 1:
            raise AgentbenchError(f"plan: --rate: expected a pass rate from 0 to 1, got {rate}")
        base_rate, source = rate, "--rate"
    try:
        if noise is not None:
            found = plan(
                difference,
                noise=noise,
                noise_source="measured from the baseline's epochs",
                base_rate=base_rate,
                power=power,
                level=level,
                epochs=epochs,
            )
            return Planning(base_rate, source, (found,))
        why = "the baseline ran each task once" if baseline is not None else "no baseline"
        optimistic = plan(
            difference,
            noise=0.0,
            noise_source=f"unknown ({why}): optimistic, every task's outcome fixed",
            base_rate=base_rate,
            power=power,
            level=level,
            epochs=epochs,
        )
        conservative = plan(
            difference,
            noise=base_rate * (1 - base_rate),
            noise_source=f"unknown ({why}): conservative, p(1 − p) at the base rate",
            base_rate=base_rate,
            power=power,
            level=level,
            epochs=epochs,
        )
    except ValueError as exc:
        raise AgentbenchError(f"plan: {exc}") from None
    return Planning(base_rate, source, (optimistic, conservative))


def parse_epochs(text: str) -> tuple[int, ...]:
    """``1,2,3,5`` as epochs; AgentbenchError for anything else."""
    try:
        found = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        found = ()
    if not found or any(k < 1 for k in found):
        raise AgentbenchError(
            f"plan: --epochs: expected whole numbers from 1 separated by commas, got {text!r}"
        )
    return found
