"""Prices and cost (docs/cost.md): the price a model gets (models list, the user's price
file, the shipped table), what a usage costs at it, and the same cost in every report,
each equal to the sum of the per-task records to the cent."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import pytest

from pytest_agentbench import schemas
from pytest_agentbench.core.cost import Price, usage_cost
from pytest_agentbench.core.usage import Usage
from pytest_agentbench.errors import AgentbenchError
from pytest_agentbench.models.base import ModelSpec
from pytest_agentbench.models.prices import load_price_file, resolve_price, shipped_table

# Declared usage, Anthropic-style: input_tokens is the uncached rest, cache reads and
# writes add to it. "wrong" answers wrong twice (a repair round), "down" never answers.
SUITE = """
[suite]
name = "c"
verifier = { kind = "number" }
repairs = 1

[[task]]
id = "cached"
input = "Long prompt."
target = 1
scripted = [{ text = "1", usage = { input_tokens = 1200, cache_read_input_tokens = 44000, \
cache_creation_input_tokens = 300, output_tokens = 57 } }]

[[task]]
id = "plain"
input = "x"
target = 2
scripted = [{ text = "2", usage = { input_tokens = 3000, output_tokens = 800 } }]

[[task]]
id = "wrong"
input = "x"
target = 3
scripted = [{ text = "4", usage = { input_tokens = 5000, output_tokens = 1000 } }, \
{ text = "5", usage = { input_tokens = 5100, output_tokens = 900 } }]

[[task]]
id = "down"
input = "x"
target = 4
scripted = [{ error = { status = 400, message = "bad request" } }]
"""

PRICES = """
[models.cheap]
input = 1.0
output = 5.0
cache_read = 0.1
cache_write = 1.25

[models.dear]
input = 3.0
output = 15.0
cache_read = 0.3
cache_write = 3.75
source = "our contract"
"""


def by_hand(usage: dict[str, Any], price: dict[str, float]) -> float:
    """A record's cost computed here, independently of core/cost.py."""
    return (
        usage["input"] * price["input"]
        + (usage["cache_read"] or 0) * price["cache_read"]
        + (usage["cache_write"] or 0) * price["cache_write"]
        + usage["output"] * price["output"]
    ) / 1e6


def test_every_report_shows_the_cost_of_the_task_records_to_the_cent(
    pytester: pytest.Pytester,
) -> None:
    pytester.makefile(".toml", bench_c=SUITE)
    pytester.makefile(".toml", prices=PRICES)
    args = ["--agentbench", "-p", "no:cacheprovider", "--agentbench-prices", "prices.toml"]
    args += ["--agentbench-model", "cheap=scripted/anthropic"]
    args += ["--agentbench-model", "dear=scripted/anthropic"]
    args += ["--agentbench-markdown", "summary.md"]
    result = pytester.runpytest(*args)
    result.assert_outcomes(passed=4, failed=2, errors=2)
    run = (pytester.path / "agentbench-results" / "latest").resolve()
    summary = json.loads((run / "summary.json").read_text())
    ctrf = json.loads((run / "ctrf.json").read_text())
    schemas.validate("summary", summary)
    schemas.validate("ctrf", ctrf)
    prices = {
        "cheap": {"input": 1.0, "output": 5.0, "cache_read": 0.1, "cache_write": 1.25},
        "dear": {"input": 3.0, "output": 15.0, "cache_read": 0.3, "cache_write": 3.75},
    }
    records = summary["tasks"]
    for record in records:
        schemas.validate("task_record", record)
        cost = record["cost"]
        if record["task_id"] == "down":  # never reached the model: cost nothing
            assert cost["usd"] == 0
            continue
        assert cost["usd"] == pytest.approx(by_hand(record["usage"], prices[record["model"]]))
        assert cost["model_usd"] == cost["usd"]
        assert cost["judge_usd"] is None
    assert {r["cost"]["price"] for r in records if r["model"] == "dear"} == {"our contract"}
    cheap = [r for r in records if r["model"] == "cheap"]
    cheap_usd = math.fsum(r["cost"]["usd"] for r in cheap)
    # 1200*1 + 44000*0.1 + 300*1.25 + 57*5 ; 3000*1 + 800*5 ; (10100*1 + 1900*5)
    assert cheap_usd == pytest.approx((6260 + 7000 + 19600) / 1e6)
    total = math.fsum(r["cost"]["usd"] for r in records)
    assert summary["totals"]["cost"]["usd"] == pytest.approx(total)
    assert summary["totals"]["cost"]["unknown"] == 0
    assert summary["totals"]["cost"]["solved"] == 4
    assert summary["totals"]["cost"]["per_solved_usd"] == pytest.approx(total / 4)
    rows = {row["model"]: row["cost"] for row in summary["scores"]}
    assert rows["cheap"]["usd"] == pytest.approx(cheap_usd)
    assert rows["cheap"]["usd"] + rows["dear"]["usd"] == pytest.approx(total)
    run_extra = ctrf["results"]["environment"]["extra"]["pytest-agentbench.run"]
    assert run_extra["cost"]["usd"] == pytest.approx(total)
    tests = ctrf["results"]["tests"]
    tests_usd = [t["extra"]["pytest-agentbench.rollout"]["cost"]["usd"] for t in tests]
    assert math.fsum(tests_usd) == pytest.approx(total)
    shown = f"${total:.4f}"
    terminal = result.stdout.str()
    assert f"cost {shown}" in terminal, terminal
    assert f"cheap: ${cheap_usd:.4f}" in terminal
    markdown = (pytester.path / "summary.md").read_text()
    assert f"Cost: {shown}" in markdown
    assert f"| ${cheap_usd:.4f} |" in markdown
    page = (run / "report.html").read_text()
    assert 'id="cost-score"' in page
    # the same score for less: cheap is the cheapest for its score, dear is not
    assert re.search(r"cheapest for its score: cheap<", page), page[-2000:]


def test_an_unknown_price_stays_unknown_never_zero(pytester: pytest.Pytester) -> None:
    """A hosted-looking model behind a local base URL has no table price; its cost is
    not known, said so in the terminal, and summary.json holds null, not 0."""
    pytester.makefile(".toml", bench_c=SUITE)
    result = pytester.runpytest(
        "--agentbench",
        "-p",
        "no:cacheprovider",
        "--agentbench-model",
        "scripted/anthropic",
        "--agentbench-prices",
        "none.toml",
    )
    assert "cannot read none.toml" in result.stderr.str() + result.stdout.str()
    pytester.makefile(".toml", prices='[models."other/model"]\ninput = 1\noutput = 1\n')
    result = pytester.runpytest(
        "--agentbench",
        "-p",
        "no:cacheprovider",
        "--agentbench-model",
        "scripted/anthropic",
        "--agentbench-prices",
        "prices.toml",
    )
    summary = json.loads(
        (pytester.path / "agentbench-results" / "latest" / "summary.json").read_text()
    )
    costs = {r["task_id"]: r["cost"] for r in summary["tasks"]}
    assert costs["plain"]["usd"] is None
    assert costs["plain"]["price"] is None
    assert costs["down"]["usd"] == 0  # never reached the model
    assert summary["totals"]["cost"]["usd"] == 0
    assert summary["totals"]["cost"]["unknown"] == 3
    assert summary["totals"]["cost"]["per_solved_usd"] is None
    assert "not known for 3 of 4 task(s)" in result.stdout.str()


def test_the_scripted_default_without_prices_reports_no_cost(pytester: pytest.Pytester) -> None:
    pytester.makefile(".toml", bench_c=SUITE)
    result = pytester.runpytest("--agentbench", "-p", "no:cacheprovider")
    summary = json.loads(
        (pytester.path / "agentbench-results" / "latest" / "summary.json").read_text()
    )
    assert summary["totals"]["cost"] is None
    assert all("cost" not in r for r in summary["tasks"])
    assert "cost " not in result.stdout.str()


def test_what_a_usage_costs() -> None:
    price = Price(input=3.0, output=15.0, cache_read=0.3, cache_write=3.75, source="t")
    usage = Usage(input=10, output=5, cache_read=44000, cache_write=300)
    assert usage_cost(usage, price) == pytest.approx((30 + 75 + 13200 + 1125) / 1e6)
    # OpenAI reports no cache writes: an unreported cache count is none
    assert usage_cost(Usage(input=100, output=10), price) == pytest.approx(450 / 1e6)
    # tokens of a kind the price does not cover: unknown, never 0
    no_cache = Price(input=1.0, output=2.0)
    assert usage_cost(usage, no_cache) is None
    assert usage_cost(Usage(input=None, output=5), price) is None
    assert usage_cost(usage, None) is None
    # a price of 0 the user gave (a local server): known, 0
    assert usage_cost(Usage(), Price(0.0, 0.0, 0.0, 0.0)) == 0


def test_which_price_a_model_gets(tmp_path: Path) -> None:
    date, table = shipped_table()
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", date)
    assert all(p.source and p.input is not None and p.output is not None for p in table.values())
    dated = resolve_price(ModelSpec.parse("anthropic/claude-sonnet-4-5-20250929"))
    assert dated is not None and dated.input == 3.0 and date in dated.source
    responses = resolve_price(ModelSpec.parse("openai-responses/gpt-4.1-mini"))
    assert responses is not None and responses.output == 1.6
    # the same name behind a proxy or a local server: no table price
    spec = ModelSpec.parse("openai/gpt-4.1-mini")
    assert resolve_price(spec, base_url="http://127.0.0.1:8000/v1") is None
    assert resolve_price(spec, base_url="https://api.openai.com/v1") is not None
    assert resolve_price(ModelSpec.parse("openai-compat/gpt-4.1-mini")) is None
    assert resolve_price(ModelSpec.parse("openai/no-such-model")) is None
    # the user's file wins over the table, by name, spec or bare model id
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"models": {"gpt-4.1-mini": {"input": 9, "output": 9}}}))
    user = load_price_file(path)
    mine = resolve_price(spec, user=user)
    assert mine is not None and mine.input == 9 and str(path) in mine.source
    # the models list wins over both; the kinds it leaves out come from below
    listed = resolve_price(spec, user=user, listed={"price_out": 2.5})
    assert listed is not None and (listed.input, listed.output) == (9, 2.5)
    local = resolve_price(ModelSpec.parse("openai-compat/qwen"), listed={"price_in": 0})
    assert local is None  # no output price: still unknown
    free = resolve_price(
        ModelSpec.parse("openai-compat/qwen"), listed={"price_in": 0, "price_out": 0}
    )
    assert free is not None and free.free
    # a batch share in the models list: the batch price is that share of every kind
    shared = resolve_price(spec, user=user, listed={"price_out": 2.5, "price_batch": 0.4})
    assert shared is not None and shared.batch is not None
    assert (shared.batch.input, shared.batch.output) == pytest.approx((3.6, 1.0))
    assert shared.batched().output == pytest.approx(1.0)
    table = resolve_price(spec, base_url="https://api.openai.com/v1", listed={"price_batch": 0.3})
    assert table is not None and table.batch is not None
    assert table.batch.input == pytest.approx(0.4 * 0.3)  # the table's price, its share


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[models.a]\ninput = 1\n", "models.a: output is required"),
        ('[models.a]\ninput = 1\noutput = "cheap"\n', "models.a.output: expected a price"),
        ("[models.a]\ninput = -1\noutput = 1\n", "models.a.input: expected a price from 0"),
        ("[models.a]\ninput = 1\noutput = 1\ncache = 1\n", "unknown key 'cache'"),
        ("[prices]\n", 'expected a "models" table'),
        ("models = [", "not valid"),
    ],
)
def test_a_broken_price_file_is_one_clear_error(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "prices.toml"
    path.write_text(text)
    with pytest.raises(AgentbenchError, match=re.escape(message)) as caught:
        load_price_file(path)
    assert str(path) in str(caught.value)


@pytest.mark.parametrize(
    ("word", "message"),
    [
        ("price_in=abc", "price_in: expected a price"),
        ("price_batch=2", "price_batch: expected the share of the model's prices a batch costs"),
    ],
)
def test_a_models_list_price_must_be_a_price(
    pytester: pytest.Pytester, word: str, message: str
) -> None:
    pytester.makefile(".toml", bench_c=SUITE)
    pytester.makeini(f"[pytest]\nagentbench_models =\n    a = scripted {word}\n")
    result = pytester.runpytest("--agentbench", "-p", "no:cacheprovider")
    assert f"agentbench_models line 1: {message}" in (result.stdout.str() + result.stderr.str())
