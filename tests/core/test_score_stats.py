"""artifacts/score_stats.py on hand-made task records: which tasks each score counts,
the repair curve's rounds, and records written before rounds were kept."""

from __future__ import annotations

from dataclasses import replace

import pytest
from records_support import make_record
from statsmodels.stats.proportion import proportion_confint

from pytest_agentbench.artifacts.score_stats import (
    interval_text,
    repair_curve,
    score_estimate,
    score_stats,
)
from pytest_agentbench.artifacts.summary import score
from pytest_agentbench.core.record_parts import RepairSettings
from pytest_agentbench.core.task_record import TaskRecord


def record(outcome: str, rewards: list[float | None], tokens: list[int | None]) -> TaskRecord:
    verdicts = [r for r in rewards if r is not None]
    return make_record(
        outcome=outcome,
        reward=None if outcome == "harness_error" else (verdicts[-1] if verdicts else None),
        first_attempt_reward=rewards[0] if rewards else None,
        pass_threshold=1.0,
        attempts=len(rewards),
        repair={"repairs": 2},
        rounds=[{"reward": r, "tokens": t} for r, t in zip(rewards, tokens, strict=True)],
    )


RECORDS = [
    record("passed", [1.0], [10]),
    record("passed", [0.0, 1.0], [10, 12]),
    record("failed", [0.0, 0.0, 0.0], [10, 12, 14]),
    record("harness_error", [0.0, None], [10, None]),  # the harness lost round 1
    record("harness_error", [], []),  # never reached the model
    record("timeout", [None], [7]),
]


def test_the_curve_starts_at_the_first_try_and_ends_at_the_final_score() -> None:
    curve = repair_curve(RECORDS)
    assert curve is not None
    rows = [(r["round"], r["score"]["value"], r["score"]["n"], r["new_passes"]) for r in curve]
    assert rows == [(0, 0.2, 5, 1), (1, 0.5, 4, 1), (2, 0.5, 4, 0)]
    assert curve[0]["score"]["value"] == score(RECORDS, "first_attempt_reward")
    assert curve[-1]["score"]["value"] == score(RECORDS)
    assert [r["tokens"] for r in curve] == [47, None, 14], "round 1 has an unknown count"
    lo, hi = proportion_confint(1, 5, method="wilson")
    assert (curve[0]["score"]["lo"], curve[0]["score"]["hi"]) == pytest.approx((lo, hi))


def test_errors_as_failures_keeps_every_task_in_every_round() -> None:
    curve = repair_curve(RECORDS, errors_as_failures=True)
    assert curve is not None
    assert [r["score"]["n"] for r in curve] == [6, 6, 6]
    assert curve[-1]["score"]["value"] == score(RECORDS, errors_as_failures=True)


def test_no_curve_without_repairs_and_a_fallback_for_older_records() -> None:
    plain = [replace(r, repair=RepairSettings(repairs=0)) for r in RECORDS]
    assert repair_curve(plain) is None
    older = [replace(r, rounds=None) for r in RECORDS]
    curve = repair_curve(older)
    assert curve is not None and len(curve) == 3
    assert curve[0]["score"]["value"] == score(older, "first_attempt_reward")
    assert curve[-1]["score"]["value"] == score(older)
    assert [r["tokens"] for r in curve] == [None, None, None]


def test_stats_follow_the_score_rule_and_read_as_the_terminal_shows_them() -> None:
    block = score_stats(RECORDS)
    assert block["score"]["value"] == score(RECORDS) and block["score"]["n"] == 4
    assert block["first_try"]["value"] == score(RECORDS, "first_attempt_reward")
    assert block["first_try"]["n"] == 5
    assert interval_text(block["score"]) == "0.500 ± 0.250 (n=4, 95 % CI 0.150–0.850)"
    assert interval_text(score_estimate([])) == "no score"
    rewards = [replace(r, reward=0.5) for r in RECORDS[:3]]
    assert score_estimate(rewards).method == "bootstrap"
    assert score_estimate(rewards) == score_estimate(rewards), "seeded: the same every time"
