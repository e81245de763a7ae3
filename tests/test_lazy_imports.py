"""A run against a real model's server never imports the scripted server: start-up pays
only for what the run uses. (Plain answers run through the agent loop with no tools since
the one generation path, so the loop itself is always imported.)"""

from __future__ import annotations

import pytest

from pytest_agentbench.scripted import ScriptedServer

CONFTEST = """
import sys

def pytest_sessionfinish(session):
    heavy = ("pytest_agentbench.scripted.server",)
    print("\\nloaded:", [name for name in heavy if name in sys.modules])
"""

SUITE = """
[suite]
name = "plain"
verifier = { kind = "exact" }

[[task]]
id = "one"
input = "Say a."
target = "a"
"""


def test_a_plain_run_against_a_server_imports_no_scripted_server(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makefile(".toml", bench_plain=SUITE)
    with ScriptedServer(default=["a"]) as server:
        result = pytester.runpytest_subprocess(
            "--agentbench",
            "--agentbench-model",
            "openai-compat/x",
            "--agentbench-base-url",
            server.url,
            "--agentbench-concurrency",
            "1",
            "-p",
            "no:cacheprovider",
            "-s",
        )
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["loaded: []"])
