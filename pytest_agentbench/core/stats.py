"""Statistics for scores, standard library only: intervals, pass@k, reducers, paired tests.

Every estimate is an :class:`Estimate` (value, n, standard error, interval, method).
Pass rates get the Wilson score interval; mean rewards a percentile bootstrap with a
fixed seed (the same records always give the same interval), or a cluster-robust
standard error when one task was sampled more than once. Paired comparisons exclude a
pair when either side is None (a harness error) and count the exclusions.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from statistics import NormalDist, median
from typing import TYPE_CHECKING, Literal, TypeVar, get_args

from pytest_agentbench.core.jsontypes import JsonObject

if TYPE_CHECKING:  # the verdicts in words: imported by comparisons, not by a score's interval
    from pytest_agentbench.core.verdicts import Decision

DEFAULT_LEVEL = 0.95
DEFAULT_SEED = 20261201
DEFAULT_RESAMPLES = 2000
#: A bootstrap draws at most this many values in all (resamples × n), and never takes
#: fewer than MIN_RESAMPLES: a 10 000-task run gets 200 resamples, not 2000.
MAX_DRAWS = 2_000_000
MIN_RESAMPLES = 200

Reducer = Literal["mean", "median", "max", "majority"]
REDUCERS: tuple[Reducer, ...] = get_args(Reducer)

H = TypeVar("H", bound=Hashable)


@dataclass(frozen=True)
class Estimate:
    """A point estimate over ``n`` units with its standard error and ``level`` interval.
    Everything but ``n``, ``method`` and ``level`` is None when ``n`` is 0."""

    value: float | None
    n: int
    se: float | None
    lo: float | None
    hi: float | None
    method: str
    level: float = DEFAULT_LEVEL

    def as_dict(self) -> JsonObject:
        return {
            "value": self.value,
            "n": self.n,
            "se": self.se,
            "lo": self.lo,
            "hi": self.hi,
            "level": self.level,
            "method": self.method,
        }


def z_value(level: float = DEFAULT_LEVEL) -> float:
    """The two-sided normal quantile of ``level`` (1.96 for 0.95)."""
    _check_level(level)
    return NormalDist().inv_cdf(1 - (1 - level) / 2)


def _check_level(level: float) -> None:
    if not 0 < level < 1:
        raise ValueError(f"confidence level: expected a number between 0 and 1, got {level}")


def _empty(method: str, level: float) -> Estimate:
    return Estimate(None, 0, None, None, None, method, level)


def wilson(successes: int, n: int, level: float = DEFAULT_LEVEL) -> Estimate:
    """A pass rate with the Wilson score interval; ``se`` is the binomial one."""
    if n < 0 or not 0 <= successes <= max(n, 0):
        raise ValueError(f"wilson: expected 0 <= successes <= n, got {successes} of {n}")
    if n == 0:
        return _empty("wilson", level)
    p = successes / n
    lo, hi = wilson_bounds(p, n, level)
    se = math.sqrt(p * (1 - p) / n)
    return Estimate(p, n, se, lo, hi, "wilson", level)


def wilson_bounds(p: float, n: float, level: float = DEFAULT_LEVEL) -> tuple[float, float]:
    """The Wilson score interval of a rate ``p`` over ``n`` units (``n`` may be an
    effective, fractional sample size); exactly 0 or 1 at the ends, no 1e-17."""
    z = z_value(level)
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z / denom * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    lo = 0.0 if p == 0 else max(0.0, centre - half)
    hi = 1.0 if p == 1 else min(1.0, centre + half)
    return lo, hi


def _mean(values: Sequence[float]) -> float:
    """The mean; finite values whose sum leaves the float range (a plugin's reward of
    1e305, say) are divided first rather than raise."""
    try:
        return math.fsum(values) / len(values)
    except OverflowError:
        return math.fsum(v / len(values) for v in values)


def _sum_or_inf(values: Iterable[float]) -> float:
    """``math.fsum``, or infinity where the finite terms' sum leaves the float range."""
    try:
        return math.fsum(values)
    except OverflowError:
        return math.inf


def bootstrap_mean(
    values: Sequence[float],
    *,
    seed: int = DEFAULT_SEED,
    resamples: int = DEFAULT_RESAMPLES,
    level: float = DEFAULT_LEVEL,
) -> Estimate:
    """The mean with a percentile bootstrap interval; ``se`` is the standard deviation
    of the resampled means. The same ``seed`` and the same values, in any order, give
    the same interval. Large samples
    get fewer resamples (``MAX_DRAWS``), never below ``MIN_RESAMPLES``."""
    _check_level(level)
    if resamples < 1:
        raise ValueError(f"bootstrap: expected at least 1 resample, got {resamples}")
    n = len(values)
    if n == 0:
        return _empty("bootstrap", level)
    # sorted: the interval depends on the values alone, not on the order the tasks
    # finished in (concurrent rollouts, xdist workers)
    data = sorted(float(v) for v in values)
    mean = _mean(data)
    resamples = min(resamples, max(MIN_RESAMPLES, MAX_DRAWS // n))
    rng = random.Random(seed)
    means = sorted(_mean(rng.choices(data, k=n)) for _ in range(resamples))
    centre = _mean(means)
    se = math.sqrt(_sum_or_inf((m - centre) * (m - centre) for m in means) / max(1, resamples - 1))
    lo, hi = _percentiles(means, level)
    return Estimate(mean, n, se, lo, hi, "bootstrap", level)


def _percentiles(ordered: Sequence[float], level: float) -> tuple[float, float]:
    """The (1-level)/2 and 1-(1-level)/2 quantiles of sorted data (linear interpolation)."""

    def at(q: float) -> float:
        pos = q * (len(ordered) - 1)
        low = math.floor(pos)
        high = min(low + 1, len(ordered) - 1)
        return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)

    tail = (1 - level) / 2
    return at(tail), at(1 - tail)


def clustered_mean(
    values: Sequence[float], clusters: Sequence[Hashable], level: float = DEFAULT_LEVEL
) -> Estimate:
    """The mean of samples grouped in clusters (a task run several epochs) with the
    cluster-robust standard error, G/(G-1) · Σ_g (Σ_{i∈g} (x_i − x̄))² / N², and a
    normal interval. With one cluster the error is unknown (None)."""
    if len(values) != len(clusters):
        raise ValueError(f"clustered mean: {len(values)} values but {len(clusters)} cluster labels")
    n = len(values)
    if n == 0:
        return _empty("clustered", level)
    z = z_value(level)
    mean = _mean([float(v) for v in values])
    sums: dict[Hashable, float] = {}
    for value, cluster in zip(values, clusters, strict=True):
        sums[cluster] = sums.get(cluster, 0.0) + float(value) - mean
    groups = len(sums)
    if groups < 2:
        return Estimate(mean, n, None, None, None, "clustered", level)
    var = groups / (groups - 1) * _sum_or_inf(s * s for s in sums.values()) / (n * n)
    se = math.sqrt(var)
    return Estimate(mean, n, se, mean - z * se, mean + z * se, "clustered", level)


def _check_counts(name: str, n: int, c: int, k: int) -> None:
    if n < 0 or not 0 <= c <= n:
        raise ValueError(f"{name}: expected 0 <= c <= n, got c={c}, n={n}")
    if k < 1:
        raise ValueError(f"{name}: expected k >= 1, got k={k}")
    if k > n:
        raise ValueError(f"{name}: k={k} is more than the n={n} samples drawn")


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased pass@k from ``n`` samples of which ``c`` are correct:
    1 − C(n−c, k)/C(n, k), as the product Π_{i=n−c+1}^{n} (1 − k/i)."""
    _check_counts("pass@k", n, c, k)
    if n - c < k:
        return 1.0
    miss = 1.0
    for i in range(n - c + 1, n + 1):
        miss *= 1.0 - k / i
    return 1.0 - miss


def pass_hat_k(n: int, c: int, k: int) -> float:
    """The unbiased pass^k (all k draws pass) from ``n`` samples with ``c`` correct:
    C(c, k)/C(n, k), as the product Π_{i=0}^{k−1} (c−i)/(n−i)."""
    _check_counts("pass^k", n, c, k)
    if c < k:
        return 0.0
    result = 1.0
    for i in range(k):
        result *= (c - i) / (n - i)
    return result


def majority(values: Sequence[H]) -> H:
    """The most common value; a tie goes to the value seen first."""
    if not values:
        raise ValueError("majority vote: no values")
    counts = Counter(values)
    top = max(counts.values())
    return next(v for v in values if counts[v] == top)


def reduce_samples(values: Sequence[float], how: Reducer) -> float:
    """One score from a task's samples: mean, median, max or majority vote."""
    if not values:
        raise ValueError(f"{how}: no values to reduce")
    if how == "mean":
        return _mean(values)
    if how == "median":
        return float(median(values))
    if how == "max":
        return float(max(values))
    if how == "majority":
        return float(majority(list(values)))
    raise ValueError(f"reducer: expected one of {', '.join(REDUCERS)}, got {how!r}")


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

    _check_level(level)
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
        return _empty("paired-agresti-min", level)
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
