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
