"""Which limit cut an answer: a reply that ends with finish reason ``length`` below the
output-token limit was cut by the model's context window (prompt and answer filled it,
as llama-cpp-python does at n_ctx), and the failure line says so instead of blaming the
output-token limit."""

from __future__ import annotations

import json

import pytest

SUITE = """
[suite]
name = "cut"
verifier = { kind = "exact" }
max_tokens = 64

[[task]]
id = "context"
input = "Tell me everything."
target = "everything"
[[task.scripted]]
text = "It all began"
finish_reason = "length"
usage = { prompt_tokens = 198, completion_tokens = 58, total_tokens = 256 }

[[task]]
id = "output"
input = "Tell me more."
target = "more"
[[task.scripted]]
text = "More and"
finish_reason = "length"
usage = { prompt_tokens = 30, completion_tokens = 64, total_tokens = 94 }
"""


def test_the_failure_line_names_the_limit_that_cut_the_answer(pytester: pytest.Pytester) -> None:
    pytester.makefile(".toml", bench_cut=SUITE)
    result = pytester.runpytest("--agentbench", "-p", "no:cacheprovider")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines_random(
        [
            "✗ cut::context: reward 0 — context window full at 256 tokens (prompt and answer), "
            "before the output-token limit (64)*",
            "✗ cut::output: reward 0 — output-token limit (64) reached*",
        ]
    )
    run = (pytester.path / "agentbench-results" / "latest").resolve()
    for task, limit in (("context", "context_window"), ("output", "output_tokens")):
        found = json.loads(
            (run / "tasks" / "cut" / f"{task}[scripted]" / "result.json").read_text()
        )
        assert found["outcome"] == "length_exceeded"
        assert found["attempts"][0]["length_limit"] == limit
        assert found["record"]["length_limit"] == limit
