"""A suite's own regex cannot hang the run: a match past its time limit is a verifier
(harness) error naming the pattern, never a model failure and never a hang."""

from __future__ import annotations

import json

import pytest

#: Backtracks catastrophically on any text without "bz"; Python's re would run for hours.
CATASTROPHIC = "(.*){1,32000}[bc]z"
ANSWER = "The quick brown fox jumps over the lazy dog while seven wizards judge boxing!"


@pytest.mark.slow
@pytest.mark.parametrize("option", ["", ", timeout_s = 0.5"])
def test_a_catastrophic_regex_is_a_harness_error_not_a_hang(
    pytester: pytest.Pytester, option: str
) -> None:
    (pytester.path / "bench_slow.toml").write_text(
        f'[suite]\nverifier = {{ kind = "regex", pattern = "{CATASTROPHIC}"{option} }}\n'
        f'[[task]]\nid = "slow"\ninput = "x"\nscripted = ["{ANSWER}"]\n'
        '[[task]]\nid = "fine"\ninput = "x"\nscripted = ["abz"]\n'
    )
    # the hang guard only: the match stops after its limit (default 5 s)
    result = pytester.runpytest_subprocess("--agentbench", "-p", "no:cacheprovider", timeout=120)
    result.assert_outcomes(passed=1, errors=1)
    limit = "0.5s" if option else "5s"
    result.stdout.fnmatch_lines([f"! slow::slow: *regex verifier: match timed out after {limit}*"])
    results = list(pytester.path.rglob("slow*/result.json"))
    record = json.loads(results[0].read_text(encoding="utf-8"))
    assert record["outcome"] == "harness_error"
