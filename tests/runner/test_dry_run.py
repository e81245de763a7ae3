"""--agentbench-dry-run (docs/cost.md): nothing is sent or written; the forecast names
the requests, the prompt tokens and a cost range that contains the real run's cost."""

from __future__ import annotations

import json
import math
import re

import httpx
import pytest

from pytest_agentbench.scripted.server import ScriptedServer

INPUTS = {
    "right": "What is one plus nothing? Answer with the number only, please." * 3,
    "repaired": "What is two? Think about it, then answer with the number only." * 5,
    "never": "What is three? Answer with the number only." * 2,
}
TARGETS = {"right": 1, "repaired": 2, "never": 3}
#: what each attempt answers: the repaired task is wrong once, "never" is always wrong
ANSWERS = {"right": ["1"], "repaired": ["9", "2"], "never": ["8", "7", "6"]}


def _suite() -> str:
    parts = ['[suite]\nname = "d"\nverifier = { kind = "number" }\nrepairs = 2\nmax_tokens = 60\n']
    for task, text in INPUTS.items():
        prompt = math.ceil(len(text) / 4)  # the provider counts about 4 characters a token
        replies = ", ".join(
            f'{{ text = "{answer}", usage = {{ prompt_tokens = {prompt + 80 * n}, '
            f"completion_tokens = {40 + n} }} }}"
            for n, answer in enumerate(ANSWERS[task])
        )
        parts.append(
            f'\n[[task]]\nid = "{task}"\ninput = "{text}"\ntarget = {TARGETS[task]}\n'
            f"scripted = [{replies}]\n"
        )
    return "".join(parts)


PRICES = "[models.scripted]\ninput = 3\noutput = 15\ncache_read = 0.3\n"


def test_the_forecast_sends_nothing_and_its_range_holds_the_real_cost(
    pytester: pytest.Pytester,
) -> None:
    server = ScriptedServer()
    url = server.start()
    try:
        pytester.makefile(".toml", bench_d=_suite())
        pytester.makefile(".toml", prices=PRICES)
        args = ["--agentbench", "-p", "no:cacheprovider", "--agentbench-prices", "prices.toml"]
        args += ["--agentbench-base-url", url]
        dry = pytester.runpytest(*args, "--agentbench-dry-run")
        assert dry.ret == 0
        out = dry.stdout.str()
        stats = httpx.get(f"{url.rstrip('/')}/_agentbench/stats").json()
        assert stats["requests"] == 0
        assert not (pytester.path / "agentbench-results").exists()
        assert "d × scripted: 3 task(s) · requests 3 to 9 (repairs up to 2, judge calls 0)" in out
        tokens = sum(math.ceil(len(text) / 4) for text in INPUTS.values())
        assert f"prompt ~{tokens:,} tokens (characters / 4)" in out
        found = re.search(
            r"whole run: 3 task\(s\) · requests 3 to 9 · cost \$([\d.]+) to \$([\d.]+)", out
        )
        assert found, out
        low, high = float(found.group(1)), float(found.group(2))

        real = pytester.runpytest(*args)
        real.assert_outcomes(passed=2, failed=1)
        run = (pytester.path / "agentbench-results" / "latest").resolve()
        summary = json.loads((run / "summary.json").read_text())
        cost = summary["totals"]["cost"]["usd"]
        assert low <= cost <= high, (low, cost, high)
        assert httpx.get(f"{url.rstrip('/')}/_agentbench/stats").json()["requests"] == 6
    finally:
        server.stop()


def test_a_model_without_a_price_has_no_cost_range(pytester: pytest.Pytester) -> None:
    """With -n too: the forecast reads the tasks in one process (no workers start)."""
    pytester.makefile(".toml", bench_d=_suite())
    result = pytester.runpytest(
        "--agentbench", "-p", "no:cacheprovider", "--agentbench-dry-run", "-n", "2"
    )
    out = result.stdout.str()
    assert "cost not known (no price: docs/cost.md)" in out
    assert "whole run: 3 task(s) · requests 3 to 9 · cost not known" in out
    assert not (pytester.path / "agentbench-results").exists()


QUESTION = "What is the capital of France? Answer with one word."
RUBRIC = "The answer names the capital of France."
#: what each attempt of each task answers, and the judge's verdict on each answer
JUDGED_ANSWERS = {"right": ["Paris"], "repaired": ["Lyon", "Paris"], "never": ["Nice", "Lyon"]}


def _judged_suite() -> str:
    """A judged suite whose scripted judge declares the prompt a provider would count
    (the judge's real request: its instructions, the rubric and the answer, and the
    reply's schema, at about 4 characters a token)."""
    from pytest_agentbench.verifiers.judge_prompt import Rubric, messages, reply_schema

    rubric = Rubric(RUBRIC, ())
    rules = []
    for answer in ("Paris", "Lyon", "Nice"):
        system, user = messages(rubric, QUESTION, answer, None)
        chars = len(system) + len(user) + len(json.dumps(reply_schema(rubric)))
        verdict = "pass" if answer == "Paris" else "fail"
        text = json.dumps({"rationale": "checked", "verdict": verdict})
        prompt = math.ceil(chars / 4)
        # every judge reply at the judge's max_tokens (40); "Nice" is retried once
        reply = (
            f"{{ text = '{text}', usage = {{ prompt_tokens = {prompt}, completion_tokens = 40 }} }}"
        )
        if answer == "Nice":
            retried = reply.replace(f"prompt_tokens = {prompt}", f"prompt_tokens = {prompt + 100}")
            bad = reply.replace(f"'{text}'", '"not JSON"')
            reply = f"[{bad}, {retried}]"
        rules.append(f'  {{ answer = "{answer}", reply = {reply} }},\n')
    parts = [
        '[suite]\nname = "dj"\nrepairs = 1\nmax_tokens = 60\n[suite.verifier]\n'
        f'kind = "judge"\nrubric = "{RUBRIC}"\njudge = {{ max_tokens = 40 }}\n'
        f"scripted_judge = [\n{''.join(rules)}]\n"
    ]
    prompt = math.ceil(len(QUESTION) / 4)
    for task, answers in JUDGED_ANSWERS.items():
        replies = ", ".join(  # every answer at the task's max_tokens (60)
            f'{{ text = "{answer}", usage = {{ prompt_tokens = {prompt + 80 * n}, '
            f"completion_tokens = 60 }} }}"
            for n, answer in enumerate(answers)
        )
        parts.append(f'\n[[task]]\nid = "{task}"\ninput = "{QUESTION}"\nscripted = [{replies}]\n')
    return "".join(parts)


JUDGED_PRICES = (
    "[models.dear]\ninput = 3\noutput = 15\n\n[models.scripted]\ninput = 1\noutput = 4\n"
)


def test_the_forecast_prices_the_judge_apart_and_holds_a_judged_run(
    pytester: pytest.Pytester,
) -> None:
    """The model under test at its price, the scripted judge at its own: each part of the
    real run's cost lies in its part of the forecast, and the whole in the whole."""
    pytester.makefile(".toml", bench_dj=_judged_suite())
    pytester.makefile(".toml", prices=JUDGED_PRICES)
    args = ["--agentbench", "-p", "no:cacheprovider", "--agentbench-prices", "prices.toml"]
    args += ["--agentbench-model", "dear=scripted/openai"]
    dry = pytester.runpytest(*args, "--agentbench-dry-run")
    assert dry.ret == 0
    out = dry.stdout.str()
    assert "3 task(s) · requests 6 to 18 (repairs up to 1, judge calls 3 to 12)" in out
    money = r"\$([\d.]+) to \$([\d.]+)"
    found = re.search(
        rf"whole run: 3 task\(s\) · requests 6 to 18 · cost {money} \(model under test "
        rf"{money}, judge {money}\)",
        out,
    )
    assert found, out
    low, high, model_low, model_high, judge_low, judge_high = map(float, found.groups())
    assert judge_low > 0

    real = pytester.runpytest(*args)
    real.assert_outcomes(passed=2, failed=1)
    run = (pytester.path / "agentbench-results" / "latest").resolve()
    cost = json.loads((run / "summary.json").read_text())["totals"]["cost"]
    assert cost["judged"] == 3 and cost["unknown"] == 0
    assert model_low <= cost["model_usd"] <= model_high, (model_low, cost, model_high)
    assert judge_low <= cost["judge_usd"] <= judge_high, (judge_low, cost, judge_high)
    assert low <= cost["usd"] <= high, (low, cost, high)
