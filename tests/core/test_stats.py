"""core/stats.py against scipy and statsmodels (test-only dependencies), hand-computed
pass@k cases and the reference estimator's formula, and a seeded bootstrap."""

from __future__ import annotations

import math
import random
from itertools import combinations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import binomtest
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.proportion import proportion_confint

from pytest_agentbench.core import paired, stats

counts = st.integers(min_value=1, max_value=400).flatmap(
    lambda n: st.tuples(st.integers(min_value=0, max_value=n), st.just(n))
)


@given(counts, st.sampled_from([0.8, 0.9, 0.95, 0.99]))
@settings(max_examples=200, deadline=None)
def test_wilson_matches_statsmodels(case: tuple[int, int], level: float) -> None:
    successes, n = case
    est = stats.wilson(successes, n, level)
    lo, hi = proportion_confint(successes, n, alpha=1 - level, method="wilson")
    assert est.lo == pytest.approx(lo, abs=1e-12)
    assert est.hi == pytest.approx(hi, abs=1e-12)
    assert est.value == successes / n and est.n == n and est.method == "wilson"
    assert est.se == pytest.approx(math.sqrt(est.value * (1 - est.value) / n))


def test_wilson_edges() -> None:
    empty = stats.wilson(0, 0)
    assert (empty.value, empty.n, empty.se, empty.lo, empty.hi) == (None, 0, None, None, None)
    none = stats.wilson(0, 10)
    assert none.lo == 0.0 and 0 < none.hi < 0.35 and none.se == 0.0
    every = stats.wilson(10, 10)
    assert every.hi == 1.0 and 0.65 < every.lo < 1 and every.se == 0.0
    with pytest.raises(ValueError, match="0 <= successes <= n"):
        stats.wilson(11, 10)
    with pytest.raises(ValueError, match="confidence level"):
        stats.wilson(1, 2, 1.5)


def test_the_issue_example_reads_as_written() -> None:
    est = stats.wilson(31, 50)
    assert (round(est.value, 2), round(est.se, 2), round(est.lo, 2), round(est.hi, 2)) == (
        0.62,
        0.07,
        0.48,
        0.74,
    )


def reference_pass_at_k(n: int, c: int, k: int) -> float:
    """The numpy form of the Codex paper's estimator."""
    if n - c < k:
        return 1.0
    return float(1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))


@given(
    st.integers(min_value=1, max_value=200).flatmap(
        lambda n: st.tuples(
            st.just(n),
            st.integers(min_value=0, max_value=n),
            st.integers(min_value=1, max_value=n),
        )
    )
)
@settings(max_examples=300, deadline=None)
def test_pass_at_k_matches_the_reference_and_the_binomial_form(case: tuple[int, int, int]) -> None:
    n, c, k = case
    got = stats.pass_at_k(n, c, k)
    assert got == pytest.approx(reference_pass_at_k(n, c, k), abs=1e-12)
    assert got == pytest.approx(1 - math.comb(n - c, k) / math.comb(n, k), abs=1e-9)
    assert stats.pass_hat_k(n, c, k) == pytest.approx(math.comb(c, k) / math.comb(n, k))


def test_pass_at_k_hand_cases() -> None:
    # 5 samples, 2 correct: pass@1 = 2/5; pass@2 = 1 - C(3,2)/C(5,2) = 1 - 3/10
    assert stats.pass_at_k(5, 2, 1) == pytest.approx(0.4)
    assert stats.pass_at_k(5, 2, 2) == pytest.approx(0.7)
    assert stats.pass_at_k(5, 2, 4) == 1.0  # 4 draws cannot all miss with 3 wrong
    assert stats.pass_at_k(5, 0, 3) == 0.0 and stats.pass_at_k(5, 5, 1) == 1.0
    # pass^2 of 5 samples with 3 correct: C(3,2)/C(5,2) = 3/10
    assert stats.pass_hat_k(5, 3, 2) == pytest.approx(0.3)
    assert stats.pass_hat_k(5, 1, 2) == 0.0 and stats.pass_hat_k(4, 4, 4) == 1.0


def test_pass_at_k_by_enumeration() -> None:
    """pass@k is the share of k-subsets holding a correct sample; pass^k all correct."""
    samples = [True, False, True, False, False, False]
    n, c = len(samples), sum(samples)
    for k in range(1, n + 1):
        subsets = list(combinations(samples, k))
        assert stats.pass_at_k(n, c, k) == pytest.approx(
            sum(any(s) for s in subsets) / len(subsets)
        )
        assert stats.pass_hat_k(n, c, k) == pytest.approx(
            sum(all(s) for s in subsets) / len(subsets)
        )


def test_pass_at_k_rejects_impossible_counts() -> None:
    with pytest.raises(ValueError, match="k=4 is more than the n=3"):
        stats.pass_at_k(3, 0, 4)
    with pytest.raises(ValueError, match="k=4 is more than the n=3"):
        stats.pass_hat_k(3, 3, 4)
    with pytest.raises(ValueError, match="0 <= c <= n"):
        stats.pass_at_k(3, 4, 1)
    with pytest.raises(ValueError, match="k >= 1"):
        stats.pass_at_k(3, 1, 0)
    with pytest.raises(ValueError, match="k=1 is more than the n=0"):
        stats.pass_at_k(0, 0, 1)


@given(st.integers(0, 60), st.integers(0, 60))
@settings(max_examples=200, deadline=None)
def test_mcnemar_matches_statsmodels(b: int, c: int) -> None:
    table = [[7, b], [c, 3]]
    expected = mcnemar(table, exact=True).pvalue
    assert paired.mcnemar_exact(b, c) == pytest.approx(expected, rel=1e-9, abs=1e-300)


@given(st.lists(st.sampled_from([-1.0, -0.25, 0.0, 0.5, 1.0]), max_size=80))
@settings(max_examples=200, deadline=None)
def test_sign_test_matches_scipy_binomtest(differences: list[float]) -> None:
    positive = sum(1 for d in differences if d > 0)
    nonzero = sum(1 for d in differences if d != 0)
    expected = 1.0 if nonzero == 0 else binomtest(positive, nonzero, 0.5).pvalue
    assert paired.sign_test(differences) == pytest.approx(expected, rel=1e-9)


def test_bootstrap_is_reproducible_with_a_seed_and_sound() -> None:
    rng = random.Random(7)
    values = [rng.random() for _ in range(60)]
    first = stats.bootstrap_mean(values, seed=3)
    assert first == stats.bootstrap_mean(values, seed=3)
    assert first != stats.bootstrap_mean(values, seed=4)
    assert first.value == pytest.approx(sum(values) / len(values))
    assert first.lo < first.value < first.hi
    plain_se = np.std(values, ddof=1) / math.sqrt(len(values))
    assert first.se == pytest.approx(plain_se, rel=0.15)
    assert stats.bootstrap_mean([]).value is None
    constant = stats.bootstrap_mean([0.5] * 5)
    assert (constant.lo, constant.hi, constant.se) == (0.5, 0.5, 0.0)


def test_clustered_se_matches_the_sandwich_formula() -> None:
    values = [1.0, 0.0, 1.0, 1.0, 0.0, 0.0, 1.0, 0.5, 0.5]
    tasks = ["a", "a", "a", "b", "b", "b", "c", "c", "c"]
    est = stats.clustered_mean(values, tasks)
    x = np.array(values)
    resid = x - x.mean()
    groups = sorted(set(tasks))
    sums = np.array([resid[[t == g for t in tasks]].sum() for g in groups])
    g = len(groups)
    expected = math.sqrt(g / (g - 1) * (sums**2).sum() / len(x) ** 2)
    assert est.se == pytest.approx(expected) and est.value == pytest.approx(x.mean())
    assert est.hi - est.lo == pytest.approx(2 * 1.959963984540054 * expected)
    # samples of one task agree more with each other than across tasks: the clustered
    # error is wider than the error that counts every sample as independent
    same = stats.clustered_mean([1.0, 1.0, 0.0, 0.0], ["a", "a", "b", "b"])
    assert same.se is not None and same.se > np.std([1, 1, 0, 0], ddof=1) / 2
    assert stats.clustered_mean([1.0, 0.0], ["a", "a"]).se is None
    with pytest.raises(ValueError, match="2 values but 1 cluster"):
        stats.clustered_mean([1.0, 0.0], ["a"])


def test_reducers() -> None:
    assert stats.reduce_samples([0.0, 1.0, 0.5, 1.0], "mean") == 0.625
    assert stats.reduce_samples([0.0, 1.0, 0.5, 1.0], "median") == 0.75
    assert stats.reduce_samples([0.0, 1.0, 0.5], "max") == 1.0
    assert stats.reduce_samples([0.0, 1.0, 0.0], "majority") == 0.0
    assert stats.majority(["b", "a", "b", "a", "c"]) == "b", "a tie goes to the first seen"
    with pytest.raises(ValueError, match="no values"):
        stats.reduce_samples([], "mean")
    with pytest.raises(ValueError, match="expected one of mean, median, max, majority"):
        stats.reduce_samples([1.0], "mode")  # type: ignore[arg-type]


def test_paired_pass_fail_comparison_excludes_harness_errors() -> None:
    first = {f"t{i}": True for i in range(30)} | {"x": None, "y": True, "only-first": True}
    second = {f"t{i}": i < 18 for i in range(30)} | {"x": True, "y": None}
    result = paired.compare_paired(first, second)
    assert result.excluded == 2 and result.difference.n == 30
    assert result.test == "McNemar exact"
    assert result.p_value == pytest.approx(mcnemar([[18, 12], [0, 0]], exact=True).pvalue)
    assert result.difference.value == pytest.approx(12 / 30)
    assert result.significant
    words = result.words("new", "old")
    assert "better (significant at 0.05)" in words and "2 task(s) excluded" in words

    close = paired.compare_paired({"a": True, "b": False}, {"a": False, "b": True})
    assert not close.significant and "inconclusive" in close.words()


def test_paired_reward_comparison_uses_sign_test_and_paired_bootstrap() -> None:
    rng = random.Random(1)
    first = {i: rng.random() for i in range(40)}
    second = {i: v - 0.2 for i, v in first.items()}
    result = paired.compare_paired(first, second, seed=5)
    assert result.test == "sign test"
    assert result.p_value == pytest.approx(binomtest(40, 40, 0.5).pvalue)
    assert result.difference.value == pytest.approx(0.2)
    assert result == paired.compare_paired(first, second, seed=5)
    assert result.significant and result.difference.method == "paired-bootstrap"
    nothing = paired.compare_paired({"a": None}, {"a": 0.5})
    assert nothing.excluded == 1 and not nothing.significant
    assert "no task scored on both sides" in nothing.words()


def test_a_large_bootstrap_is_capped_in_draws() -> None:
    rng = random.Random(2)
    values = [rng.random() for _ in range(stats.MAX_DRAWS // stats.MIN_RESAMPLES + 1)]
    capped = stats.bootstrap_mean(values, seed=1)
    assert capped == stats.bootstrap_mean(values, seed=1, resamples=stats.MIN_RESAMPLES)
    small = values[:50]
    assert stats.bootstrap_mean(small, seed=1) != stats.bootstrap_mean(
        small, seed=1, resamples=stats.MIN_RESAMPLES
    ), "a small sample keeps all its resamples"


def test_bootstrap_interval_does_not_depend_on_the_order_of_the_values() -> None:
    """Records arrive in the order tasks finished (concurrency, xdist): the same rewards in
    another order must give the same interval, or a report changes from run to run."""
    values = [0.0, 0.25, 1.0, 0.5, 1.0, 0.0, 0.75, 1.0, 0.1, 0.9, 0.3]
    first = stats.bootstrap_mean(values, seed=7)
    assert stats.bootstrap_mean(values[::-1], seed=7) == first
    assert stats.bootstrap_mean(sorted(values), seed=7) == first


@pytest.mark.parametrize("values", [[8.98846567431158e304], [1e308, 1e308, 0.5], [-1e308, 1e308]])
def test_finite_values_past_the_float_range_never_raise(values: list[float]) -> None:
    """A plugin's reward may be any float: the score line must still be made (hypothesis
    found 8.99e304 raising OverflowError in the bootstrap's fsum)."""
    boot = stats.bootstrap_mean(values)
    assert boot.value is not None
    assert math.isclose(boot.value, sum(v / len(values) for v in values), rel_tol=1e-12)
    clustered = stats.clustered_mean(values, list(range(len(values))))
    assert clustered.value == boot.value
    assert stats.reduce_samples(values, "mean") == boot.value
