"""Repair rounds: modes, feedback levels, budgets — through real runs and the real server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_agentbench.runner.repair import feedback_text
from pytest_agentbench.verifiers.base import Verdict

SUITE = """
[suite]
name = "fix"
system = "Reply with JSON."
repairs = {repairs}
repair_mode = "{mode}"
feedback = "{feedback}"
verifier = {{ kind = "json_schema", schema = {{ type = "object", required = ["a", "b"] }} }}

[[task]]
id = "obj"
input = "Give an object with keys a and b."
target = {{ a = 1, b = 2 }}
scripted = ['{{"a": 1}}', '{{"a": 1, "b": 3}}', '{{"a": 1, "b": 2}}']
"""


def run(pytester: pytest.Pytester, *args: str, **fmt: object) -> tuple[pytest.RunResult, Path]:
    values = {"repairs": 2, "mode": "conversation", "feedback": "names", **fmt}
    pytester.makefile(".toml", bench_fix=SUITE.format(**values))
    result = pytester.runpytest("--agentbench", "-p", "no:cacheprovider", *args)
    task = (pytester.path / "agentbench-results" / "latest").resolve() / "tasks" / "fix"
    return result, task / "obj[scripted]"


def bodies(task: Path) -> list[dict]:
    trajectory = json.loads((task / "trajectory.json").read_text())
    return [entry["request"]["body"] for entry in trajectory["requests"]]


def test_conversation_mode_appends_answer_and_feedback_turns(pytester: pytest.Pytester) -> None:
    result, task = run(pytester)
    result.assert_outcomes(passed=1)
    sent = bodies(task)
    assert len(sent) == 3
    third = sent[2]["messages"]
    assert [m["role"] for m in third] == [
        "system",
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
    ]
    assert third[2]["content"] == '{"a": 1}'
    assert "Feedback:" in third[3]["content"]
    assert "2 attempts left" in third[3]["content"]
    assert "1 attempt left" in third[5]["content"]
    assert "tool" not in json.dumps(sent).lower()
    record = json.loads((task / "result.json").read_text())
    assert record["first_attempt_reward"] == 0
    assert record["final_reward"] == 1
    assert record["repaired"] is True
    assert record["attempts_used"] == 3
    assert record["repair"] == {"repairs": 2, "mode": "conversation", "feedback": "names"}
    assert [a["feedback_sent"] is not None for a in record["attempts"]] == [True, True, False]


def test_stateless_mode_sends_a_fresh_request_with_the_previous_answer(
    pytester: pytest.Pytester,
) -> None:
    result, task = run(pytester, mode="stateless")
    result.assert_outcomes(passed=1)
    third = bodies(task)[2]["messages"]
    assert [m["role"] for m in third] == ["system", "user"]
    content = third[1]["content"]
    assert content.startswith("Give an object with keys a and b.")
    assert 'Your previous answer was:\n{"a": 1, "b": 3}' in content
    assert '{"a": 1}\n' not in content  # only the previous answer, not older ones


def test_budget_exhausted_keeps_every_attempt(pytester: pytest.Pytester) -> None:
    result, task = run(pytester, repairs=1)
    result.assert_outcomes(failed=1)
    record = json.loads((task / "result.json").read_text())
    assert record["outcome"] == "failed"
    assert [a["answer"] for a in record["attempts"]] == ['{"a": 1}', '{"a": 1, "b": 3}']


def test_cli_overrides_the_suite_repair_settings(pytester: pytest.Pytester) -> None:
    result, task = run(pytester, "--agentbench-repairs", "0", "--agentbench-feedback", "none")
    result.assert_outcomes(failed=1)
    record = json.loads((task / "result.json").read_text())
    assert record["attempts_used"] == 1
    assert record["repair"] == {"repairs": 0, "mode": "conversation", "feedback": "none"}
    summary = json.loads((task.parents[2] / "summary.json").read_text())
    assert summary["settings"]["repairs"] == 0
    assert summary["scores"][0]["repair"] == [record["repair"]]


def test_two_option_choice_tasks_get_no_repairs(pytester: pytest.Pytester) -> None:
    pytester.makefile(
        ".toml",
        bench_yn="""
[suite]
repairs = 3
verifier = { kind = "choice" }
[[task]]
id = "yn"
input = "Is the sky green?"
choices = ["Yes", "No"]
target = "B"
scripted = ["A", "B"]
""",
    )
    result = pytester.runpytest("--agentbench", "-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    record = json.loads(next(pytester.path.rglob("result.json")).read_text())
    assert record["attempts_used"] == 1


VERDICT = Verdict(
    0.5,
    metrics={"fields_found": 1, "fields_total": 2},
    details={"expected": {"b": 2}},
    feedback="1 of 2 expected fields are wrong: b.",
)


@pytest.mark.parametrize(
    ("level", "present", "absent"),
    [
        ("none", [], ["1 of 2", "Feedback", "expected"]),
        ("counts", ["1 of 2 checks passed."], ["Feedback", "expected"]),
        ("names", ["1 of 2 checks passed.", "Feedback: 1 of 2 expected fields"], ['"b": 2']),
        ("raw", ["Feedback:", 'Details: {"expected": {"b": 2}}'], []),
    ],
)
def test_feedback_levels_reveal_only_what_they_name(
    level: str, present: list[str], absent: list[str]
) -> None:
    text = feedback_text(VERDICT, level)
    assert text.startswith("Your previous answer did not pass the check.")
    for fragment in present:
        assert fragment in text
    for fragment in absent:
        assert fragment not in text


def test_raw_feedback_is_capped() -> None:
    big = Verdict(0.0, details={"blob": "x" * 10_000}, feedback="no")
    assert len(feedback_text(big, "raw")) < 4200
