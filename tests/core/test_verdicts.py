"""Verdicts, not p-values (issue 28): planned sample sizes, equivalence margins, Holm over
several models, group-sequential boundaries, and a headline per model.

The statistics are checked against statsmodels / scipy where they have the same thing
(Holm, the normal quantiles), against published constants (O'Brien–Fleming), and every
claimed error rate by a seeded simulation: the planned sample size gives about the
planned power, the equivalence test's false "equivalent" rate stays at or below the
level, the sequential boundaries keep the overall false-positive rate, the paired
interval covers the true difference."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from pytest_agentbench.core import paired, sequential_looks, verdicts


def _pairs(rng: random.Random, n: int, p10: float, p01: float) -> tuple[int, int]:
    """b (first only) and c (second only) discordant counts of n simulated pairs."""
    b = c = 0
    for _ in range(n):
        u = rng.random()
        if u < p10:
            b += 1
        elif u < p10 + p01:
            c += 1
    return b, c


def test_holm_matches_statsmodels() -> None:
    multitest = pytest.importorskip("statsmodels.stats.multitest")
    rng = random.Random(3)
    for _ in range(50):
        ps = [rng.random() ** 2 for _ in range(rng.randint(2, 7))]
        _, expected, _, _ = multitest.multipletests(ps, method="holm")
        assert verdicts.holm(ps) == pytest.approx(list(expected))
    assert verdicts.holm([0.01, None, 0.04]) == [0.02, None, 0.04]


@pytest.mark.parametrize(
    ("looks", "published"), [(2, 1.977), (3, 2.004), (4, 2.024), (5, 2.040), (10, 2.087)]
)
def test_obrien_fleming_constants_match_the_published_table(looks: int, published: float) -> None:
    """Jennison & Turnbull, Table 2.3 (two-sided, α = 0.05): the final look's bound."""
    bounds = sequential_looks.obrien_fleming(looks)
    assert bounds[-1] == pytest.approx(published, abs=0.002)
    assert bounds[0] == pytest.approx(bounds[-1] * looks**0.5)


def test_obrien_fleming_two_looks_against_scipy() -> None:
    """The chance of crossing either bound of two looks, computed by scipy's bivariate
    normal law (correlation √(1/2)), is the level's complement."""
    mvn = pytest.importorskip("scipy.stats").multivariate_normal
    c1, c2 = sequential_looks.obrien_fleming(2)
    rho = 0.5**0.5
    law = mvn(mean=[0, 0], cov=[[1, rho], [rho, 1]])
    inside = law.cdf([c1, c2]) - law.cdf([-c1, c2]) - law.cdf([c1, -c2]) + law.cdf([-c1, -c2])
    assert 1 - inside == pytest.approx(0.05, abs=0.0015)


def test_sequential_looks_keep_the_false_positive_rate() -> None:
    """1 000 seeded trials of two equal sides (each pair discordant with chance 0.3),
    four looks over 200 pairs: the share that ever crosses a bound stays at or below
    0.05 (plus simulation error); a single unplanned look at each point (1.96 every
    time) is shown to inflate it, so the test can tell."""
    rng = random.Random(20261201)
    looks = sequential_looks.looks_for(200, 4)
    crossed = naive = 0
    for _ in range(1000):
        diffs: list[float] = []
        hit = hit_naive = False
        for look in looks:
            while len(diffs) < look.tasks:
                u = rng.random()
                diffs.append(1.0 if u < 0.15 else -1.0 if u < 0.3 else 0.0)
            z = abs(sequential_looks.paired_z(diffs))
            hit = hit or z >= look.bound
            hit_naive = hit_naive or z >= 1.96
        crossed += hit
        naive += hit_naive
    assert crossed / 1000 <= 0.05 + 0.015
    assert naive / 1000 > 0.07, "peeking with 1.96 at every look inflates the error rate"


def test_planned_sample_size_reaches_about_the_planned_power() -> None:
    """Plan for a 0.15 difference with 80 % power (tasks flip independently, no run-to-run
    noise); 1 000 seeded trials of that many pairs detect it (McNemar exact, 0.05) in
    about 80 % of trials — the exact test is a little conservative, so between 0.72
    and 0.9."""
    difference = 0.15
    n = verdicts.sample_size(difference, verdicts.spread_of_differences(difference))
    rng = random.Random(7)
    detected = 0
    for _ in range(1000):
        b, c = _pairs(rng, n, difference, 0.0)
        detected += paired.mcnemar_exact(b, c) < 0.05
    assert 0.72 <= detected / 1000 <= 0.9, (n, detected)


def test_more_epochs_need_fewer_tasks_and_noise_needs_more() -> None:
    plan = verdicts.plan(0.1, noise=0.1, noise_source="assumed")
    tasks = [row.tasks for row in plan.rows]
    assert tasks == sorted(tasks, reverse=True) and tasks[0] > tasks[-1]
    quiet = verdicts.plan(0.1, noise=0.0, noise_source="assumed")
    assert quiet.rows[0].tasks < plan.rows[0].tasks
    with pytest.raises(ValueError, match="difference of 0"):
        verdicts.sample_size(0.0, 0.3)


def test_equivalence_is_rarely_claimed_at_the_margin_and_found_for_equal_sides() -> None:
    """Two one-sided tests: with a true difference exactly at the margin (0.1), 1 000
    seeded trials of 400 pairs call "equivalent" at most 5 % of the time (plus
    simulation error); with equal sides and enough tasks they call it most of the time."""
    rng = random.Random(11)
    at_margin = equal = 0
    for _ in range(1000):
        b, c = _pairs(rng, 400, 0.2, 0.1)  # difference 0.1, discordance 0.3
        found = paired.compare_paired(
            {i: i < b for i in range(400)}, {i: b <= i < b + c for i in range(400)}, margin=0.1
        )
        at_margin += found.decision.word == "equivalent"
        b, c = _pairs(rng, 400, 0.1, 0.1)
        found = paired.compare_paired(
            {i: i < b for i in range(400)}, {i: b <= i < b + c for i in range(400)}, margin=0.1
        )
        equal += found.decision.word == "equivalent"
    assert at_margin / 1000 <= 0.05 + 0.015
    assert equal / 1000 >= 0.8


def test_the_paired_interval_covers_the_true_difference() -> None:
    """Agresti–Min over 1 000 seeded trials of 30 pairs: covers the true difference at
    least 93 % of the time, where a Wald interval on so few pairs falls short."""
    rng = random.Random(5)
    covered = 0
    for _ in range(1000):
        b, c = _pairs(rng, 30, 0.1, 0.05)
        d = paired._paired_proportion(b, c, 30, 0.95)
        assert d.lo is not None and d.hi is not None
        covered += d.lo <= 0.05 <= d.hi
    assert covered / 1000 >= 0.93


def test_an_empty_result_is_never_a_tie() -> None:
    """The issue's example: 4 paired tasks, -0.25, p=1. Not a tie: inconclusive, with
    what would decide it and the smallest difference four tasks could show."""
    found = paired.compare_paired({i: True for i in range(4)}, {i: i != 0 for i in range(4)})
    words = found.words("shuffle", "original")
    assert found.decision.word == "inconclusive"
    assert "tie" not in words and "within noise" not in words
    assert "more task(s) would decide it" in words
    assert "too few tasks to detect even a difference of 1" in words
    # the same four tasks with a margin are still not "equivalent": four agreeing tasks
    # are no proof of equivalence
    same = paired.compare_paired(
        {i: True for i in range(4)}, {i: True for i in range(4)}, margin=0.1
    )
    assert same.decision.word == "inconclusive"


def test_a_detected_difference_is_better_or_worse_and_a_significant_tiny_one_is_equivalent() -> (
    None
):
    big = paired.compare_paired({i: True for i in range(40)}, {i: i < 10 for i in range(40)})
    assert big.decision.word == "better" and "better (significant at 0.05)" in big.words()
    tiny = paired.compare_paired(
        {i: True for i in range(2000)}, {i: i % 50 != 0 for i in range(2000)}, margin=0.05
    )
    assert tiny.significant and tiny.decision.word == "equivalent"
    assert "a real difference, but inside the margin" in tiny.words()


SUITE_TASKS = 24


def _three_model_suite() -> str:
    """24 tasks: `good` and `twin` answer all right, `weak` only every third."""
    lines = ['[suite]\nname = "trio"\nverifier = { kind = "exact" }\n']
    for i in range(SUITE_TASKS):
        wrong = "" if i % 3 == 0 else 'scripted_by_model = { weak = ["no"] }\n'
        lines.append(f'[[task]]\nid = "t{i:02d}"\ninput = "say {i}"\ntarget = "{i}"\n')
        lines.append(f'scripted = ["{i}"]\n{wrong}')
    return "\n".join(lines)


@pytest.mark.slow
def test_three_models_headline_per_model_holm_and_a_margin(pytester: pytest.Pytester) -> None:
    pytester.makefile(".toml", bench_trio=_three_model_suite())
    models = []
    for name in ("good", "weak", "twin"):
        models += ["--agentbench-model", f"{name}=scripted"]
    result = pytester.runpytest(
        "--agentbench",
        *models,
        "--agentbench-margin",
        "0.15",
        "--agentbench-markdown",
        "summary.md",
        "-p",
        "no:cacheprovider",
    )
    out = result.stdout.str()
    result.stdout.fnmatch_lines(
        [
            "score good  1.000 *(n=24*",
            "score weak  0.333 *(n=24*",
            "score twin  1.000 *(n=24*",
        ]
    )
    assert "\nscore 0." not in out and "\nscore 1." not in out, "no score pooled over models"
    result.stdout.fnmatch_lines(
        [
            "compared: each pair of 3 models, Holm-corrected over the 3 pairs",
            "compared: good − weak = +0.667 *Holm-adjusted p=* over 3 comparisons): better*",
            "compared: good − twin = +0.000 *: equivalent within ±0.15*",
            "compared: weak − twin = -0.667 *: worse*",
        ]
    )
    summary = json.loads(
        next(Path(pytester.path).glob("agentbench-results/*/summary.json")).read_text()
    )
    rows = {(r["first"], r["second"]): r for r in summary["comparisons"]}
    assert rows["good", "twin"]["verdict"] == "equivalent"
    assert rows["good", "weak"]["family"] == 3 and rows["good", "weak"]["p_adjusted"] is not None
    assert summary["settings"]["margin"] == 0.15
    markdown = (pytester.path / "summary.md").read_text()
    assert "good − twin = +0.000" in markdown and "equivalent within ±0.15" in markdown


def test_a_margin_outside_zero_to_one_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makefile(".toml", bench_trio=_three_model_suite())
    result = pytester.runpytest(
        "--agentbench", "--agentbench-margin", "1.5", "-p", "no:cacheprovider"
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert (
        "agentbench margin: expected a difference between 0 and 1, got '1.5'" in result.stderr.str()
    )
