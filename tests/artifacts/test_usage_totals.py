"""The run's token totals: defined once (artifacts/usage_totals.py) and the same in the
terminal, the Markdown summary, summary.json and the CTRF report; each equal to the sum
over the per-task records, with unknown fields and Anthropic-style cache arithmetic."""

from __future__ import annotations

import json
from typing import Any

import pytest

# Anthropic counts: input_tokens is the uncached remainder; cache reads and writes add.
SUITE = """
[suite]
name = "u"
verifier = { kind = "number" }

[[task]]
id = "cached"
input = "Long prompt."
target = 1
scripted = [{ text = "1", usage = { input_tokens = 10, cache_read_input_tokens = 44000, \
cache_creation_input_tokens = 300, output_tokens = 5 } }]

[[task]]
id = "no-output-count"
input = "x"
target = 2
scripted = [{ text = "2", usage = { input_tokens = 7 } }]

[[task]]
id = "down"
input = "x"
target = 3
scripted = [{ error = { status = 400, message = "bad request" } }]
"""

FIELDS = ("input", "output", "reasoning", "cache_read", "cache_write", "total")


def by_hand(records: list[dict[str, Any]]) -> dict[str, int | None]:
    """The totals computed here, independently: known values summed per field; a record
    without a total counts its known parts."""
    sums: dict[str, int | None] = dict.fromkeys(FIELDS)
    for record in records:
        usage = record["usage"]
        for name in FIELDS:
            value = usage[name]
            if name == "total" and value is None:
                parts = [usage[p] for p in ("input", "cache_read", "cache_write", "output")]
                value = sum(p for p in parts if p is not None) if any(parts) else None
            if value is not None:
                sums[name] = (sums[name] or 0) + value
    return sums


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "no-stream"])
def test_every_report_shows_the_sum_of_the_task_records(
    pytester: pytest.Pytester, stream: bool
) -> None:
    pytester.makefile(".toml", bench_u=SUITE)
    args = ["--agentbench", "--agentbench-model", "scripted/anthropic", "-p", "no:cacheprovider"]
    args += ["--agentbench-markdown", "summary.md"]
    if not stream:
        args.append("--agentbench-no-stream")
    result = pytester.runpytest(*args)
    result.assert_outcomes(passed=2, errors=1)
    run = (pytester.path / "agentbench-results" / "latest").resolve()
    summary = json.loads((run / "summary.json").read_text())
    ctrf = json.loads((run / "ctrf.json").read_text())
    records = summary["tasks"]
    expected = by_hand(records)
    assert expected == {
        "input": 17,
        "output": 5,
        "reasoning": None,
        "cache_read": 44000,
        "cache_write": 300,
        "total": 44315 + 7,
    }
    totals = summary["totals"]["usage"]
    assert {name: totals[name] for name in FIELDS} == expected
    assert totals["unknown"]["output"] == 2  # "no-output-count" and "down"
    run_extra = ctrf["results"]["environment"]["extra"]["pytest-agentbench.run"]
    assert run_extra["usage"] == totals
    per_test = [t["extra"]["pytest-agentbench.rollout"]["usage"] for t in ctrf["results"]["tests"]]
    assert by_hand([{"usage": u} for u in per_test]) == expected
    whole_in = 17 + 44000 + 300
    assert totals["total"] >= whole_in + totals["output"]
    line = (
        f"{whole_in:,} in (44,000 cache read, 300 cache write) / 5 out / 44,322 total "
        "(not reported by 2 of 3 task(s))"
    )
    result.stdout.fnmatch_lines([f"tokens {line} · wall *"])
    assert f"Tokens: {line}" in (pytester.path / "summary.md").read_text()


def test_unknown_stays_unknown_and_a_task_that_never_reached_the_model_adds_nothing() -> None:
    from pytest_agentbench.artifacts.usage_totals import run_usage

    unreported = {name: None for name in FIELDS}
    from records_support import make_record

    records = [
        make_record(attempts=0, usage=unreported),  # harness error before any call
        make_record(attempts=1, usage={**unreported, "output": 4}),  # counted from the stream
        make_record(attempts=1, usage={**unreported, "input": 3, "output": 2, "total": 5}),
    ]
    totals = run_usage(records)
    assert totals["input"] == 3
    assert totals["output"] == 6
    assert totals["reasoning"] is None and totals["cache_read"] is None
    assert totals["total"] == 9  # 5 reported + 4 counted from the known part
    assert totals["tasks"] == 2
    assert totals["unknown"]["input"] == 1 and totals["unknown"]["total"] == 1
    assert run_usage([]) == {**dict.fromkeys(FIELDS), "tasks": 0, "unknown": {}}
