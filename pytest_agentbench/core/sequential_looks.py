"""Stopping a comparison once it is decided: O'Brien–Fleming group-sequential bounds that
keep the overall two-sided error rate at ``1 − level`` over ``looks`` equally spaced
looks, the looks planned over a run's paired tasks, and the paired z statistic a look
compares with its bound (``--agentbench-sequential``: session/sequential.py). Standard
library only; the verdicts themselves are core/verdicts.py's.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from statistics import NormalDist

from pytest_agentbench.core.fastclass import dataclass
from pytest_agentbench.core.verdicts import check_between

_NORMAL = NormalDist()


def _z(p: float) -> float:
    return _NORMAL.inv_cdf(p)


def obrien_fleming(looks: int, level: float = 0.95) -> tuple[float, ...]:
    """Two-sided O'Brien–Fleming boundaries for ``looks`` equally spaced looks: at look k
    (of K) the comparison is decided when |z| ≥ c·√(K/k), with c chosen so that the
    chance of crossing at any look, when the two sides are equal, is ``1 − level``.
    The constant is found by integrating the joint normal law of the looks numerically
    (the recursive method of Armitage, McPherson and Rowe)."""
    if not 1 <= looks <= 20:
        raise ValueError(f"looks: expected 1 to 20, got {looks}")
    check_between("level", level)
    return _boundaries(looks, round(level, 9))


@functools.lru_cache(maxsize=32)
def _boundaries(looks: int, level: float) -> tuple[float, ...]:
    alpha = 1 - level
    if looks == 1:
        return (_z(1 - alpha / 2),)
    low, high = _z(1 - alpha / 2) * 0.5, _z(1 - alpha / 2) * 2
    for _ in range(32):
        mid = (low + high) / 2
        if _crossing_probability(mid * math.sqrt(looks), looks) > alpha:
            low = mid
        else:
            high = mid
    c = high
    return tuple(c * math.sqrt(looks / k) for k in range(1, looks + 1))


def _crossing_probability(bound: float, looks: int, points: int = 121) -> float:
    """P(|S_k| ≥ bound for some k ≤ looks), S a sum of standard normal steps: the density
    of S on the continuation region (−bound, bound) carried from look to look on a grid
    (Simpson's rule)."""
    h = 2 * bound / (points - 1)
    grid = [-bound + i * h for i in range(points)]
    weights = [h / 3 * (1 if i in (0, points - 1) else 4 if i % 2 else 2) for i in range(points)]
    pdf, cdf = _NORMAL.pdf, _NORMAL.cdf
    kernel = [pdf(k * h) for k in range(points)]  # a step from grid point i to j: |i − j|·h
    leave = [cdf(-bound - x) + 1 - cdf(bound - x) for x in grid]  # leaving in one step
    density = [pdf(x) for x in grid]
    crossed = 2 * (1 - cdf(bound))
    for _ in range(2, looks + 1):
        mass = [w * f for w, f in zip(weights, density, strict=True)]
        crossed += math.fsum(m * out for m, out in zip(mass, leave, strict=True))
        density = [
            math.fsum(m * kernel[abs(i - j)] for i, m in enumerate(mass)) for j in range(points)
        ]
    return crossed


@dataclass(frozen=True)
class Look:
    """One planned look of a sequential comparison: after ``tasks`` paired tasks, the
    comparison is decided when |z| reaches ``bound``."""

    index: int
    tasks: int
    bound: float


def looks_for(total_tasks: int, looks: int, level: float = 0.95) -> tuple[Look, ...]:
    """``looks`` equally spaced looks over ``total_tasks`` paired tasks (the last at the
    end), with their O'Brien–Fleming bounds."""
    if total_tasks < 1:
        return ()
    looks = max(1, min(looks, total_tasks))
    bounds = obrien_fleming(looks, level)
    return tuple(
        Look(k, math.ceil(total_tasks * k / looks), bounds[k - 1]) for k in range(1, looks + 1)
    )


def paired_z(differences: Sequence[float]) -> float:
    """The z statistic of paired differences: mean / (sd / √n) with the null's
    second moment (for pass/fail pairs this is McNemar's (b − c)/√(b + c)); 0 when every
    difference is 0."""
    n = len(differences)
    if n == 0:
        return 0.0
    total = math.fsum(differences)
    square = math.fsum(d * d for d in differences)
    if square == 0:
        return 0.0
    return total / math.sqrt(square)
