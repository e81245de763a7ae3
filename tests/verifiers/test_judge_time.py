"""A judge's time is the judge's: real pytest runs (pytester) where the scripted provider
plays a slow judge (``delay_s`` before its reply, ``chunk_delay_s`` between its chunks).
The task's clock stops while the judge grades; the judge's own limit (command line,
the judge table's ``timeout_s``, the ini) bounds it; a judge that does not finish is a
judge error kept out of the score, never the task's timeout."""

from __future__ import annotations

import json
from typing import Any

import pytest

VERDICT = '{"rationale": "Names Paris, the capital.", "verdict": "pass"}'

SUITE = """
[suite]
name = "slow"
timeout_s = 1
[suite.verifier]
kind = "judge"
rubric = "The answer names the capital of France."
JUDGE_TABLE

[[task]]
id = "waits"
input = "Capital of France?"
scripted = ["Paris"]
[task.verifier]
scripted_judge = [{ reply = { text = 'VERDICT', delay_s = 2 } }]

[[task]]
id = "drips"
input = "Capital of France?"
scripted = ["Paris"]
[task.verifier]
scripted_judge = [{ reply = { text = 'VERDICT', chunk_delay_s = 0.3 } }]
"""


def _records(pytester: pytest.Pytester) -> dict[str, dict[str, Any]]:
    run = (pytester.path / "agentbench-results" / "latest").resolve()
    summary: dict[str, Any] = json.loads((run / "summary.json").read_text())
    return {t["task_id"]: t for t in summary["tasks"]}


def _run(pytester: pytest.Pytester, *args: str, table: str = "") -> pytest.RunResult:
    suite = SUITE.replace("JUDGE_TABLE", table).replace("VERDICT", VERDICT)
    pytester.makefile(".toml", bench_slow=suite)
    return pytester.runpytest("--agentbench", "-p", "no:cacheprovider", *args)


def test_a_slow_judge_is_not_charged_to_the_answer(pytester: pytest.Pytester) -> None:
    # the task may take 1 s; its judge takes 2 s (before its reply, or dripping it):
    # the answer came at once, so both pass
    result = _run(pytester)
    result.assert_outcomes(passed=2)
    records = _records(pytester)
    assert {r["outcome"] for r in records.values()} == {"passed"}
    assert all(r["judge"]["elapsed_s"] > 1 for r in records.values())


def test_a_judge_past_its_own_limit_is_a_judge_error_never_the_tasks_timeout(
    pytester: pytest.Pytester,
) -> None:
    result = _run(pytester, "--agentbench-judge-timeout", "0.8")
    result.assert_outcomes(errors=2)
    for record in _records(pytester).values():
        assert record["outcome"] == "harness_error"
        assert record["failure"]["kind"] == "judge_error"
        assert "did not finish within its own time limit of 0.8 s" in record["error"]
        assert "timeout after" not in record["error"]
    result.stdout.fnmatch_lines(
        [
            "2 tasks: 2 harness error(s)",
            "judge errors: 2 task(s) without a usable verdict",
            "! slow::*: harness error: judge scripted did not finish within its own time limit*",
        ]
    )
    result.stdout.no_fnmatch_line("score *")  # nothing scored: the judge gave no verdict


def test_the_judge_table_and_the_ini_set_its_limit_and_the_command_line_wins(
    pytester: pytest.Pytester,
) -> None:
    table = "judge = { timeout_s = 0.8 }"
    result = _run(pytester, table=table)
    result.assert_outcomes(errors=2)  # the suite's limit
    assert all("of 0.8 s" in r["error"] for r in _records(pytester).values())
    pytester.makeini("[pytest]\nagentbench_judge_timeout = 0.5\n")
    result = _run(pytester, table=table)
    result.assert_outcomes(errors=2)  # the suite's limit beats the ini's
    assert all("of 0.8 s" in r["error"] for r in _records(pytester).values())
    result = _run(pytester)
    result.assert_outcomes(errors=2)  # without the table, the ini's
    assert all("of 0.5 s" in r["error"] for r in _records(pytester).values())
    result = _run(pytester, "--agentbench-judge-timeout", "30", table=table)
    result.assert_outcomes(passed=2)  # the command line's beats every suite's


def test_a_bad_judge_timeout_is_a_usage_error(pytester: pytest.Pytester) -> None:
    result = _run(pytester, "--agentbench-judge-timeout", "soon")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--agentbench-judge-timeout*soon*"])


def test_a_repair_round_after_a_slow_judge_still_has_the_tasks_time(
    pytester: pytest.Pytester,
) -> None:
    fail = '{"rationale": "Not the capital.", "verdict": "fail"}'
    pytester.makefile(
        ".toml",
        bench_repair=f"""
[suite]
name = "repair"
timeout_s = 1
repairs = 1
[suite.verifier]
kind = "judge"
rubric = "The answer names the capital of France."
scripted_judge = [
  {{ includes = "Paris", reply = {{ text = '{VERDICT}', delay_s = 1.5 }} }},
  {{ reply = {{ text = '{fail}', delay_s = 1.5 }} }},
]

[[task]]
id = "second-try"
input = "Capital of France?"
scripted = ["Lyon", "Paris"]
""",
    )
    result = pytester.runpytest("--agentbench", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    record = _records(pytester)["second-try"]
    assert record["outcome"] == "passed" and record["repaired"] is True
