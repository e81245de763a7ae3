"""Retries and the circuit breaker in real runs against the scripted provider."""

from __future__ import annotations

import json

import pytest


def run_dir(pytester: pytest.Pytester):
    return (pytester.path / "agentbench-results" / "latest").resolve()


def test_overloaded_then_ok_is_retried_and_recorded(pytester: pytest.Pytester) -> None:
    pytester.makefile(
        ".toml",
        bench_retry="""
[suite]
verifier = { kind = "exact" }
[[task]]
id = "busy"
input = "x"
target = "ok"
scripted = [{ text = "ok", error = { status = 529, times = 2, retry_after = 0.01 } }]
""",
    )
    result = pytester.runpytest("--agentbench", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    task = run_dir(pytester) / "tasks" / "retry" / "busy[scripted]"
    trajectory = json.loads((task / "trajectory.json").read_text())
    retries = trajectory["requests"][0]["retries"]
    assert [r["status"] for r in retries] == [529, 529]
    assert all(r["waited_s"] >= 0.01 for r in retries)


def test_retries_are_bounded_and_the_failure_is_a_harness_error(pytester: pytest.Pytester) -> None:
    pytester.makefile(
        ".toml",
        bench_retry="""
[suite]
verifier = { kind = "exact" }
[[task]]
id = "down"
input = "x"
target = "ok"
scripted = [{ text = "ok", error = { status = 503, times = 50, retry_after = 0 } }]
""",
    )
    result = pytester.runpytest(
        "--agentbench", "--agentbench-max-retries", "2", "-p", "no:cacheprovider"
    )
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["! retry::down: harness error: *503*"])
    record = json.loads(next(run_dir(pytester).rglob("result.json")).read_text())
    assert record["outcome"] == "harness_error"
    assert "3 attempts" in record["error"]


def test_circuit_breaker_stops_sending_after_identical_permanent_errors(
    pytester: pytest.Pytester,
) -> None:
    tasks = "".join(
        f'\n[[task]]\nid = "t{i}"\ninput = "x"\ntarget = "ok"\n'
        'scripted = [{ error = { status = 401, message = "invalid api key" } }]\n'
        for i in range(8)
    )
    pytester.makefile(".toml", bench_auth='[suite]\nverifier = { kind = "exact" }\n' + tasks)
    result = pytester.runpytest(
        "--agentbench",
        "--agentbench-concurrency",
        "1",
        "--agentbench-breaker",
        "3",
        "-p",
        "no:cacheprovider",
    )
    result.assert_outcomes(errors=8)
    result.stdout.fnmatch_lines(
        ["circuit breaker: 5 task(s) not sent — not sent: 3 identical errors*401*invalid api key*"]
    )
    trajectories = list(run_dir(pytester).rglob("trajectory.json"))
    entries = [json.loads(t.read_text())["requests"][0] for t in trajectories]
    assert sorted(entry["sent"] for entry in entries) == [False] * 5 + [True] * 3
    assert all(entry["status"] == 401 for entry in entries if entry["sent"])
