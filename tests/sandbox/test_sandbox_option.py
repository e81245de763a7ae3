"""--agentbench-sandbox reaches every code task, and the header says what containment the
run gets."""

from __future__ import annotations

import json
import shutil

import pytest

TESTS = "from solution import add\\ndef test_add():\\n    assert add(2, 3) == 5\\n"
SUITE = f"""
[suite]
verifier = {{ kind = "python_tests", tests = "{TESTS}" }}
[[task]]
id = "add"
input = "Write add(a, b)."
scripted = ["def add(a, b):\\n    return a + b\\n"]
"""


def containment_of(pytester: pytest.Pytester) -> dict:
    result = next(pytester.path.rglob("verifier/reward.json"))
    return json.loads(result.read_text())["details"]["containment"]


def test_basic_sandbox_is_applied_and_shown_in_the_header(pytester: pytest.Pytester) -> None:
    pytester.makefile(".toml", bench_code=SUITE)
    result = pytester.runpytest(
        "--agentbench", "--agentbench-sandbox", "basic", "-p", "no:cacheprovider"
    )
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["agentbench: sandbox basic — *"])
    assert containment_of(pytester)["level"] == "basic"


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed here")
def test_strict_sandbox_runs_code_with_strong_isolation(pytester: pytest.Pytester) -> None:
    pytester.makefile(".toml", bench_code=SUITE)
    result = pytester.runpytest(
        "--agentbench", "--agentbench-sandbox", "strict", "-p", "no:cacheprovider"
    )
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["agentbench: sandbox strong — bubblewrap*"])
    found = containment_of(pytester)
    assert found["level"] == "strong" and found["network"] is False
