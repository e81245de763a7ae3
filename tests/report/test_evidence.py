"""Failure reasons: each tier and artifact probe on real files (the outcome lines, the
ordering and caps, the plugin run and the mining fuzz: test_evidence_lines.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from evidence_support import (
    INNER_TESTS,
    SAMPLE_TESTS,
    ctrf_test,
    pytest_stdout,
    record,
    write_ctrf,
    write_reward,
)

from pytest_agentbench.report.ctrf_scan import FIELD_CAP, TEST_CAP, scan_ctrf
from pytest_agentbench.report.evidence import failure_reason
from pytest_agentbench.report.probes import READ_CAP
from pytest_agentbench.report.reason_text import BODY_LIMIT
from pytest_agentbench.report.verifier_evidence import metric_breakdown

# --- tiers 1, 2 and 4 ---------------------------------------------------------------------


def test_the_verifiers_own_error_wins_over_everything(tmp_path: Path) -> None:
    write_ctrf(tmp_path, SAMPLE_TESTS)
    verdict = {"reward": 0.0, "metrics": {"x": 0}, "error": "bad regex:\n   unterminated  group"}
    assert failure_reason(record(tmp_path, verdict=verdict)) == "bad regex: unterminated group"


def test_found_passed_and_ok_pair_with_their_totals() -> None:
    metrics = {
        "reward": 0.1,
        "checks_ok": 2,
        "checks_total": 2,
        "tests_passed": 3,
        "tests_total": 4,
        "files_found": 1,
        "files_total": 4,
    }
    assert metric_breakdown(metrics) == "files found 1/4, tests passed 3/4, checks ok 2/2"


def test_partial_credit_ranks_below_perfect_and_zero_first() -> None:
    metrics = {"perfect": 1, "big": 0.7, "small": 0.2, "zero": 0, "other_zero": 0.0}
    assert metric_breakdown(metrics) == "zero 0, other_zero 0, small 0.2"
    assert metric_breakdown({"perfect": 1, "half": 0.5}) == "half 0.5, perfect 1"


def test_metrics_nest_one_level_under_metrics_else_details() -> None:
    assert metric_breakdown({"reward": 0, "metrics": {"a": 0.5}, "details": {"b": 0}}) == "a 0.5"
    nested = {"reward": 0, "metrics": {"note": "x"}, "details": {"n_found": 1, "n_total": 3}}
    assert metric_breakdown(nested) == "n found 1/3"
    assert metric_breakdown({"flat": 0, "metrics": {"a": 0.5}}) == "flat 0"
    assert metric_breakdown({"reward": 0.5, "name": "grader", "ok": True}) is None


def test_the_verdict_metrics_give_tier_two() -> None:
    verdict = {"reward": 0.25, "metrics": {"tests_passed": 1, "tests_total": 4, "style": 1}}
    line = failure_reason(record(reward=0.25, verdict=verdict))
    assert line == "reward 0.25 — tests passed 1/4, style 1"


@pytest.mark.parametrize("reward", [None, float("nan"), float("inf")])
def test_a_missing_or_odd_reward_is_never_printed(reward: Any) -> None:
    line = failure_reason(record(reward=reward, verdict={"reward": reward, "metrics": {}}))
    assert line == "failed"
    verdict = {"reward": None, "metrics": {"x": 0}}
    assert failure_reason(record(reward=reward, verdict=verdict)) == "x 0"


@pytest.mark.parametrize("reward", ["0.5", True, [0]])
def test_a_reward_that_is_no_number_is_no_record(reward: Any) -> None:
    """What the reasons could once be handed, the record type now refuses on reading."""
    with pytest.raises(ValueError, match="reward"):
        record(reward=reward)


def test_tier_four_is_the_bare_reward(tmp_path: Path) -> None:
    assert failure_reason(record(tmp_path / "missing")) == "reward 0"


# --- tier 3: the artifact probes ------------------------------------------------------------


def test_ctrf_first_failed_test_with_counts(tmp_path: Path) -> None:
    write_ctrf(tmp_path, SAMPLE_TESTS)
    assert failure_reason(record(tmp_path)) == (
        "reward 0 — test_fail failed: AssertionError: one is not two assert 1 == 2"
        " (+1 more failure; 5/9 checks passed)"
    )


def test_ctrf_setup_errors_count_as_failures(tmp_path: Path) -> None:
    tests = [t for t in SAMPLE_TESTS if t["status"] != "failed"]
    setup_error = next(t for t in SAMPLE_TESTS if t.get("rawStatus") == "setup_failed")
    write_ctrf(tmp_path, [*tests, setup_error])
    assert failure_reason(record(tmp_path)) == (
        "reward 0 — test_setup_error error at setup: RuntimeError: setup exploded"
        " (5/8 checks passed)"
    )


def test_the_body_is_cut_before_the_count_suffix_is_added(tmp_path: Path) -> None:
    long = ctrf_test("test_long", "failed", rawStatus="call_failed", message="assert " + "x" * 300)
    write_ctrf(tmp_path, [long, *SAMPLE_TESTS])
    line = failure_reason(record(tmp_path))
    body, suffix = line.removeprefix("reward 0 — ").split(" (+")
    assert suffix == "2 more failures; 5/10 checks passed)"
    assert len(body) == BODY_LIMIT
    assert body.startswith("test_long failed: assert xxx") and body.endswith("…")


def test_a_ctrf_far_larger_than_the_read_cap_still_yields_its_first_failure(
    tmp_path: Path,
) -> None:
    trace = "E   " + "huge diff line\n" * 25_000
    passing = [
        ctrf_test(f"test_ok[{i}]", "passed", trace="log " * 300, extra={"n": [i, {"i": i}]})
        for i in range(300)
    ]
    failing = ctrf_test(
        "test_big", "failed", rawStatus="call_failed", trace=trace, message="assert 3 == 4"
    )
    later = ctrf_test("test_later", "failed", rawStatus="call_failed", message="later")
    path = write_ctrf(tmp_path, [*passing, failing, later])
    assert path.stat().st_size > 10 * READ_CAP
    assert failure_reason(record(tmp_path)) == (
        "reward 0 — test_big failed: assert 3 == 4 (+1 more failure; 300/302 checks passed)"
    )


@pytest.mark.parametrize("trace_chars", [0, TEST_CAP], ids=["decoded-whole", "streamed"])
def test_one_huge_field_is_cut_per_test_not_skipped(tmp_path: Path, trace_chars: int) -> None:
    message = "AssertionError: " + 'é\\"' * (4 * FIELD_CAP)
    failing = ctrf_test("test_x", "failed", trace="t" * trace_chars, message=message)
    write_ctrf(tmp_path, [failing])
    findings = scan_ctrf(tmp_path / "ctrf.json")
    assert findings is not None and findings.first_failure is not None
    assert findings.first_failure.message.startswith('AssertionError: é\\"é')
    assert len(findings.first_failure.message) <= FIELD_CAP
    assert (findings.failures, findings.passed, findings.total) == (1, 0, 1)


def test_a_truncated_ctrf_takes_its_counts_from_the_summary(tmp_path: Path) -> None:
    path = write_ctrf(tmp_path, SAMPLE_TESTS)
    text = path.read_text(encoding="utf-8")
    path.write_text(text[: text.index("test_sample.py::test_skip")], encoding="utf-8")
    assert failure_reason(record(tmp_path)).endswith(
        "test_fail failed: AssertionError: one is not two assert 1 == 2"
        " (+1 more failure; 5/9 checks passed)"
    )


def test_reward_json_flat_and_nested(tmp_path: Path) -> None:
    flat = {"reward": 0.25, "name": "grader", "tests_passed": 1, "tests_total": 4, "lint": 1}
    write_reward(tmp_path, flat)
    assert failure_reason(record(tmp_path, reward=0.25)) == "reward 0.25 — tests passed 1/4, lint 1"
    nested = {"reward": 0.4, "metrics": {}, "details": {"coverage": 0.4, "got": "12"}}
    write_reward(tmp_path, nested)
    assert failure_reason(record(tmp_path, reward=0.4)) == "reward 0.4 — coverage 0.4"


def test_an_oversized_reward_json_is_skipped_not_truncated(
    tmp_path: Path, pytester: pytest.Pytester
) -> None:
    pytester.makepyfile(test_a=INNER_TESTS)
    (tmp_path / "test-stdout.txt").write_text(pytest_stdout(pytester), encoding="utf-8")
    write_reward(tmp_path, {"reward": 0, "coverage": 0.5, "log": "x" * READ_CAP})
    assert failure_reason(record(tmp_path)) == "reward 0 — 1 failed, 1 passed, 1 error"
    padded = json.dumps({"reward": 0, "coverage": 0.5}) + " " * READ_CAP
    (tmp_path / "reward.json").write_text(padded, encoding="utf-8")
    assert failure_reason(record(tmp_path)) == "reward 0 — 1 failed, 1 passed, 1 error"
    write_reward(tmp_path, {"reward": 0, "coverage": 0.5, "log": "x" * (READ_CAP - 100)})
    assert failure_reason(record(tmp_path)) == "reward 0 — coverage 0.5"


def test_stdout_summary_line_then_last_failed_or_error_line(
    tmp_path: Path, pytester: pytest.Pytester
) -> None:
    pytester.makepyfile(test_a=INNER_TESTS)
    stdout = pytest_stdout(pytester)
    (tmp_path / "test-stdout.txt").write_text(stdout, encoding="utf-8")
    assert failure_reason(record(tmp_path)) == "reward 0 — 1 failed, 1 passed, 1 error"
    cut_short = stdout[: stdout.rindex("=====")]
    cut_short = cut_short[: cut_short.rindex("\n")]
    (tmp_path / "test-stdout.txt").write_text(cut_short, encoding="utf-8")
    assert failure_reason(record(tmp_path)) == (
        "reward 0 — ERROR test_a.py::test_err - RuntimeError: setup exploded"
    )


def test_stdout_collection_errors_are_evidence(tmp_path: Path, pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_bad="def test_x(:\n")
    stdout = pytest_stdout(pytester, "-rN")
    (tmp_path / "test-stdout.txt").write_text(stdout, encoding="utf-8")
    assert failure_reason(record(tmp_path)) == "reward 0 — 1 error"
    before_summary = stdout[: stdout.index("!!!")]
    (tmp_path / "test-stdout.txt").write_text(before_summary, encoding="utf-8")
    assert failure_reason(record(tmp_path)) == "reward 0 — ERROR collecting test_bad.py"


def test_stdout_is_read_from_its_tail(tmp_path: Path, pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_a=INNER_TESTS)
    noise = "".join(f"FAILED noise.py::test_{i} - old\n" for i in range(8000))
    stdout = noise + pytest_stdout(pytester, "-q")
    assert len(stdout) > 4 * READ_CAP
    (tmp_path / "test-stdout.txt").write_text(stdout, encoding="utf-8")
    assert failure_reason(record(tmp_path)) == "reward 0 — 1 failed, 1 passed, 1 error"


def test_probe_order_ctrf_then_reward_json_then_stdout(tmp_path: Path) -> None:
    (tmp_path / "test-stdout.txt").write_text("==== 2 failed, 1 passed in 0.12s ====\n")
    assert failure_reason(record(tmp_path)) == "reward 0 — 2 failed, 1 passed"
    write_reward(tmp_path, {"reward": 0, "metrics": {"cases_ok": 1, "cases_total": 3}})
    assert failure_reason(record(tmp_path)) == "reward 0 — cases ok 1/3"
    write_ctrf(tmp_path, [t for t in SAMPLE_TESTS if t["status"] != "failed"])
    assert failure_reason(record(tmp_path)) == "reward 0 — cases ok 1/3"
    write_ctrf(tmp_path, SAMPLE_TESTS)
    assert failure_reason(record(tmp_path)).startswith("reward 0 — test_fail failed:")
    (tmp_path / "ctrf.json").write_bytes(b'{"results": {"tests": [{"name": ]]]')
    assert failure_reason(record(tmp_path)) == "reward 0 — cases ok 1/3"
    (tmp_path / "reward.json").write_bytes(b'{"reward": 0, "metrics": {"cases_ok": 1,')
    assert failure_reason(record(tmp_path)) == "reward 0 — 2 failed, 1 passed"
