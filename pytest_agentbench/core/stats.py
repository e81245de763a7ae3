"""Statistics for scores, standard library only: intervals, pass@k, reducers. Two runs
compared task by task (the paired tests) are core/paired.py's.

Every estimate is an :class:`Estimate` (value, n, standard error, interval, method).
Pass rates get the Wilson score interval; mean rewards a percentile bootstrap with a
fixed seed (the same records always give the same interval), or a cluster-robust
standard error when one task was sampled more than once.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Hashable, Iterable, Sequence
from statistics import NormalDist, median
from typing import Literal, TypeVar, get_args

from pytest_agentbench.core.fastclass import dataclass
from pytest_agentbench.core.jsontypes import JsonObject

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
    check_level(level)
    return NormalDist().inv_cdf(1 - (1 - level) / 2)


def check_level(level: float) -> None:
    if not 0 < level < 1:
        raise ValueError(f"confidence level: expected a number between 0 and 1, got {level}")


def empty_estimate(method: str, level: float) -> Estimate:
    return Estimate(None, 0, None, None, None, method, level)


def wilson(successes: int, n: int, level: float = DEFAULT_LEVEL) -> Estimate:
    """A pass rate with the Wilson score interval; ``se`` is the binomial one."""
    if n < 0 or not 0 <= successes <= max(n, 0):
        raise ValueError(f"wilson: expected 0 <= successes <= n, got {successes} of {n}")
    if n == 0:
        return empty_estimate("wilson", level)
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
    check_level(level)
    if resamples < 1:
        raise ValueError(f"bootstrap: expected at least 1 resample, got {resamples}")
    n = len(values)
    if n == 0:
        return empty_estimate("bootstrap", level)
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
        return empty_estimate("clustered", level)
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
