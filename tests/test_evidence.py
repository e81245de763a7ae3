"""Failure reasons: each tier and artifact probe on real files, the caps, the ordering and
the pointer, each outcome line, one run through the plugin, and a fuzz showing that mining
never raises."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_agentbench.report.ctrf_scan import FIELD_CAP, TEST_CAP, scan_ctrf
from pytest_agentbench.report.evidence import (
    BODY_LIMIT,
    details_pointer,
    failure_reason,
    metric_breakdown,
    order_failures,
)
from pytest_agentbench.report.probes import READ_CAP
from pytest_agentbench.report.terminal import summary_lines


def ctrf_test(name: str, status: str, **fields: Any) -> dict[str, Any]:
    """One test entry shaped (keys and their order) like pytest-json-ctrf 0.6.1 writes it."""
    test: dict[str, Any] = {"name": f"test_sample.py::{name}", "status": status}
    if "rawStatus" in fields:
        test["rawStatus"] = fields.pop("rawStatus")
    test.update(
        {
            "duration": 11,
            "start": 1796015181736,
            "stop": 1796015181747,
            "suite": ["test_sample.py"],
            "retries": 0,
            "filePath": "test_sample.py",
        }
    )
    test.update(fields)
    return test


# The tests of /work/shared/ctrf/samples/pytest-json-ctrf-0.6.1.serial.json, in its order.
SAMPLE_TESTS = [
    ctrf_test("test_pass", "passed"),
    ctrf_test(
        "test_fail",
        "failed",
        rawStatus="call_failed",
        trace='def test_fail():\n>       assert 1 == 2, "one is not two"\nE       AssertionError:'
        " one is not two\nE       assert 1 == 2\n\ntest_sample.py:10: AssertionError",
        message="AssertionError: one is not two\nassert 1 == 2",
    ),
    ctrf_test("test_skip", "skipped", message="not today"),
    ctrf_test("test_xfail", "skipped", rawStatus="xfailed", tags=["xfail::reason_known bug"]),
    ctrf_test("test_xpass", "passed", tags=["xfail::reason_should fail but passes"]),
    ctrf_test(
        "test_setup_error",
        "failed",
        rawStatus="setup_failed",
        trace='@pytest.fixture\n    def broken():\n>       raise RuntimeError("setup exploded")',
        message="RuntimeError: setup exploded",
    ),
    ctrf_test("test_param[1]", "passed", parameters={"n": 1}),
    ctrf_test("test_param[2]", "passed", parameters={"n": 2}),
    ctrf_test("TestGroup::test_in_class", "passed", tags=["slow"]),
]


def ctrf_report(tests: list[dict[str, Any]]) -> dict[str, Any]:
    counts = {s: sum(t["status"] == s for t in tests) for s in ("passed", "failed", "skipped")}
    return {
        "reportFormat": "CTRF",
        "specVersion": "1.0.0",
        "reportId": "9e1c5469-8eae-41de-b479-346fda6a7fbf",
        "timestamp": "2026-11-30T05:06:21.827529+00:00",
        "generatedBy": "pytest",
        "results": {
            "tool": {"name": "pytest", "version": "9.2.0"},
            "summary": {
                "tests": len(tests),
                **counts,
                "pending": 0,
                "other": 0,
                "flaky": 0,
                "suites": 1,
                "start": 1796015181698,
                "stop": 1796015181827,
                "duration": 129,
            },
            "environment": {"osPlatform": "linux"},
            "tests": tests,
        },
    }


def write_ctrf(vdir: Path, tests: list[dict[str, Any]]) -> Path:
    vdir.mkdir(parents=True, exist_ok=True)
    path = vdir / "ctrf.json"
    path.write_text(json.dumps(ctrf_report(tests), indent=4), encoding="utf-8")
    return path


def write_reward(vdir: Path, data: Any) -> None:
    vdir.mkdir(parents=True, exist_ok=True)
    (vdir / "reward.json").write_text(json.dumps(data, indent=2), encoding="utf-8")


def pytest_stdout(pytester: pytest.Pytester, *args: str) -> str:
    """What a real pytest run printed (run in-process on the files already made)."""
    result = pytester.runpytest("-p", "no:cacheprovider", "-p", "no:agentbench", *args)
    return "\n".join(result.outlines) + "\n"


INNER_TESTS = """
import pytest

@pytest.fixture
def broken():
    raise RuntimeError("setup exploded")

def test_ok():
    pass

def test_fail():
    assert 1 == 2, "one is not two"

def test_err(broken):
    pass
"""


def record(vdir: Path | None = None, **fields: Any) -> dict[str, Any]:
    """A record as artifacts/record.py writes it for a failed task with a plain verdict."""
    base: dict[str, Any] = {
        "suite": "s",
        "task_id": "t",
        "outcome": "failed",
        "reward": 0.0,
        "attempts": 1,
        "last_feedback": None,
        "error": None,
        "verdict": {"reward": 0.0, "metrics": {}, "error": None},
        "max_tokens": 256,
        "verifier_dir": None if vdir is None else str(vdir),
    }
    base.update(fields)
    return base


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


@pytest.mark.parametrize("reward", [None, "0.5", float("nan"), True, [0]])
def test_a_missing_or_odd_reward_is_never_printed(reward: Any) -> None:
    line = failure_reason(record(reward=reward, verdict={"reward": reward, "metrics": {}}))
    assert line == "failed"
    verdict = {"reward": None, "metrics": {"x": 0}}
    assert failure_reason(record(reward=reward, verdict=verdict)) == "x 0"


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


# --- outcome lines ---------------------------------------------------------------------------


def test_loop_kill_line() -> None:
    loop = {
        "channel": "answer",
        "period": 13,
        "repetitions": 81,
        "score": 0.97,
        "detected_s": 2.0,
        "killed_s": 12.4,
        "excerpt": "and again",
    }
    line = failure_reason(record(outcome="loop_killed", reward=None, verdict=None, loop=loop))
    assert line == "loop killed: period 13 ×81 in answer at 12.4s"
    assert (
        failure_reason(record(outcome="loop_killed", reward=None, verdict=None, loop="?"))
        == "loop killed"
    )


def test_timeout_line() -> None:
    timeout = record(outcome="timeout", reward=None, verdict=None, error="timeout after 60s")
    assert failure_reason(timeout) == "timeout after 60s"
    assert (
        failure_reason({**timeout, "timeout_s": 90.0, "reward": 0})
        == "reward 0 — timeout after 90s"
    )


def test_output_token_limit_line(tmp_path: Path) -> None:
    assert failure_reason(record(outcome="length_exceeded", max_tokens=512)) == (
        "reward 0 — output-token limit (512) reached"
    )
    write_ctrf(tmp_path, SAMPLE_TESTS)
    line = failure_reason(record(tmp_path, outcome="length_exceeded", max_tokens=None))
    assert line == (
        "reward 0 — output-token limit reached; test_fail failed: AssertionError: one is not two"
        " assert 1 == 2 (+1 more failure; 5/9 checks passed)"
    )


def _failure(message: str, *, status: int | None = None, retries: int = 0, detail: str = ""):
    return {
        "kind": "rate_limited" if status in (429, 529) else "provider_error",
        "stage": "model",
        "message": message,
        "evidence": None,
        "status": status,
        "retries": retries,
        "detail": detail,
    }


def test_provider_overloaded_line_with_retries() -> None:
    """The line comes from the record's structured failure (status, retries, detail), set
    where the error happened; the message text is never parsed."""
    error = "scripted: HTTP 529 from http://127.0.0.1:8011/v1/messages: Overloaded"
    failed = record(outcome="harness_error", reward=None, verdict=None, error=error)
    retried = _failure(error, status=529, retries=4, detail="Overloaded")
    assert failure_reason({**failed, "failure": retried}) == (
        "harness error: provider 529 overloaded after 4 retries: Overloaded"
    )
    once = _failure(error, status=529, detail="Overloaded")
    assert failure_reason({**failed, "failure": once}) == (
        "harness error: provider 529 overloaded: Overloaded"
    )
    # an error met inside a stream has a status but no HTTP error response: its own text
    in_stream = "scripted: overloaded_error in the stream from http://127.0.0.1:1/x: busy"
    streamed = _failure(in_stream, status=529, retries=2)
    assert failure_reason({**failed, "error": in_stream, "failure": streamed}) == (
        f"harness error: {in_stream} (after 2 retries)"
    )
    # a status in the text alone means nothing: only the structured status counts
    assert failure_reason(failed) == f"harness error: {error}"
    plain_text = "scripted: HTTP 500 from http://127.0.0.1:1/x: outage"
    plain = {**failed, "error": plain_text, "failure": _failure(plain_text, status=500)}
    assert failure_reason(plain) == f"harness error: {plain_text}"
    refused_text = "scripted: cannot connect: " + "refused " * 30
    refused = {**failed, "error": refused_text, "failure": _failure(refused_text, retries=1)}
    line = failure_reason(refused)
    assert line.endswith("… (after 1 retry)") and "refused" in line


def test_repairs_exhausted_line(tmp_path: Path) -> None:
    feedback = "Your answer 11 is not\n  the expected number."
    repaired = record(attempts=4, last_feedback=feedback, verdict={"metrics": {"correct": 0}})
    assert failure_reason(repaired) == (
        "reward 0 — repairs exhausted (3): Your answer 11 is not the expected number."
    )
    write_ctrf(tmp_path, SAMPLE_TESTS)
    line = failure_reason(record(tmp_path, attempts=2, last_feedback="2 of 9 checks failed."))
    assert line == (  # the inner report's first failure beats feedback that only counts
        "reward 0 — repairs exhausted (1): test_fail failed: AssertionError: one is not two"
        " assert 1 == 2 (+1 more failure; 5/9 checks passed)"
    )
    assert failure_reason(record(attempts=2, verdict={"metrics": {"correct": 0}})) == (
        "reward 0 — repairs exhausted (1): correct 0"
    )


# --- ordering, caps and the pointer ---------------------------------------------------------


def test_failures_are_ordered_by_severity_then_lowest_reward(tmp_path: Path) -> None:
    records = [
        record(task_id="half", reward=0.5),
        record(task_id="passed", outcome="passed", reward=1.0),
        record(task_id="zero", reward=0.0),
        record(task_id="length", outcome="length_exceeded"),
        record(task_id="timeout", outcome="timeout", reward=None),
        record(task_id="loop", outcome="loop_killed", reward=None),
        record(task_id="harness", outcome="harness_error", reward=None),
        record(task_id="none", reward=None),
        record(task_id="zero-again", reward=0.0),
    ]
    order = [r["task_id"] for r in order_failures(records)]
    assert order == ["harness", "loop", "timeout", "length", "none", "zero", "zero-again", "half"]


def test_terminal_caps_five_lines_and_points_at_one_existing_verifier_dir(
    tmp_path: Path,
) -> None:
    records = [record(tmp_path / f"v{i}", task_id=f"t{i}", reward=i / 10) for i in range(7)]
    (tmp_path / "v3").mkdir()
    (tmp_path / "v6").mkdir()
    records.append(record(tmp_path / "v6", task_id="h", outcome="harness_error", error="boom"))
    lines = summary_lines(records, run_dir=str(tmp_path), wall_s=1.0)
    crosses = [line for line in lines if line.startswith("✗ ")]
    assert crosses == [f"✗ s::t{i}: reward {i / 10:g}" for i in range(5)]
    assert "… and 2 more" in lines
    assert lines.count(f"(details: {tmp_path / 'v3'})") == 1
    assert details_pointer(records) == str(tmp_path / "v3")
    assert lines[
        lines.index("harness errors (not the model's fault; excluded from the score):") + 1
    ] == ("! s::h: harness error: boom")
    assert details_pointer([records[0], records[-1]]) is None


# --- through the plugin -------------------------------------------------------------------------

CTRF_CONFTEST = """
import json
import pytest
from pytest_agentbench.verifiers import FunctionVerifier, Verdict

REPORT = {report!r}

def _inner_tests(check):
    check.verifier_dir.mkdir(parents=True, exist_ok=True)
    (check.verifier_dir / "ctrf.json").write_text(json.dumps(REPORT, indent=4))
    return Verdict(0.0, feedback="tests failed")

@pytest.hookimpl
def pytest_agentbench_verifiers():
    return [FunctionVerifier("inner_tests", _inner_tests)]
"""


def test_a_run_mines_its_verifier_ctrf(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(CTRF_CONFTEST.format(report=ctrf_report(SAMPLE_TESTS)))
    pytester.makefile(
        ".toml",
        bench_code='[suite]\nverifier = { kind = "inner_tests" }\n'
        '[[task]]\nid = "add"\ninput = "Write add()."\nscripted = ["def add(): pass"]\n',
    )
    result = pytester.runpytest("--agentbench", "-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "✗ code::add: reward 0 — test_fail failed: AssertionError: one is not two"
            " assert 1 == 2 (+1 more failure; 5/9 checks passed)",
            "(details: *add*verifier)",
        ]
    )


# --- mining never raises --------------------------------------------------------------------

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text(max_size=30)
    | st.sampled_from(["failed", "passed", "setup_failed", "reward", "tests", "results"]),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                [
                    *("results", "tests", "summary", "name", "status", "rawStatus", "message"),
                    *("reward", "metrics", "details", "x_found", "x_total", "failed", "passed"),
                ]
            )
            | st.text(max_size=8),
            inner,
            max_size=5,
        )
    ),
    max_leaves=25,
)


def file_bytes() -> st.SearchStrategy[bytes | None]:
    ctrf = ctrf_report(SAMPLE_TESTS)
    real = json.dumps(ctrf, indent=4).encode()
    return st.one_of(
        st.none(),
        st.binary(max_size=300),
        json_values.map(lambda v: json.dumps(v).encode()),
        st.integers(0, len(real)).map(lambda n: real[:n]),
        st.builds(
            lambda v: json.dumps({"results": {"summary": v, "tests": [v, v]}}).encode(),
            json_values,
        ),
        st.text(max_size=200).map(lambda t: t.encode("utf-8", "surrogatepass")),
        st.sampled_from(
            [
                b"\x00\xff\xfe" * 30_000,
                b"[" * 100_000,
                b'{"results": {"tests": [' + b'{"name": "a", "status": "failed"},' * 5_000,
                b'{"reward": ' + b"9" * 5000 + b', "a_found": 1e999, "a_total": -0.0}',
                b'{"reward": NaN, "x": Infinity, "metrics": {"y": 1e308, "y_total": 1e-308}}',
                "= 1 failed in 0.1s =\n\x1b[31mFAILED t.py::x - \u2028boom\x1b[0m\n".encode(),
            ]
        ),
    )


records_st = st.fixed_dictionaries(
    {},
    optional={
        "outcome": st.sampled_from(
            ["failed", "timeout", "loop_killed", "length_exceeded", "harness_error", "passed"]
        )
        | json_values,
        "reward": json_values,
        "verdict": json_values,
        "error": json_values,
        "attempts": json_values,
        "last_feedback": json_values,
        "retries": json_values,
        "loop": json_values,
        "max_tokens": json_values,
        "timeout_s": json_values,
    },
)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    fields=records_st,
    ctrf=file_bytes(),
    reward_json=file_bytes(),
    stdout=file_bytes(),
)
def test_mining_never_raises_and_always_gives_one_line(
    tmp_path_factory: pytest.TempPathFactory,
    fields: dict[str, Any],
    ctrf: bytes | None,
    reward_json: bytes | None,
    stdout: bytes | None,
) -> None:
    vdir = tmp_path_factory.mktemp("verifier")
    for name, data in (
        ("ctrf.json", ctrf),
        ("reward.json", reward_json),
        ("test-stdout.txt", stdout),
    ):
        if data is not None:
            (vdir / name).write_bytes(data)
    rec = {**fields, "verifier_dir": str(vdir), "suite": "s", "task_id": "t"}
    line = failure_reason(rec)
    assert isinstance(line, str) and line.strip()
    assert len(line.splitlines()) == 1
    assert "reward None" not in line
    line.encode("utf-8")
    lines = summary_lines([{**rec, "outcome": "failed"}], run_dir=str(vdir), wall_s=0.0)
    assert any(line.startswith("✗ s::t: ") for line in lines)


@given(st.one_of(json_values, st.builds(object)))
def test_a_record_of_the_wrong_type_still_gives_a_line(value: Any) -> None:
    line = failure_reason(value)
    assert line.strip() and len(line.splitlines()) == 1 and "reward None" not in line
