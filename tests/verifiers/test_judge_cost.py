"""The judge's cost (docs/cost.md, docs/judges.md): a judged task's cost holds the model
under test's part and the judge's part apart, each at its own model's price, and every
report shows both parts and the whole, equal to the task records to the cent."""

from __future__ import annotations

import html
import json
import math
from pathlib import Path
from typing import Any

import pytest

from pytest_agentbench import schemas
from pytest_agentbench.core.cost import Price
from pytest_agentbench.models.prices import judge_price

PASS = '{"rationale": "fine", "verdict": "pass"}'
FAIL = '{"rationale": "not it", "verdict": "fail"}'

# The model under test and the judge both declare their usage (OpenAI-style keys).
SUITE = f"""
[suite]
name = "jc"
[suite.verifier]
kind = "judge"
rubric = "The answer names the capital of France."
scripted_judge = [
  {{ includes = "Paris", reply = {{ text = '{PASS}', usage = {{ prompt_tokens = 2100, \
completion_tokens = 130 }} }} }},
  {{ reply = {{ text = '{FAIL}', usage = {{ prompt_tokens = 1900, completion_tokens = 90 }} }} }},
]

[[task]]
id = "right"
input = "Capital of France?"
scripted = [{{ text = "Paris", usage = {{ prompt_tokens = 700, completion_tokens = 40 }} }}]

[[task]]
id = "wrong"
input = "Capital of France?"
scripted = [{{ text = "Lyon", usage = {{ prompt_tokens = 650, completion_tokens = 35 }} }}]
"""

MODEL_PRICE = {"input": 2.0, "output": 8.0}
JUDGE_PRICE = {"input": 0.5, "output": 1.5}
PRICES = """
[models.dear]
input = 2.0
output = 8.0

[models.scripted]
input = 0.5
output = 1.5
source = "the judge's contract"
"""


def by_hand(usage: dict[str, Any], price: dict[str, float]) -> float:
    """A usage's cost computed here, independently of core/cost.py (no cache tokens)."""
    return (usage["input"] * price["input"] + usage["output"] * price["output"]) / 1e6


def test_every_report_shows_the_judge_cost_apart_and_agrees_with_the_records(
    pytester: pytest.Pytester,
) -> None:
    pytester.makefile(".toml", bench_jc=SUITE)
    pytester.makefile(".toml", prices=PRICES)
    args = ["--agentbench", "-p", "no:cacheprovider", "--agentbench-prices", "prices.toml"]
    args += ["--agentbench-model", "dear=scripted/openai"]
    args += ["--agentbench-markdown", "summary.md"]
    result = pytester.runpytest(*args)
    result.assert_outcomes(passed=1, failed=1)
    run = (pytester.path / "agentbench-results" / "latest").resolve()
    summary = json.loads((run / "summary.json").read_text())
    ctrf = json.loads((run / "ctrf.json").read_text())
    schemas.validate("summary", summary)
    schemas.validate("ctrf", ctrf)
    records = {r["task_id"]: r for r in summary["tasks"]}
    # the declared judge usage reached the records, so the figures below are not zeros
    assert records["right"]["judge"]["usage"]["input"] == 2100
    assert records["wrong"]["judge"]["usage"]["output"] == 90
    for record in records.values():
        schemas.validate("task_record", record)
        cost = record["cost"]
        model = by_hand(record["usage"], MODEL_PRICE)
        judge = by_hand(record["judge"]["usage"], JUDGE_PRICE)
        assert cost["model_usd"] == pytest.approx(model)
        assert cost["judge_usd"] == pytest.approx(judge)
        assert cost["usd"] == pytest.approx(model + judge)
        assert cost["judge_price"] == "the judge's contract"
    model_usd = math.fsum(r["cost"]["model_usd"] for r in records.values())
    judge_usd = math.fsum(r["cost"]["judge_usd"] for r in records.values())
    usd = math.fsum(r["cost"]["usd"] for r in records.values())
    # (700*2 + 40*8 + 650*2 + 35*8) and (2100*0.5 + 130*1.5 + 1900*0.5 + 90*1.5)
    assert (model_usd, judge_usd) == (pytest.approx(3300 / 1e6), pytest.approx(2330 / 1e6))
    for totals in (
        summary["totals"]["cost"],
        summary["scores"][0]["cost"],
        ctrf["results"]["environment"]["extra"]["pytest-agentbench.run"]["cost"],
    ):
        assert totals["usd"] == pytest.approx(usd)
        assert totals["model_usd"] == pytest.approx(model_usd)
        assert totals["judge_usd"] == pytest.approx(judge_usd)
        assert totals["judged"] == 2 and totals["unknown"] == 0
    tests = [t["extra"]["pytest-agentbench.rollout"]["cost"] for t in ctrf["results"]["tests"]]
    assert math.fsum(t["judge_usd"] for t in tests) == pytest.approx(judge_usd)
    shown = f"${usd:.4f} (model under test ${model_usd:.4f}, judge ${judge_usd:.4f})"
    assert f"cost {shown}" in result.stdout.str(), result.stdout.str()
    assert f"Cost: {shown}" in (pytester.path / "summary.md").read_text()
    assert shown in html.unescape((run / "report.html").read_text())


def test_the_judge_price_follows_the_rules_of_the_model_under_test(tmp_path: Path) -> None:
    prices = tmp_path / "prices.toml"
    prices.write_text(PRICES)
    none: dict[tuple[str, str | None], Price | None] = {}
    # the scripted judge has a price only when the price file names it
    assert judge_price("scripted", None, prices_file=None, lineup=none) is None
    found = judge_price("scripted", None, prices_file=prices, lineup=none)
    assert found is not None and (found.input, found.output) == (0.5, 1.5)
    # the shipped table at the provider's own host only; behind a proxy: unknown, not 0
    shipped = judge_price("openai/gpt-4.1-mini", None, prices_file=None, lineup=none)
    assert shipped is not None and shipped.source.startswith("built-in table")
    proxied = judge_price(
        "openai/gpt-4.1-mini", "http://127.0.0.1:9/v1", prices_file=None, lineup=none
    )
    assert proxied is None
    # a judge that is one of the run's models (same URL) gets that model's price
    listed = Price(input=9.0, output=9.0, source="models list (price_in, price_out)")
    lineup = {("openai/gpt-4.1-mini", "http://127.0.0.1:9/v1"): listed}
    assert (
        judge_price("openai/gpt-4.1-mini", "http://127.0.0.1:9/v1", prices_file=None, lineup=lineup)
        is listed
    )


def test_the_dry_run_counts_the_judge_calls(pytester: pytest.Pytester) -> None:
    pytester.makefile(".toml", bench_jc=SUITE)
    result = pytester.runpytest("--agentbench", "-p", "no:cacheprovider", "--agentbench-dry-run")
    assert result.ret == 0
    # two tasks, no repairs: a model call each, then one to two judge calls each
    result.stdout.fnmatch_lines(
        ["*jc × scripted: 2 task(s) · requests 4 to 6 (repairs up to 0, judge calls 2 to 4)*"]
    )


def test_a_judge_without_a_price_leaves_the_whole_unknown_never_zero(
    pytester: pytest.Pytester,
) -> None:
    pytester.makefile(".toml", bench_jc=SUITE)
    pytester.makefile(".toml", prices="[models.dear]\ninput = 2.0\noutput = 8.0\n")
    args = ["--agentbench", "-p", "no:cacheprovider", "--agentbench-prices", "prices.toml"]
    result = pytester.runpytest(*args, "--agentbench-model", "dear=scripted/openai")
    result.assert_outcomes(passed=1, failed=1)
    summary = json.loads(
        ((pytester.path / "agentbench-results" / "latest").resolve() / "summary.json").read_text()
    )
    for record in summary["tasks"]:
        cost = record["cost"]
        assert cost["model_usd"] == pytest.approx(by_hand(record["usage"], MODEL_PRICE))
        assert (cost["judge_usd"], cost["usd"], cost["judge_price"]) == (None, None, None)
    totals = summary["totals"]["cost"]
    assert (totals["usd"], totals["judge_usd"], totals["unknown"]) == (None, None, 2)
    assert totals["model_usd"] == pytest.approx(3300 / 1e6)
    assert "(model under test $0.0033, judge not known)" in result.stdout.str()
