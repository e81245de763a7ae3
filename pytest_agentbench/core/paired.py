"""Two runs compared task by task, standard library only: the exact binomial, McNemar's
and the sign test, the paired bootstrap, and :class:`Comparison` (the difference with
its paired interval, the p-value and the verdict in words, core/verdicts.py). Pairs
where either side is None (a harness error) are left out and counted. Intervals and the
bootstrap itself are core/stats.py's.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from typing import TYPE_CHECKING

from pytest_agentbench.core.fastclass import dataclass
from pytest_agentbench.core.stats import (
    DEFAULT_LEVEL,
    DEFAULT_RESAMPLES,
    DEFAULT_SEED,
    Estimate,
    bootstrap_mean,
    check_level,
    empty_estimate,
    z_value,
)

if TYPE_CHECKING:  # the verdicts in words: imported when runs are compared, not before
    from pytest_agentbench.core.verdicts import Decision


def binomial_two_sided(k: int, n: int) -> float:
    """The exact two-sided p-value of ``k`` successes in ``n`` fair coin flips:
    min(1, 2 · P(X ≤ min(k, n−k)))."""
    if not 0 <= k <= n:
        raise ValueError(f"binomial test: expected 0 <= k <= n, got k={k}, n={n}")
    if n == 0:
        return 1.0
    low = min(k, n - k)
    tail = sum(math.comb(n, i) for i in range(low + 1))
    return min(1.0, 2 * tail / (1 << n))


def mcnemar_exact(b: int, c: int) -> float:
    """McNemar's exact test: ``b`` pairs passed only by the first side, ``c`` only by the
    second; the two-sided binomial p-value on the discordant pairs."""
    if b < 0 or c < 0:
        raise ValueError(f"McNemar: expected counts >= 0, got b={b}, c={c}")
    return binomial_two_sided(b, b + c)


def sign_test(differences: Sequence[float]) -> float:
    """The two-sided sign test of paired differences (zeros dropped)."""
    positive = sum(1 for d in differences if d > 0)
    negative = sum(1 for d in differences if d < 0)
    return binomial_two_sided(positive, positive + negative)


def paired_bootstrap(
    first: Sequence[float],
    second: Sequence[float],
    *,
    seed: int = DEFAULT_SEED,
    resamples: int = DEFAULT_RESAMPLES,
    level: float = DEFAULT_LEVEL,
) -> Estimate:
    """The mean of first − second over pairs, resampling pairs together."""
    if len(first) != len(second):
        raise ValueError(f"paired bootstrap: {len(first)} values against {len(second)}")
    differences = [float(a) - float(b) for a, b in zip(first, second, strict=True)]
    estimate = bootstrap_mean(differences, seed=seed, resamples=resamples, level=level)
    return Estimate(
        estimate.value, estimate.n, estimate.se, estimate.lo, estimate.hi, "paired-bootstrap", level
    )


@dataclass(frozen=True)
class Comparison:
    """Two runs' scores on the same tasks: the difference (first − second) with its
    paired interval, the test's p-value, how many tasks were left out, and the
    verdict in words (core/verdicts.py). ``p_value`` is the test's own; within a family
    of comparisons ``adjusted`` is its Holm-adjusted value and decides ``significant``."""

    difference: Estimate
    test: str
    p_value: float
    significant: bool
    excluded: int
    decision: Decision
    adjusted: float | None = None
    family: int = 1
    discordance: float | None = None

    def words(self, first: str = "A", second: str = "B") -> str:
        d = self.difference
        if d.value is None:
            return f"{first} vs {second}: no task scored on both sides"
        pct = round(d.level * 100)
        interval = ""
        if d.lo is not None and d.hi is not None:
            interval = f", {pct} % CI {d.lo:+.3f} to {d.hi:+.3f}"
        p = f"{self.test} p={self.p_value:.3g}"
        if self.adjusted is not None and self.family > 1:
            p += f", Holm-adjusted p={self.adjusted:.3g} over {self.family} comparisons"
        left_out = f"; {self.excluded} task(s) excluded (harness error)" if self.excluded else ""
        return (
            f"{first} − {second} = {d.value:+.3f} (n={d.n}{interval}; {p}): "
            f"{self._verdict_words()}{detectable_words(self.decision)}{left_out}"
        )

    def _verdict_words(self) -> str:
        word = self.decision.word
        if word in ("better", "worse"):
            return f"{word} (significant at {1 - self.difference.level:g})"
        return self.decision.words()

    def in_family(
        self, adjusted: float | None, family: int, *, margin: float | None = None
    ) -> Comparison:
        """The same comparison judged as one of ``family`` (Holm-adjusted p-value)."""
        if adjusted is None:
            return self
        from pytest_agentbench.core.verdicts import verdict

        significant = adjusted < 1 - self.difference.level and self.difference.n > 0
        d = self.difference
        decision = verdict(
            d.value,
            d.se,
            d.n,
            significant=significant,
            margin=margin,
            level=d.level,
            more=self.decision.more,
            discordance=self.discordance,
        )
        return Comparison(
            d,
            self.test,
            self.p_value,
            significant,
            self.excluded,
            decision,
            adjusted,
            family,
            self.discordance,
        )


def detectable_words(decision: Decision) -> str:
    """``; detectable: ±0.310 (80 % power)``: the smallest true difference the run
    could have detected, said beside every verdict that is not already decided by it."""
    if decision.word in ("none", "better", "worse"):
        return ""
    if decision.detectable is None:
        return "; too few tasks to detect even a difference of 1 (80 % power)"
    return f"; smallest detectable difference ±{decision.detectable:.3f} (80 % power)"


def compare_paired(
    first: Mapping[Hashable, float | bool | None],
    second: Mapping[Hashable, float | bool | None],
    *,
    level: float = DEFAULT_LEVEL,
    seed: int = DEFAULT_SEED,
    resamples: int = DEFAULT_RESAMPLES,
    margin: float | None = None,
) -> Comparison:
    """Compare two runs task by task. Values are pass/fail (bools) or rewards; None is a
    harness error and excludes the task. Only tasks on both sides are paired. Pass/fail
    uses McNemar's exact test and a paired normal interval on the difference; rewards a
    sign test and a paired bootstrap."""
    from pytest_agentbench.core.verdicts import mcnemar_more_tasks, verdict

    check_level(level)
    shared = [key for key in first if key in second]
    pairs = [
        (first[key], second[key])
        for key in shared
        if first[key] is not None and second[key] is not None
    ]
    excluded = len(shared) - len(pairs)
    binary = all(isinstance(a, bool) and isinstance(b, bool) for a, b in pairs)
    more: int | None = None
    discordance: float | None = None
    if binary:
        only_first = sum(1 for a, b in pairs if a and not b)
        only_second = sum(1 for a, b in pairs if b and not a)
        p_value = mcnemar_exact(only_first, only_second)
        difference = _paired_proportion(only_first, only_second, len(pairs), level)
        test = "McNemar exact"
        more = mcnemar_more_tasks(only_first, only_second, len(pairs), level=level)
        if pairs:
            discordance = 2 * min(only_first, only_second) / len(pairs)
    else:
        xs = [float(a) for a, _ in pairs if a is not None]
        ys = [float(b) for _, b in pairs if b is not None]
        p_value = sign_test([x - y for x, y in zip(xs, ys, strict=True)])
        difference = paired_bootstrap(xs, ys, seed=seed, resamples=resamples, level=level)
        test = "sign test"
    significant = bool(pairs) and p_value < 1 - level
    decision = verdict(
        difference.value,
        difference.se,
        difference.n,
        significant=significant,
        margin=margin,
        level=level,
        more=more,
        discordance=discordance,
    )
    return Comparison(
        difference, test, p_value, significant, excluded, decision, discordance=discordance
    )


def _paired_proportion(b: int, c: int, n: int, level: float) -> Estimate:
    """The difference of two paired pass rates, (b − c)/n, with the Agresti–Min interval
    (half a pair added to each of the four cells: never a zero-width interval from a
    handful of tasks that happened to agree)."""
    if n == 0:
        return empty_estimate("paired-agresti-min", level)
    diff = (b - c) / n
    n2, b2, c2 = n + 2, b + 0.5, c + 0.5
    centre = (b2 - c2) / n2
    se = math.sqrt(max(0.0, (b2 + c2) - (b2 - c2) ** 2 / n2)) / n2
    z = z_value(level)
    return Estimate(
        diff,
        n,
        se,
        max(-1.0, centre - z * se),
        min(1.0, centre + z * se),
        "paired-agresti-min",
        level,
    )
