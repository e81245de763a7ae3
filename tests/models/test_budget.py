"""The spending cap (--agentbench-max-cost, docs/cost.md): requests past the cap are not
sent, their tasks are reported as not run (reason budget), never as failures, the
reports stay valid, the exit status says so, and --agentbench-resume finishes the run."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from pytest_agentbench import schemas
from pytest_agentbench.core.cost import Price
from pytest_agentbench.models.base import ModelRequest
from pytest_agentbench.models.budget import BudgetLedger, estimated_prompt_tokens, worst_case
from pytest_agentbench.scripted.server import ScriptedServer
from pytest_agentbench.session.finish import BUDGET_EXIT

# Each reply declares 10 output tokens; at $1000 per million output tokens and nothing
# for input, a request costs $0.01 and its worst case (max_tokens = 10) is $0.01 too.
TASKS = 5
USAGE = "prompt_tokens = 7, completion_tokens = 10"
SUITE = '[suite]\nname = "b"\nverifier = { kind = "number" }\nmax_tokens = 10\n' + "".join(
    f'\n[[task]]\nid = "t{i}"\ninput = "x"\ntarget = {i}\n'
    f'scripted = [{{ text = "{i}", usage = {{ {USAGE} }} }}]\n'
    for i in range(TASKS)
)
PRICES = "[models.scripted]\ninput = 0\noutput = 1000\n"


def _summary(pytester: pytest.Pytester) -> dict[str, object]:
    run = (pytester.path / "agentbench-results" / "latest").resolve()
    data: dict[str, object] = json.loads((run / "summary.json").read_text())
    return data


@pytest.mark.parametrize(
    "concurrency",
    ["1", "4", pytest.param("xdist", marks=pytest.mark.slow)],
)
def test_a_budget_stop_leaves_valid_partial_reports_and_resume_finishes(
    pytester: pytest.Pytester, concurrency: str
) -> None:
    """Serial, four rollouts in flight, and two xdist workers sharing one ledger."""
    pytester.makefile(".toml", bench_b=SUITE)
    pytester.makefile(".toml", prices=PRICES)
    args = ["--agentbench", "-p", "no:cacheprovider", "--agentbench-prices", "prices.toml"]
    if concurrency == "xdist":
        args += ["-n", "2", "--agentbench-concurrency", "2"]
    else:
        args += ["--agentbench-concurrency", concurrency]
    result = pytester.runpytest(*args, "--agentbench-max-cost", "0.035")
    assert result.ret == BUDGET_EXIT
    # three requests fit under $0.035 ($0.01 each, reserved before sending); the rest
    # are not run: skipped in pytest's words, never failed
    result.assert_outcomes(passed=3, skipped=2)
    out = result.stdout.str()
    assert "budget: $0.0300 spent of the $0.0350 cap; 2 task(s) not run" in out
    assert "partial: 3 of 5 tasks (2 not run: budget)" in out
    run = (pytester.path / "agentbench-results" / "latest").resolve()
    summary = json.loads((run / "summary.json").read_text())
    ctrf = json.loads((run / "ctrf.json").read_text())
    schemas.validate("summary", summary)
    schemas.validate("ctrf", ctrf)
    for record in summary["tasks"]:
        schemas.validate("task_record", record)
    assert summary["partial"] is True
    assert summary["coverage"]["over_budget"] == 2
    assert summary["exit_status"] == BUDGET_EXIT
    budget = summary["budget"]
    assert budget["stopped"] is True and budget["not_run"] == 2
    assert budget["spent_usd"] == pytest.approx(0.03) and budget["spent_usd"] <= 0.035
    assert summary["totals"]["cost"]["usd"] == pytest.approx(0.03)
    assert len(list((run / "tasks" / "b").glob("*/result.json"))) == 3
    partial_ctrf = pytester.path / "partial-ctrf.json"  # the resume rewrites the run's
    partial_ctrf.write_bytes((run / "ctrf.json").read_bytes())

    resumed = pytester.runpytest(*args, "--agentbench-max-cost", "1", "--agentbench-resume")
    assert resumed.ret == 0
    resumed.assert_outcomes(passed=5)
    assert "3 task(s) resumed" in resumed.stdout.str()
    assert "budget: $0.0200 spent of the $1.00 cap" in resumed.stdout.str()
    whole = _summary(pytester)
    assert whole["partial"] is False
    assert len(list((run / "tasks" / "b").glob("*/result.json"))) == TASKS
    from ctrf_support import assert_ctrf_accepted

    assert_ctrf_accepted(partial_ctrf, run / "ctrf.json")


def test_max_cost_needs_a_price_for_every_model(pytester: pytest.Pytester) -> None:
    pytester.makefile(".toml", bench_b=SUITE)
    result = pytester.runpytest("--agentbench", "--agentbench-max-cost", "1")
    text = result.stdout.str() + result.stderr.str()
    assert "--agentbench-max-cost needs the price of every model, and scripted has none" in text
    assert not (pytester.path / "agentbench-results").exists()


def test_the_ledger_never_grants_past_the_cap_across_threads(tmp_path: Path) -> None:
    """Eight threads (each with its own file handle, as xdist workers have) reserve and
    settle concurrently: the grants never add up past the cap, and once refused the
    ledger stays stopped."""
    cap = 1.0
    granted: list[float] = []
    lock = threading.Lock()

    def spend() -> None:
        ledger = BudgetLedger(tmp_path / "budget", cap)
        for _ in range(40):
            if not ledger.reserve(0.03):
                return
            with lock:
                granted.append(0.03)
            ledger.settle(0.03, 0.02)

    threads = [threading.Thread(target=spend) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    spent, reserved, stopped = BudgetLedger(tmp_path / "budget", cap).state()
    assert stopped and reserved == pytest.approx(0.0)
    assert spent == pytest.approx(0.02 * len(granted))
    assert spent <= cap
    assert not BudgetLedger(tmp_path / "budget", cap).reserve(0.0001)


def test_the_worst_case_of_a_request() -> None:
    request = ModelRequest(messages=({"role": "user", "content": "x" * 300},), max_tokens=100)
    tokens = estimated_prompt_tokens(request)
    assert tokens >= 100  # 300 characters: at least a token per three
    price = Price(input=1.0, output=10.0, cache_read=0.1, cache_write=1.25)
    # the prompt at the dearest prompt price (a cache write), the output at max_tokens
    assert worst_case(request, price) == pytest.approx((tokens * 1.25 + 100 * 10.0) / 1e6)


def test_a_reply_in_the_response_cache_is_replayed_even_when_the_cap_is_reached(
    pytester: pytest.Pytester,
) -> None:
    """A request the cache answers sends nothing: it needs no reservation and costs
    nothing, so it runs even after the cap stopped the live requests."""
    server = ScriptedServer()
    url = server.start()
    pytester.makefile(".toml", bench_b=SUITE)
    pytester.makefile(".toml", prices=PRICES)
    args = ["--agentbench", "-p", "no:cacheprovider", "--agentbench-prices", "prices.toml"]
    args += ["--agentbench-concurrency", "1", "--agentbench-cache", "cache"]
    args += ["--agentbench-base-url", url]
    try:
        pytester.runpytest(*args, "-k", "t3 or t4").assert_outcomes(passed=2)  # recorded
        # $0.015: t0 is sent ($0.01); t1 could pass the cap, so the ledger stops; t2 is
        # not sent either; t3 and t4 are answered from the cache
        result = pytester.runpytest(*args, "--agentbench-max-cost", "0.015")
    finally:
        server.stop()
    result.assert_outcomes(passed=3, skipped=2)
    summary = _summary(pytester)
    assert {r["task_id"] for r in summary["tasks"]} == {"t0", "t3", "t4"}  # type: ignore[index, union-attr]
    budget = summary["budget"]
    assert budget == {
        "max_usd": 0.015,
        "spent_usd": pytest.approx(0.01),
        "stopped": True,
        "not_run": 2,
    }


# A judged suite: the model under test ("dear") declares 10 output tokens at $1000 per
# million ($0.01 a request, its worst case too: max_tokens 10); the judge declares 10
# output tokens at its own price of $2000 per million ($0.02), its worst case its
# max_tokens of 16 at that price ($0.032). Prompts cost nothing.
JUDGE_PASS = '{"rationale": "fine", "verdict": "pass"}'
JUDGED = (
    '[suite]\nname = "jb"\nmax_tokens = 10\n[suite.verifier]\nkind = "judge"\n'
    'rubric = "The answer is ok."\njudge = { max_tokens = 16 }\n'
    f"scripted_judge = [{{ reply = {{ text = '{JUDGE_PASS}', "
    f"usage = {{ {USAGE} }} }} }}]\n"
    + "".join(
        f'\n[[task]]\nid = "t{i}"\ninput = "x"\n'
        f'scripted = [{{ text = "ok", usage = {{ {USAGE} }} }}]\n'
        for i in range(3)
    )
)
JUDGED_PRICES = (
    "[models.dear]\ninput = 0\noutput = 1000\n\n[models.scripted]\ninput = 0\noutput = 2000\n"
)


def test_the_cap_counts_the_judge_at_its_own_price(pytester: pytest.Pytester) -> None:
    """Cap $0.05: t0 is sent and judged ($0.01 + $0.02); t1's model call fits ($0.04
    spent), its judge call's worst case ($0.032) does not, so t1 was not fully run: not
    run (reason budget), never failed nor a judge error; t2 is not sent. Without the judge
    in the ledger all three would pass; at the model's price two would."""
    pytester.makefile(".toml", bench_jb=JUDGED)
    pytester.makefile(".toml", prices=JUDGED_PRICES)
    args = ["--agentbench", "-p", "no:cacheprovider", "--agentbench-prices", "prices.toml"]
    args += ["--agentbench-model", "dear=scripted/openai", "--agentbench-concurrency", "1"]
    result = pytester.runpytest(*args, "--agentbench-max-cost", "0.05")
    assert result.ret == BUDGET_EXIT
    result.assert_outcomes(passed=1, skipped=2)
    summary = _summary(pytester)
    schemas.validate("summary", summary)
    records = summary["tasks"]
    assert isinstance(records, list) and [r["task_id"] for r in records] == ["t0"]
    assert records[0]["cost"]["judge_usd"] == pytest.approx(0.02)
    budget = summary["budget"]
    assert isinstance(budget, dict) and budget["not_run"] == 2 and budget["stopped"] is True
    # what the ledger charged: t0's model and judge calls, and t1's model call
    assert budget["spent_usd"] == pytest.approx(0.04)
    assert "partial: 1 of 3 tasks (2 not run: budget)" in result.stdout.str()
    resumed = pytester.runpytest(*args, "--agentbench-max-cost", "1", "--agentbench-resume")
    resumed.assert_outcomes(passed=3)


def test_a_judge_without_a_price_is_refused_under_a_cap(pytester: pytest.Pytester) -> None:
    pytester.makefile(".toml", bench_jb=JUDGED)
    pytester.makefile(".toml", prices="[models.dear]\ninput = 0\noutput = 1000\n")
    result = pytester.runpytest(
        "--agentbench",
        "--agentbench-prices",
        "prices.toml",
        "--agentbench-model",
        "dear=scripted/openai",
        "--agentbench-max-cost",
        "1",
    )
    assert result.ret != 0
    result.stdout.fnmatch_lines(
        [
            "*bench_jb.toml: task 't0': --agentbench-max-cost needs the price of every model, "
            "and its judge scripted has none*"
        ]
    )
    assert not list((pytester.path / "agentbench-results").glob("*/tasks/*/*/result.json"))
