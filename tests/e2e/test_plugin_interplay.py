"""pytest plugins users combine us with: pytest-rerunfailures, pytest-timeout, other
plugins' and fixtures' exceptions, and pytest's own durations. Every planned task is in
every report once, whatever ended it; real pytest runs against the real scripted server."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from ctrf_support import assert_ctrf_accepted

FLAKY = """
[suite]
name = "r"
verifier = { kind = "number" }
repairs = 0

[[task]]
id = "wrong"
input = "2+2"
target = 4
scripted = ["5"]

[[task]]
id = "ok"
input = "1+1"
target = 2
scripted = ["2"]
"""

SLOW = """
[suite]
name = "t"
verifier = { kind = "number" }

[[task]]
id = "slow"
input = "2+2"
target = 4
scripted = [{ text = "4", delay_s = 60 }]

[[task]]
id = "ok"
input = "1+1"
target = 2
scripted = ["2"]
"""


def load(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def reports(pytester: pytest.Pytester) -> tuple[dict[str, Any], dict[str, Any]]:
    run = (pytester.path / "agentbench-results" / "latest").resolve()
    return load(run / "summary.json"), load(run / "ctrf.json")


@pytest.mark.slow
def test_a_rerun_replaces_the_earlier_run_and_lists_it(pytester: pytest.Pytester) -> None:
    pytester.makefile(".toml", bench_r=FLAKY)
    result = pytester.runpytest("--agentbench", "-p", "no:cacheprovider", "--reruns", "2")
    assert result.parseoutcomes() == {"passed": 1, "failed": 1, "rerun": 2}
    result.stdout.fnmatch_lines(["2 tasks: 1 passed, 1 failed", "score 0.500 ± 0.354 (n=2, *"])
    summary, ctrf = reports(pytester)
    assert summary["totals"]["tasks"] == 2
    assert summary["totals"]["score"] == 0.5
    assert ctrf["results"]["summary"]["tests"] == 2
    assert sorted(t["name"].rsplit("::")[-1] for t in ctrf["results"]["tests"]) == ["ok", "wrong"]
    wrong = next(t for t in summary["tasks"] if t["task_id"] == "wrong")
    assert [run["outcome"] for run in wrong["reruns"]] == ["failed", "failed"]
    assert all(run["usage"]["output"] is not None for run in wrong["reruns"])
    ok = next(t for t in summary["tasks"] if t["task_id"] == "ok")
    assert "reruns" not in ok
    tests = {t["name"].rsplit("::")[-1]: t for t in ctrf["results"]["tests"]}
    assert tests["wrong"]["retries"] == 2
    assert [a["status"] for a in tests["wrong"]["retryAttempts"]] == ["failed"] * 3
    assert tests["wrong"]["flaky"] is False
    assert "retries" not in tests["ok"]
    run = (pytester.path / "agentbench-results" / "latest").resolve()
    assert_ctrf_accepted(run / "ctrf.json")


@pytest.mark.slow
@pytest.mark.parametrize("method", ["signal", "thread"])
def test_a_task_ended_by_pytest_timeout_is_a_timeout_in_every_report(
    pytester: pytest.Pytester, method: str
) -> None:
    pytester.makefile(".toml", bench_t=SLOW)
    result = pytester.runpytest_subprocess(
        "--agentbench",
        "-p",
        "no:cacheprovider",
        "--timeout",
        "2",
        "--timeout-method",
        method,
        timeout=120,
    )
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "2 tasks: 1 passed, 1 timed out",
            "✗ t::slow: timeout after 2s (the item's pytest-timeout*",
        ]
    )
    assert "Traceback" not in result.stdout.str()
    summary, ctrf = reports(pytester)
    outcomes = {t["task_id"]: t["outcome"] for t in summary["tasks"]}
    assert outcomes == {"slow": "timeout", "ok": "passed"}
    tests = {t["name"].rsplit("::")[-1]: t for t in ctrf["results"]["tests"]}
    assert tests["slow"]["rawStatus"] == "timeout"
    assert "pytest-timeout" in tests["slow"]["message"]


@pytest.mark.slow
def test_a_timeout_marker_on_one_task_caps_only_that_task(pytester: pytest.Pytester) -> None:
    pytester.makefile(".toml", bench_t=SLOW)
    pytester.makeconftest(
        """
import pytest

def pytest_collection_modifyitems(items):
    for item in items:
        if item.name == "slow":
            item.add_marker(pytest.mark.timeout(1))
"""
    )
    result = pytester.runpytest_subprocess("--agentbench", "-p", "no:cacheprovider", timeout=120)
    result.assert_outcomes(passed=1, failed=1)
    summary, _ = reports(pytester)
    slow = next(t for t in summary["tasks"] if t["task_id"] == "slow")
    assert slow["outcome"] == "timeout"
    assert slow["error"].startswith("timeout after 1s")


def test_a_task_item_ended_by_anything_else_is_a_harness_error_with_the_cause(
    pytester: pytest.Pytester,
) -> None:
    pytester.makefile(".toml", bench_r=FLAKY)
    pytester.makeconftest(
        """
import pytest

def pytest_runtest_setup(item):
    if item.name == "ok":
        raise RuntimeError("the lab plugin could not reach its database " + "x" * 150 + " END")

@pytest.hookimpl(tryfirst=True)
def pytest_runtest_call(item):
    if item.name == "wrong":
        pytest.fail("Timeout (>3.0s) from pytest-timeout.")
"""
    )
    result = pytester.runpytest("--agentbench", "-p", "no:cacheprovider")
    result.assert_outcomes(failed=1, errors=1)
    result.stdout.fnmatch_lines(["2 tasks: 1 timed out, 1 harness error(s)"])
    summary, ctrf = reports(pytester)
    records = {t["task_id"]: t for t in summary["tasks"]}
    assert records["wrong"]["outcome"] == "timeout"
    assert "pytest-timeout ended the task" in records["wrong"]["error"]
    assert records["ok"]["outcome"] == "harness_error"
    assert records["ok"]["error"].endswith(" END")
    assert "RuntimeError while setting up" in records["ok"]["error"]
    statuses = {t["name"].rsplit("::")[-1]: t["status"] for t in ctrf["results"]["tests"]}
    assert statuses == {"wrong": "failed", "ok": "other"}


def test_task_durations_are_the_rollouts_own_wall_time(pytester: pytest.Pytester) -> None:
    """With rollouts in flight the second item finds its rollout already done: pytest's
    own call duration would be ~0 (or, for a queued item, its wait)."""
    pytester.makefile(
        ".toml",
        bench_d="""
[suite]
name = "d"
verifier = { kind = "number" }

[[task]]
id = "first"
input = "1"
target = 1
scripted = [{ text = "1", delay_s = 1.5 }]

[[task]]
id = "second"
input = "2"
target = 2
scripted = [{ text = "2", delay_s = 1.5 }]
""",
    )
    result = pytester.runpytest(
        "--agentbench",
        "-p",
        "no:cacheprovider",
        "--agentbench-concurrency",
        "2",
        "--junitxml=junit.xml",
        "-o",
        "junit_duration_report=call",
    )
    result.assert_outcomes(passed=2)
    summary, _ = reports(pytester)
    own = {t["task_id"]: t["duration_ms"] / 1000 for t in summary["tasks"]}
    cases = ET.parse(pytester.path / "junit.xml").getroot().iter("testcase")
    reported = {case.get("name"): float(case.get("time") or 0) for case in cases}
    assert own["second"] >= 1.0  # the scripted delay is part of the rollout
    for task_id, seconds in own.items():
        assert reported[task_id] == pytest.approx(seconds, abs=0.002)


# Longer than the reason line's 100 characters; models/http.py keeps 300 of a provider's
# error body, so the whole error stays under that.
LONG_CAUSE = (
    "the model endpoint refused the request because the field temperature is not supported "
    "for this model family, and it said so at length: "
    + " ".join(f"d{n}" for n in range(12))
    + " END-OF-CAUSE"
)


def test_a_harness_error_keeps_its_whole_cause_in_the_record_and_the_reports(
    pytester: pytest.Pytester,
) -> None:
    pytester.makefile(
        ".toml",
        bench_h=f"""
[suite]
name = "h"
verifier = {{ kind = "number" }}

[[task]]
id = "down"
input = "x"
target = 3
scripted = [{{ error = {{ status = 400, message = "{LONG_CAUSE}" }} }}]
""",
    )
    args = ("--agentbench", "-p", "no:cacheprovider", "--agentbench-markdown", "summary.md")
    result = pytester.runpytest(*args)
    result.assert_outcomes(errors=1)
    line = next(x for x in result.stdout.lines if x.startswith("! h::down: harness error:"))
    assert line.endswith("…") and len(line) < 160  # the terminal line stays readable
    summary, ctrf = reports(pytester)
    record = summary["tasks"][0]
    assert record["error"].endswith(LONG_CAUSE)
    test = ctrf["results"]["tests"][0]
    assert "cause: scripted: HTTP 400 from " in test["trace"]
    assert test["trace"].count(LONG_CAUSE) == 1
    result_json = load(Path(record["rollout_dir"]) / "result.json")
    assert LONG_CAUSE in result_json["record"]["trace"]
    assert LONG_CAUSE in (pytester.path / "summary.md").read_text(encoding="utf-8")


def test_a_rerun_in_a_resumed_run_runs_the_task_again(pytester: pytest.Pytester) -> None:
    pytester.makefile(".toml", bench_r=FLAKY)
    pytester.runpytest("--agentbench", "-p", "no:cacheprovider").assert_outcomes(passed=1, failed=1)
    result = pytester.runpytest(
        "--agentbench", "-p", "no:cacheprovider", "--agentbench-resume", "--reruns", "1"
    )
    assert result.parseoutcomes() == {"passed": 1, "failed": 1, "rerun": 1}
    summary, _ = reports(pytester)
    wrong = next(t for t in summary["tasks"] if t["task_id"] == "wrong")
    assert not wrong.get("resumed")  # the rerun ran it, not read it back
    assert len(wrong["reruns"]) == 1


def test_a_task_marked_xfail_is_xfailed_for_pytest_and_keeps_its_record(
    pytester: pytest.Pytester,
) -> None:
    pytester.makefile(
        ".toml", bench_r=FLAKY.replace('scripted = ["5"]', 'scripted = ["5"]\nmarks = ["xfail"]')
    )
    result = pytester.runpytest("--agentbench", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, xfailed=1)
    summary, ctrf = reports(pytester)
    assert {t["task_id"]: t["outcome"] for t in summary["tasks"]} == {
        "wrong": "failed",
        "ok": "passed",
    }
    assert ctrf["results"]["summary"]["tests"] == 2
