"""Failure reasons: each outcome line, the ordering, caps and pointer of the terminal
section, one run through the plugin, and a fuzz showing that mining never raises (the tiers
and artifact probes: test_evidence.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from evidence_support import SAMPLE_TESTS, ctrf_report, record, write_ctrf
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from records_support import make_record

from pytest_agentbench.core.task_record import TaskRecord
from pytest_agentbench.report.evidence import (
    details_pointer,
    failure_reason,
    order_failures,
)
from pytest_agentbench.report.terminal import summary_lines

# --- outcome lines ---------------------------------------------------------------------------


def again(rec: TaskRecord, **changes: Any) -> TaskRecord:
    """``rec`` with ``changes`` (JSON values, as result.json holds them)."""
    return make_record(**{**rec.to_json(), **changes})


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
    assert line == "loop killed: period 13 ×81 in answer at 12 s"
    assert (
        failure_reason(record(outcome="loop_killed", reward=None, verdict=None, loop={}))
        == "loop killed"
    )


def test_timeout_line() -> None:
    timeout = record(outcome="timeout", reward=None, verdict=None, error="timeout after 60s")
    assert failure_reason(timeout) == "timeout after 60s"
    assert (
        failure_reason(again(timeout, timeout_s=90.0, reward=0)) == "reward 0 — timeout after 90s"
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
    assert failure_reason(again(failed, failure=retried)) == (
        "harness error: provider 529 overloaded after 4 retries: Overloaded"
    )
    once = _failure(error, status=529, detail="Overloaded")
    assert failure_reason(again(failed, failure=once)) == (
        "harness error: provider 529 overloaded: Overloaded"
    )
    # an error met inside a stream has a status but no HTTP error response: its own text
    in_stream = "scripted: overloaded_error in the stream from http://127.0.0.1:1/x: busy"
    streamed = _failure(in_stream, status=529, retries=2)
    assert failure_reason(again(failed, error=in_stream, failure=streamed)) == (
        f"harness error: {in_stream} (after 2 retries)"
    )
    # a status in the text alone means nothing: only the structured status counts
    assert failure_reason(failed) == f"harness error: {error}"
    plain_text = "scripted: HTTP 500 from http://127.0.0.1:1/x: outage"
    plain = again(failed, error=plain_text, failure=_failure(plain_text, status=500))
    assert failure_reason(plain) == f"harness error: {plain_text}"
    refused_text = "scripted: cannot connect: " + "refused " * 30
    refused = again(failed, error=refused_text, failure=_failure(refused_text, retries=1))
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
    order = [r.task_id for r in order_failures(records)]
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


numbers = st.none() | st.integers(-(10**6), 10**6) | st.floats(allow_nan=True)
texts = st.none() | st.text(max_size=300)
#: Records as the type admits them (any value a field's JSON type allows; metrics and the
#: extras any JSON): mining never trusts their contents.
records_st = st.fixed_dictionaries(
    {},
    optional={
        "outcome": st.sampled_from(
            ["failed", "timeout", "loop_killed", "length_exceeded", "harness_error", "passed"]
        ),
        "reward": numbers,
        "verdict": st.none()
        | st.fixed_dictionaries(
            {"reward": numbers, "metrics": st.dictionaries(st.text(max_size=20), json_values)},
            optional={"error": texts},
        ),
        "error": texts,
        "attempts": st.integers(0, 10**6),
        "last_feedback": texts,
        "loop": st.none()
        | st.fixed_dictionaries(
            {},
            optional={
                "period": st.integers(-5, 10**9),
                "repetitions": numbers,
                "channel": st.text(max_size=30),
                "killed_s": numbers,
                "detected_s": numbers,
            },
        ),
        "max_tokens": st.none() | st.integers(-5, 10**9),
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
@pytest.mark.slow
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
    rec = record(vdir, **fields)
    line = failure_reason(rec)
    assert isinstance(line, str) and line.strip()
    assert len(line.splitlines()) == 1
    assert "reward None" not in line
    line.encode("utf-8")
    lines = summary_lines([again(rec, outcome="failed")], run_dir=str(vdir), wall_s=0.0)
    assert any(line.startswith("✗ s::t: ") for line in lines)


@given(st.one_of(json_values, st.builds(object)))
def test_a_record_of_the_wrong_type_still_gives_a_line(value: Any) -> None:
    line = failure_reason(value)
    assert line.strip() and len(line.splitlines()) == 1 and "reward None" not in line


def test_equal_failures_are_ordered_by_node_id_whatever_order_they_finished_in() -> None:
    """Ties (same severity, same reward) are broken by node id, so the terminal's lines do
    not change with the order concurrent rollouts or xdist workers finished in."""
    tied = [
        record(task_id=name, reward=0.0, nodeid=f"bench_x.toml::{name}") for name in ("b", "c", "a")
    ]
    assert [r.task_id for r in order_failures(tied)] == ["a", "b", "c"]
    assert [r.task_id for r in order_failures(tied[::-1])] == ["a", "b", "c"]
