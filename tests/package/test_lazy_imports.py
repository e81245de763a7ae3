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
        "pytest_agentbench.config.feature_options",
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


#: What a run pays for only when it uses it: the judge, the response cache, the provider
#: batch APIs, external agents and their gateway, container environments (every module
#: of ours with "container" in its name, the environments layer, a task's environment
#: record), the sandbox when no task runs a sandboxed command (but for the guard that
#: hides every process's keys at start, and the CPU slots that size the pool), the agent
#: loop's tools, Harbor task folders, the verifier families its tasks do not name, the
#: scripted client (against a real server), the evidence miner (when nothing failed),
#: the score gate (no threshold set), the verdicts of comparisons and sequential looks
#: (one model, no baseline), controls and a run-wide agent file (none asked for); and
#: jsonschema, for a suite with no problem (suites/quick_schema.py).
SANDBOX_AT_START = ("pytest_agentbench.sandbox.environ_guard", "pytest_agentbench.sandbox.cpuslots")
UNUSED_FEATURES = {
    "judge": lambda name: "judge" in name.rsplit(".", 1)[-1],
    "cache": lambda name: name == "pytest_agentbench.models.response_cache",
    "batch": lambda name: (
        name.rsplit(".", 1)[-1]
        in (
            "batch",
            "batch_store",
            "batches",
            "batch_results",
            "batch_answers",
        )
    ),
    "agent or gateway": lambda name: name.startswith("pytest_agentbench.agents"),
    "container": lambda name: (
        "container" in name
        or name.startswith("pytest_agentbench.environments")
        or name == "pytest_agentbench.suites.environment"
    ),
    "sandbox": lambda name: (
        name.startswith("pytest_agentbench.sandbox.") and name not in SANDBOX_AT_START
    ),
    "agent tools": lambda name: name == "pytest_agentbench.runner.tools",
    "harbor": lambda name: (
        name
        in (
            "pytest_agentbench.suites.harbor",
            "pytest_agentbench.suites.harbor_toml",
            "pytest_agentbench.verifiers.harbor",
        )
    ),
    "other verifiers": lambda name: (
        name.rsplit(".", 1)[-1]
        in ("choice", "number", "json_schema", "code", "checks", "command", "stamped")
        and name.startswith("pytest_agentbench.verifiers.")
    ),
    "evidence miner": lambda name: (
        name
        in (
            "pytest_agentbench.report.verifier_evidence",
            "pytest_agentbench.report.ctrf_scan",
            "pytest_agentbench.report.probes",
            "pytest_agentbench.report.mismatch",
        )
    ),
    "score gate": lambda name: name == "pytest_agentbench.report.gate",
    "comparisons": lambda name: (
        name in ("pytest_agentbench.core.verdicts", "pytest_agentbench.session.sequential")
    ),
    "controls": lambda name: name == "pytest_agentbench.suites.controls",
    "agent file": lambda name: name == "pytest_agentbench.suites.agent_file",
}
#: Against a real server only (the scripted provider's own run needs them).
UNUSED_AGAINST_A_SERVER = {
    "scripted client": lambda name: name == "pytest_agentbench.models.scripted",
}

IMPORTS_AT_EXIT = """
import atexit, sys

def _ours():
    ours = sorted(m for m in sys.modules if m.startswith("pytest_agentbench"))
    others = [m for m in ("regex", "httpx", "httpcore", "h11", "jsonschema") if m in sys.modules]
    print("\\nimported:", " ".join(ours + others))

atexit.register(_ours)
"""


@pytest.mark.parametrize("model", ["scripted", "openai-compat/x"])
def test_a_plain_built_in_run_imports_no_feature_it_does_not_use(
    pytester: pytest.Pytester, model: str
) -> None:
    """One task, the exact verifier, the built-in loop, against the scripted provider
    (the default) or a real server: every module of ours imported by the end of the
    process (reports written, the session over) is listed, and none of them belongs to
    a judge, the cache, batches, an external agent or the gateway, a container, the
    sandbox, the agent's tools, or another feature the run does not use; nor is httpx
    (both servers are plain HTTP, reached directly)."""
    pytester.makeconftest(IMPORTS_AT_EXIT)
    pytester.makefile(
        ".toml", bench_plain=SUITE.replace('target = "a"', 'target = "a"\nscripted = ["a"]')
    )
    args = ["--agentbench", "-p", "no:cacheprovider", "-s"]
    with ScriptedServer(default=["a"]) as server:
        if model != "scripted":
            args += ["--agentbench-model", model, "--agentbench-base-url", server.url]
        result = pytester.runpytest_subprocess(*args)
    result.assert_outcomes(passed=1)
    (line,) = [line for line in result.outlines if line.startswith("imported:")]
    imported = line.split()[1:]
    assert "pytest_agentbench.runner.rollout" in imported, "the run itself is listed"
    unused = UNUSED_FEATURES | (UNUSED_AGAINST_A_SERVER if model != "scripted" else {})
    unwanted = {
        feature: [name for name in imported if belongs(name)] for feature, belongs in unused.items()
    }
    assert "regex" not in imported, "the regex package is imported by regex tasks only"
    # a plain-HTTP server is asked on plain sockets (models/plain_http.py), in our own
    # types (models/wire.py): httpx is for https, proxies and the features that need it
    assert [name for name in ("httpx", "httpcore", "h11") if name in imported] == []
    assert "pytest_agentbench.models.httpx_path" not in imported
    assert "jsonschema" not in imported, "a valid suite passes the quick schema check"
    assert {feature: names for feature, names in unwanted.items() if names} == {}
