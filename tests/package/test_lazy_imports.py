"""Imports follow use. Without ``--agentbench`` the plugin is inert: pytest imports the
entry point, the options and the hook specs, nothing else of ours, and no session plugin
is registered. A run against a real model's server never imports the scripted server:
start-up pays only for what the run uses. (Plain answers run through the agent loop with
no tools since the one generation path, so the loop itself is always imported.)"""

from __future__ import annotations

import pytest

from pytest_agentbench.scripted import ScriptedServer

CONFTEST = """
import sys

def pytest_sessionfinish(session):
    heavy = ("pytest_agentbench.scripted.server", "pytest_agentbench.session.otlp",
             "pytest_agentbench.report.otlp_spans", "pytest_agentbench.artifacts.atif_export",
             "opentelemetry")
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


def test_a_plain_run_against_a_server_imports_no_scripted_server_nor_otlp(
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


INERT_PROBE = """
import sys

def test_probe(pytestconfig):
    heavy = [m for m in ("httpx", "jsonschema", "pytest_agentbench.scripted.server",
                         "pytest_agentbench.suites.load") if m in sys.modules]
    assert heavy == []
    assert pytestconfig.pluginmanager.get_plugin("agentbench-session") is None
    ours = sorted(m for m in sys.modules if m.startswith("pytest_agentbench"))
    assert ours == [
        "pytest_agentbench",
        "pytest_agentbench.config",
        "pytest_agentbench.config.options",
        "pytest_agentbench.core",
        "pytest_agentbench.core.choices",
        "pytest_agentbench.errors",
        "pytest_agentbench.hooks",
        "pytest_agentbench.hooks.hookspecs",
        "pytest_agentbench.plugin",
    ]
"""


def test_without_agentbench_nothing_else_of_ours_is_imported(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_probe=INERT_PROBE)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
