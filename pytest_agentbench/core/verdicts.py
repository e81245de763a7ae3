"""Verdicts, not p-values: sample sizes, equivalence margins, several comparisons at once.
Standard library only.

Every function here works on the paired difference of two sides (second − first) over
tasks both ran:

- :func:`sample_size` and :func:`detectable_difference` plan a paired comparison from
  the spread of per-task differences (normal approximation; for pass/fail tasks run
  once it is the McNemar sample size of Connor, 1987).
- :func:`verdict` turns a comparison into *better*, *worse*, *equivalent within ±D*
  (two one-sided tests) or *inconclusive*, with the number of tasks that would decide it.
- :func:`holm` adjusts a family of p-values (Holm's step-down).
- :func:`mcnemar_more_tasks` says how many more tasks would decide a pass/fail one.

Stopping when a comparison is decided (group-sequential looks) is core/sequential_looks.py's.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import NormalDist
from typing import Literal, get_args

from pytest_agentbench.core.fastclass import dataclass
from pytest_agentbench.core.jsontypes import JsonObject

DEFAULT_POWER = 0.8
_NORMAL = NormalDist()

VerdictWord = Literal["better", "worse", "equivalent", "inconclusive", "none"]
VERDICT_WORDS: tuple[VerdictWord, ...] = get_args(VerdictWord)


def _z(p: float) -> float:
    return _NORMAL.inv_cdf(p)


def check_between(name: str, value: float, low: float = 0.0, high: float = 1.0) -> None:
    if not low < value < high:
        raise ValueError(f"{name}: expected a number between {low:g} and {high:g}, got {value}")


# ---------------------------------------------------------------- planning


def spread_of_differences(difference: float, noise: float = 0.0, epochs: int = 1) -> float:
    """The standard deviation of one task's paired difference under the planning model:
    the second side differs from the first on a share ``|difference|`` of the tasks (each
    such task flips), and each side's score of a task varies between runs with variance
    ``noise`` (p(1 − p) averaged over tasks; 0 for tasks whose outcome never changes),
    averaged over ``epochs`` runs per side: √(|d|(1 − |d|) + 2·noise/epochs)."""
    d = abs(difference)
    if d > 1:
        raise ValueError(f"difference: expected at most 1, got {difference}")
    if noise < 0 or noise > 0.25:
        raise ValueError(f"noise: expected a variance between 0 and 0.25, got {noise}")
    if epochs < 1:
        raise ValueError(f"epochs: expected at least 1, got {epochs}")
    return math.sqrt(d * (1 - d) + 2 * noise / epochs)


def sample_size(
    difference: float,
    spread: float,
    *,
    level: float = 0.95,
    power: float = DEFAULT_POWER,
) -> int:
    """How many paired tasks a two-sided test at ``1 − level`` needs to detect a true
    difference ``difference`` with probability ``power``, when one task's difference has
    standard deviation ``spread`` under the alternative (and √(spread² + d²) under the
    null, as McNemar's test has it): ⌈((z_α/2·σ₀ + z_β·σ₁)/d)²⌉."""
    check_between("level", level)
    check_between("power", power)
    d = abs(difference)
    if d == 0:
        raise ValueError(
            "difference: a difference of 0 cannot be detected; give the smallest one that matters"
        )
    sigma1 = spread
    sigma0 = math.sqrt(spread * spread + d * d)
    n = ((_z(1 - (1 - level) / 2) * sigma0 + _z(power) * sigma1) / d) ** 2
    return max(2, math.ceil(n - 1e-9))


def detectable_difference(
    tasks: int,
    spread: float,
    *,
    level: float = 0.95,
    power: float = DEFAULT_POWER,
    discordance: float | None = None,
) -> float | None:
    """The smallest true difference ``tasks`` paired tasks detect with probability
    ``power``. For pass/fail pairs give ``discordance``: the share of tasks on which the
    two sides disagree beyond their net difference (2·min(b, c)/n observed); a true
    difference d then has the sides disagreeing on min(1, discordance + d) of the tasks.
    Otherwise one task's difference has standard deviation ``spread``. None when not
    even a difference of 1 would be detected."""
    check_between("level", level)
    check_between("power", power)
    if tasks < 2:
        return None
    if discordance is not None and 2 * 0.5**tasks >= 1 - level:
        return None  # McNemar's exact test cannot reject with so few pairs, all discordant

    def needed(d: float) -> int:
        if discordance is not None:
            psi = min(1.0, discordance + d)
            sigma = math.sqrt(max(0.0, psi - d * d))
        else:
            sigma = spread
        return sample_size(d, sigma, level=level, power=power)

    if needed(1.0) > tasks:
        return None
    low, high = 1e-6, 1.0
    for _ in range(60):
        mid = (low + high) / 2
        if needed(mid) <= tasks:
            high = mid
        else:
            low = mid
    return high


@dataclass(frozen=True)
class PlanRow:
    epochs: int
    tasks: int

    def as_dict(self) -> JsonObject:
        return {"epochs": self.epochs, "tasks": self.tasks, "samples": self.epochs * self.tasks}


@dataclass(frozen=True)
class Plan:
    """How many tasks × epochs a paired comparison needs, and the assumptions behind it."""

    difference: float
    power: float
    level: float
    base_rate: float | None
    noise: float
    noise_source: str
    rows: tuple[PlanRow, ...]

    def as_dict(self) -> JsonObject:
        return {
            "difference": self.difference,
            "power": self.power,
            "level": self.level,
            "base_rate": self.base_rate,
            "noise": self.noise,
            "noise_source": self.noise_source,
            "rows": [row.as_dict() for row in self.rows],
        }

    def lines(self) -> list[str]:
        alpha = f"{1 - self.level:g}"
        head = (
            f"to detect a difference of {self.difference:+.3f} with {self.power:.0%} power "
            f"(two-sided, at {alpha}), a paired comparison needs:"
        )
        out = [head]
        for row in self.rows:
            out.append(
                f"  {row.tasks:>6,} task(s) × {row.epochs} epoch(s)"
                f" = {row.tasks * row.epochs:,} sample(s) per side"
            )
        out.append(f"  run-to-run noise per task: {self.noise:.4f} ({self.noise_source})")
        return out


def plan(
    difference: float,
    *,
    noise: float,
    noise_source: str,
    base_rate: float | None = None,
    power: float = DEFAULT_POWER,
    level: float = 0.95,
    epochs: Sequence[int] = (1, 2, 3, 5),
) -> Plan:
    """The tasks needed at each number of ``epochs`` per side (see
    :func:`spread_of_differences` for the model)."""
    rows = tuple(
        PlanRow(
            k,
            sample_size(
                difference, spread_of_differences(difference, noise, k), level=level, power=power
            ),
        )
        for k in epochs
    )
    return Plan(abs(difference), power, level, base_rate, noise, noise_source, rows)


def task_noise(outcomes: Sequence[Sequence[float]]) -> float | None:
    """The mean run-to-run variance of a task's score, from tasks sampled several times
    (each inner sequence one task's samples, rewards in [0, 1]): the unbiased sample
    variance averaged over tasks with two samples or more; None when there are none."""
    variances = []
    for samples in outcomes:
        k = len(samples)
        if k < 2:
            continue
        mean = math.fsum(samples) / k
        variances.append(math.fsum((x - mean) ** 2 for x in samples) / (k - 1))
    if not variances:
        return None
    return min(0.25, math.fsum(variances) / len(variances))


# ---------------------------------------------------------------- verdicts


@dataclass(frozen=True)
class Decision:
    """A comparison's verdict: ``word``; ``more`` the further tasks that would likely
    decide an inconclusive one (None when no estimate can be made); ``detectable`` the
    smallest true difference this many tasks detect with 80 % power."""

    word: VerdictWord
    margin: float | None
    more: int | None
    detectable: float | None
    equivalence_interval: tuple[float, float] | None
    significant: bool = False

    def words(self) -> str:
        if self.word == "none":
            return "no evidence: no task paired"
        if self.word in ("better", "worse"):
            return self.word
        if self.word == "equivalent":
            real = " (a real difference, but inside the margin)" if self.significant else ""
            return f"equivalent within ±{self.margin:g}{real}"
        if self.more is not None:
            return f"inconclusive — about {self.more:,} more task(s) would decide it"
        if self.margin is None:
            return (
                "inconclusive — no difference seen; a margin (--agentbench-margin) would "
                "test equivalence"
            )
        return "inconclusive"

    def as_dict(self) -> JsonObject:
        interval = self.equivalence_interval
        return {
            "verdict": self.word,
            "margin": self.margin,
            "more_tasks": self.more,
            "detectable": self.detectable,
            "equivalence_interval": None if interval is None else [interval[0], interval[1]],
            "significant": self.significant,
            "words": self.words(),
        }


def verdict(
    difference: float | None,
    se: float | None,
    n: int,
    *,
    significant: bool,
    margin: float | None = None,
    level: float = 0.95,
    power: float = DEFAULT_POWER,
    more: int | None = None,
    discordance: float | None = None,
) -> Decision:
    """The verdict on a paired difference (second − first) over ``n`` tasks with standard
    error ``se``; ``significant`` is the comparison's own test at ``1 − level``.

    - *better* / *worse*: the test rejects "no difference" (and, with a margin, the
      difference is not already shown to lie within it);
    - *equivalent within ±margin*: both one-sided tests at ``1 − level`` reject a
      difference beyond the margin, i.e. the (2·level − 1) interval lies inside it;
    - *inconclusive*: neither; ``more`` estimates the tasks that would decide it at the
      observed difference and spread (the further tasks, on top of ``n``).
    """
    if difference is None or n == 0:
        return Decision("none", margin, None, None, None)
    if margin is not None and not 0 < margin < 1:
        raise ValueError(f"margin: expected a number between 0 and 1, got {margin}")
    spread = (se or 0.0) * math.sqrt(n)
    detectable = detectable_difference(n, spread, level=level, power=power, discordance=discordance)
    interval = None
    equivalent = False
    if margin is not None and se is not None:
        z = _z(level)  # one-sided at 1 − level each: the (2·level − 1) two-sided interval
        # a spread of 0 (no discordant pair yet) is no proof of equivalence: the
        # smallest spread a share of flipped tasks could hide behind is 1/n per side
        floor = math.sqrt(max(se * se, 1.0 / (n * n) if n else 1.0))
        interval = (difference - z * floor, difference + z * floor)
        equivalent = -margin < interval[0] and interval[1] < margin
    if equivalent:
        return Decision("equivalent", margin, None, detectable, interval, significant)
    if significant:
        return Decision("better" if difference > 0 else "worse", margin, None, detectable, interval)
    if more is None:
        more = _more_tasks(difference, spread, n, margin=margin, level=level)
    return Decision("inconclusive", margin, more, detectable, interval)


def _more_tasks(
    difference: float, spread: float, n: int, *, margin: float | None, level: float
) -> int | None:
    """Further tasks after which, at the observed difference and spread, either the test
    would reject no-difference or (with a margin) the equivalence interval would fit."""
    d = abs(difference)
    sigma = max(spread, 1e-9)
    candidates = []
    if d > 0:
        candidates.append((_z(1 - (1 - level) / 2) * sigma / d) ** 2)
    if margin is not None and d < margin:
        candidates.append((_z(level) * sigma / (margin - d)) ** 2)
    if not candidates:
        return None
    total = math.ceil(min(candidates))
    return max(1, total - n) if total > n else 1


# ---------------------------------------------------------------- several comparisons


def holm(p_values: Sequence[float | None]) -> list[float | None]:
    """Holm's step-down adjustment of a family of p-values (None stays None and does not
    count towards the family): the i-th smallest of m is multiplied by m − i + 1, made
    non-decreasing, capped at 1."""
    indexed = sorted((p, i) for i, p in enumerate(p_values) if p is not None)
    m = len(indexed)
    adjusted: list[float | None] = [None] * len(p_values)
    running = 0.0
    for rank, (p, i) in enumerate(indexed):
        running = max(running, min(1.0, (m - rank) * p))
        adjusted[i] = running
    return adjusted


# ---------------------------------------------------------------- more tasks


def mcnemar_more_tasks(
    b: int, c: int, n: int, *, level: float = 0.95, limit: int = 1_000_000
) -> int | None:
    """Further tasks after which McNemar's test would reject no-difference, if the shares
    of pairs passed by one side only (b/n, c/n) stayed as observed; None when they are
    equal (no number of tasks would) or past ``limit``. McNemar's z grows with √N, which
    gives the answer; while the discordant pairs are few (at most 400) the exact test
    decides it, searched upwards from well below the approximation."""
    if b == c or n == 0:
        return None
    z_now = abs(b - c) / math.sqrt(b + c)
    total = math.ceil(n * (_z(1 - (1 - level) / 2) / z_now) ** 2)
    if total > limit:
        return None
    if (b + c) * total / n <= 400:
        for candidate in range(max(n + 1, math.floor(total * 0.5)), 3 * total + 2):
            if _mcnemar_p(round(b * candidate / n), round(c * candidate / n)) < 1 - level:
                return candidate - n
    return max(1, total - n)


def _mcnemar_p(b: int, c: int) -> float:
    """McNemar's exact two-sided p-value (core/stats.py's ``mcnemar_exact``, which builds
    on this module: a copy of its two lines keeps the imports one way)."""
    n, low = b + c, min(b, c)
    return 1.0 if n == 0 else min(1.0, 2 * sum(math.comb(n, i) for i in range(low + 1)) / (1 << n))
