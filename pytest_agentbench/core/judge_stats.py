"""How far a judge can be trusted, and a judged pass rate corrected for its error.

Standard library only; checked against scikit-learn / statsmodels in
``tests/verifiers/test_judges.py`` and by simulation.

- ``cohen_kappa``: Cohen's κ between people's labels and the judge's, unweighted, or
  weighted (``linear`` / ``quadratic``) for an ordinal scale; ``kappa_estimate`` adds a
  percentile-bootstrap interval (fixed seed).
- ``rogan_gladen``: the true pass rate from an observed one and the judge's sensitivity
  and specificity, (p + Sp − 1) / (Se + Sp − 1), kept to [0, 1].
- ``corrected_rate``: that correction with an interval that carries the uncertainty of
  all three inputs: each is drawn from its Jeffreys posterior (Beta(k + ½, n − k + ½)),
  the corrected rate computed per draw, and the percentile interval taken (fixed seed).
"""

from __future__ import annotations

import math
import random
from collections.abc import Hashable, Sequence
from typing import Literal, TypeVar

from pytest_agentbench.core.stats import (
    DEFAULT_LEVEL,
    DEFAULT_RESAMPLES,
    DEFAULT_SEED,
    Estimate,
    _percentiles,
)

H = TypeVar("H", bound=Hashable)
Weights = Literal["linear", "quadratic"] | None

#: Draws of the corrected rate's Monte Carlo interval.
DEFAULT_DRAWS = 4000


def confusion(pairs: Sequence[tuple[H, H]], categories: Sequence[H]) -> list[list[int]]:
    """Counts of (label, judge) pairs: row = the label's category, column = the judge's."""
    index = {c: i for i, c in enumerate(categories)}
    matrix = [[0] * len(categories) for _ in categories]
    for label, judged in pairs:
        matrix[index[label]][index[judged]] += 1
    return matrix


def _weight(i: int, j: int, k: int, weights: Weights) -> float:
    if weights is None:
        return 0.0 if i == j else 1.0
    distance = abs(i - j) / (k - 1) if k > 1 else 0.0
    return distance if weights == "linear" else distance * distance


def kappa_of_matrix(matrix: Sequence[Sequence[int]], weights: Weights = None) -> float | None:
    """Cohen's κ of a confusion matrix; None when undefined (no pairs, or the chance
    disagreement is zero: both raters used one category only)."""
    k = len(matrix)
    n = sum(sum(row) for row in matrix)
    if n == 0:
        return None
    rows = [sum(row) / n for row in matrix]
    cols = [sum(matrix[i][j] for i in range(k)) / n for j in range(k)]
    observed = expected = 0.0
    for i in range(k):
        for j in range(k):
            w = _weight(i, j, k, weights)
            observed += w * matrix[i][j] / n
            expected += w * rows[i] * cols[j]
    if expected <= 0:
        return None
    return 1.0 - observed / expected


def cohen_kappa(
    pairs: Sequence[tuple[H, H]], categories: Sequence[H], weights: Weights = None
) -> float | None:
    """Cohen's κ of (label, judge) pairs over ordered ``categories``."""
    return kappa_of_matrix(confusion(pairs, categories), weights)


def kappa_unknown(
    pairs: Sequence[tuple[H, H]], categories: Sequence[H], said: str = "said"
) -> str | None:
    """Why κ cannot be estimated from (label, judge) pairs, or None when it can: no pairs,
    or a rater that used one category only (a judge that never said pass, labels that hold
    no fail). κ then comes out 0 or undefined whatever the judge's worth, and every
    resample alike: a zero-width interval that would read as a measurement."""
    if not pairs:
        return "no labelled answer was judged"
    judged = {judge for _, judge in pairs}
    labels = {label for label, _ in pairs}
    if len(judged) < 2:
        never = [str(c) for c in categories if c not in judged]
        if len(categories) == 2 and len(never) == 1:
            return f"the judge never {said} {never[0]}"
        return f"the judge gave every labelled answer {next(iter(judged))}"
    if len(labels) < 2:
        none = [str(c) for c in categories if c not in labels]
        if len(categories) == 2 and len(none) == 1:
            return f"no labelled answer is {none[0]}"
        return f"every labelled answer is {next(iter(labels))}"
    return None


def kappa_estimate(
    pairs: Sequence[tuple[H, H]],
    categories: Sequence[H],
    weights: Weights = None,
    *,
    level: float = DEFAULT_LEVEL,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> Estimate:
    """κ with a percentile-bootstrap interval over the pairs (resamples where κ is
    undefined are left out); ``se`` is the spread of the resampled κ."""
    method = "bootstrap" if weights is None else f"bootstrap ({weights} weights)"
    value = cohen_kappa(pairs, categories, weights)
    n = len(pairs)
    if value is None:
        return Estimate(None, n, None, None, None, method, level)
    rng = random.Random(seed)
    draws: list[float] = []
    for _ in range(resamples):
        sample = [pairs[rng.randrange(n)] for _ in range(n)]
        again = cohen_kappa(sample, categories, weights)
        if again is not None:
            draws.append(again)
    if len(draws) < 2:
        return Estimate(value, n, None, None, None, method, level)
    draws.sort()
    lo, hi = _percentiles(draws, level)
    mean = sum(draws) / len(draws)
    se = math.sqrt(sum((d - mean) ** 2 for d in draws) / (len(draws) - 1))
    return Estimate(value, n, se, min(lo, value), max(hi, value), method, level)


def rogan_gladen(observed: float, sensitivity: float, specificity: float) -> float | None:
    """The true rate an observed judged pass rate stands for, given the judge's
    sensitivity and specificity, kept to [0, 1]; None when Se + Sp ≤ 1 (a judge no better
    than chance tells nothing)."""
    youden = sensitivity + specificity - 1
    if youden <= 0:
        return None
    return min(1.0, max(0.0, (observed + specificity - 1) / youden))


def corrected_rate(
    passed: int,
    n: int,
    true_pos: int,
    positives: int,
    true_neg: int,
    negatives: int,
    *,
    level: float = DEFAULT_LEVEL,
    draws: int = DEFAULT_DRAWS,
    seed: int = DEFAULT_SEED,
) -> Estimate:
    """The Rogan–Gladen corrected pass rate of ``passed`` of ``n`` judged tasks, the
    judge's sensitivity measured as ``true_pos`` of ``positives`` labelled-pass answers
    and its specificity as ``true_neg`` of ``negatives`` labelled-fail ones. The interval
    draws all three from their Jeffreys posteriors; draws where the judge is no better
    than chance are left out. ``value`` is None when the point estimate is undefined."""
    method = "rogan-gladen"
    if n <= 0 or positives <= 0 or negatives <= 0:
        return Estimate(None, n, None, None, None, method, level)
    value = rogan_gladen(passed / n, true_pos / positives, true_neg / negatives)
    if value is None:
        return Estimate(None, n, None, None, None, method, level)
    rng = random.Random(seed)
    found: list[float] = []
    for _ in range(draws):
        p = rng.betavariate(passed + 0.5, n - passed + 0.5)
        se = rng.betavariate(true_pos + 0.5, positives - true_pos + 0.5)
        sp = rng.betavariate(true_neg + 0.5, negatives - true_neg + 0.5)
        again = rogan_gladen(p, se, sp)
        if again is not None:
            found.append(again)
    if len(found) < 2:
        return Estimate(value, n, None, None, None, method, level)
    found.sort()
    lo, hi = _percentiles(found, level)
    mean = sum(found) / len(found)
    spread = math.sqrt(sum((f - mean) ** 2 for f in found) / (len(found) - 1))
    return Estimate(value, n, spread, min(lo, value), max(hi, value), method, level)


def corrected_difference(
    first: tuple[int, int],
    second: tuple[int, int],
    true_pos: int,
    positives: int,
    true_neg: int,
    negatives: int,
    *,
    level: float = DEFAULT_LEVEL,
    draws: int = DEFAULT_DRAWS,
    seed: int = DEFAULT_SEED,
) -> tuple[Estimate, Estimate]:
    """Two models judged by one calibrated judge, each ``(passed, n)``: the difference
    of their judged pass rates (first − second) and of their corrected ones, each with a
    Monte Carlo interval over Jeffreys posteriors. The judge's sensitivity and
    specificity are drawn once per draw for both sides: one judge graded both."""
    (pa, na), (pb, nb) = first, second
    rng = random.Random(seed)
    raw: list[float] = []
    fixed: list[float] = []
    for _ in range(draws):
        a = rng.betavariate(pa + 0.5, na - pa + 0.5)
        b = rng.betavariate(pb + 0.5, nb - pb + 0.5)
        se = rng.betavariate(true_pos + 0.5, positives - true_pos + 0.5)
        sp = rng.betavariate(true_neg + 0.5, negatives - true_neg + 0.5)
        raw.append(a - b)
        ca, cb = rogan_gladen(a, se, sp), rogan_gladen(b, se, sp)
        if ca is not None and cb is not None:
            fixed.append(ca - cb)
    observed = pa / na - pb / nb if na and nb else None
    pos_ok = positives > 0 and negatives > 0
    ca = (
        rogan_gladen(pa / na, true_pos / positives, true_neg / negatives) if pos_ok and na else None
    )
    cb = (
        rogan_gladen(pb / nb, true_pos / positives, true_neg / negatives) if pos_ok and nb else None
    )
    corrected = ca - cb if ca is not None and cb is not None else None
    return (
        _interval(observed, raw, na + nb, "jeffreys difference", level),
        _interval(corrected, fixed, na + nb, "rogan-gladen difference", level),
    )


def _interval(
    value: float | None, found: list[float], n: int, method: str, level: float
) -> Estimate:
    if value is None or len(found) < 2:
        return Estimate(value, n, None, None, None, method, level)
    found.sort()
    lo, hi = _percentiles(found, level)
    mean = sum(found) / len(found)
    spread = math.sqrt(sum((f - mean) ** 2 for f in found) / (len(found) - 1))
    return Estimate(value, n, spread, min(lo, value), max(hi, value), method, level)
