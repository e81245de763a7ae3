"""The same benchmark through each wire protocol of the scripted provider, end to end:
real sockets, real SSE, each protocol's own usage arithmetic in result.json."""

from __future__ import annotations

import json

import pytest

PROTOCOLS = ["scripted", "scripted/openai-responses", "scripted/anthropic"]

SUITE = """
[suite]
name = "proto"
verifier = {{ kind = "number" }}
repairs = 1

[[task]]
id = "think-then-answer"
input = "What is 6 x 7?"
target = 42
scripted = [{{ thinking = "six sevens are forty-two", text = "42" }}]

[[task]]
id = "repair"
input = "What is 2 + 2?"
target = 4
scripted = ["5", "4"]

[[task]]
id = "cached"
input = "Long prompt."
target = 1
scripted = [{{ text = "1", usage = {usage} }}]
"""

# The same prompt (44 010 input tokens, 44 000 of them from the cache, 5 out) as each
# provider reports it.
NATIVE_USAGE = {
    "scripted": "{ prompt_tokens = 44010, completion_tokens = 5, total_tokens = 44015, "
    "prompt_tokens_details = { cached_tokens = 44000 } }",
    "scripted/openai-responses": "{ input_tokens = 44010, output_tokens = 5, total_tokens = "
    "44015, input_tokens_details = { cached_tokens = 44000 }, output_tokens_details = { "
    "reasoning_tokens = 0 } }",
    "scripted/anthropic": "{ input_tokens = 10, cache_read_input_tokens = 44000, "
    "cache_creation_input_tokens = 0, output_tokens = 5 }",
}


@pytest.mark.parametrize("model", PROTOCOLS)
@pytest.mark.parametrize("stream", [True, False], ids=["stream", "no-stream"])
def test_each_protocol_runs_the_benchmark_end_to_end(
    pytester: pytest.Pytester, model: str, stream: bool
) -> None:
    pytester.makefile(".toml", bench_proto=SUITE.format(usage=NATIVE_USAGE[model]))
    args = ["--agentbench", "--agentbench-model", model, "-p", "no:cacheprovider"]
    if not stream:
        args.append("--agentbench-no-stream")
    result = pytester.runpytest(*args)
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines([f"agentbench: model {model} (offline)*"])
    run = (pytester.path / "agentbench-results" / "latest").resolve()
    label = model.replace("/", "_")
    tasks = run / "tasks" / "proto"

    thinking = json.loads((tasks / f"think-then-answer[{label}]" / "result.json").read_text())
    assert thinking["attempts"][0]["thinking"] == "six sevens are forty-two"
    assert thinking["attempts"][0]["answer"] == "42"

    repaired = json.loads((tasks / f"repair[{label}]" / "result.json").read_text())
    assert repaired["repaired"] is True

    cached = json.loads((tasks / f"cached[{label}]" / "result.json").read_text())
    usage = cached["usage"]
    assert (usage["input"], usage["cache_read"], usage["output"], usage["total"]) == (
        10,
        44000,
        5,
        44015,
    )
    assert cached["attempts"][0]["usage_native"] is not None
