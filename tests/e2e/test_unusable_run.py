"""A run whose number is not usable says so: a real pytest run (pytester) against a
stdlib HTTP server on 127.0.0.1 that answers a few Chat Completions requests and then
dies, as a model's server that crashed mid-run. Its harness errors outnumber the tasks
it scored:
the headline, summary.json's ``totals.unusable``, the Markdown title and report.html say
the score is not usable and name the rerun, and the exit status is 7."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fault_server_support import DyingServer

from pytest_agentbench.schemas import validate

TASKS = "".join(
    f'[[task]]\nid = "t{i}"\ninput = "What is 3 + 4?"\ntarget = "7"\n' for i in range(6)
)
SUITE = f'[suite]\nname = "sums"\nverifier = {{ kind = "exact" }}\n{TASKS}'


def _args(server: DyingServer) -> list[str]:
    """A run against ``server``'s one model, unstreamed."""
    return [
        "--agentbench",
        "-p",
        "no:cacheprovider",
        "--agentbench-model",
        "openai-compat/m",
        "--agentbench-base-url",
        server.url,
        "--agentbench-no-stream",
    ]


def _run(pytester: pytest.Pytester, lives: int, port: int = 0) -> pytest.RunResult:
    pytester.makefile(".toml", bench_sums=SUITE)
    server = DyingServer(lives, port)
    try:
        return pytester.runpytest(
            *_args(server),
            "--agentbench-max-retries",
            "0",
            "--agentbench-concurrency",
            "1",
            "--agentbench-markdown",
            "s.md",
        )
    finally:
        server.stop()


def _summary(pytester: pytest.Pytester) -> dict[str, Any]:
    run = (pytester.path / "agentbench-results" / "latest").resolve()
    data: dict[str, Any] = json.loads((run / "summary.json").read_text())
    return data


def test_a_run_whose_server_died_says_its_score_is_not_usable(pytester: pytest.Pytester) -> None:
    result = _run(pytester, lives=2)
    assert result.ret == 7, result.stdout.str()
    run_id = _summary(pytester)["run_id"]
    folder = f"agentbench-results/{run_id}"
    lines = result.stdout.lines
    head = lines.index("6 tasks: 2 passed, 4 harness error(s)")
    assert lines[head + 1] == (
        "⚠ not usable: 4 of 6 tasks are harness errors (more than 50%), so the score covers 2 "
        f"task(s) only; rerun them with --agentbench-resume {folder} --agentbench-retry-errors"
    )
    summary = _summary(pytester)
    validate("summary", summary)
    broken = summary["totals"]["unusable"]
    assert (broken["harness_errors"], broken["tasks"], broken["limit"]) == (4, 6, 0.5)
    assert broken["retry"] == f"--agentbench-resume {folder} --agentbench-retry-errors"
    assert summary["exit_status"] == 7
    assert (pytester.path / "s.md").read_text().startswith("## agentbench — ⚠ not usable · ")
    html = (pytester.path / folder / "report.html").read_text()
    assert 'id="unusable">⚠ not usable: 4 of 6 tasks are harness errors' in html


def test_a_run_with_a_few_harness_errors_is_still_usable(pytester: pytest.Pytester) -> None:
    result = _run(pytester, lives=5)
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # one harness error: an error item
    result.stdout.fnmatch_lines(["6 tasks: 5 passed, 1 harness error(s)"])
    result.stdout.no_fnmatch_line("*not usable*")
    assert _summary(pytester)["totals"]["unusable"] is None


def test_errors_must_outnumber_the_scored_tasks(pytester: pytest.Pytester) -> None:
    result = _run(pytester, lives=3)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["6 tasks: 3 passed, 3 harness error(s)"])
    result.stdout.no_fnmatch_line("*not usable*")


def test_the_rerun_it_names_completes_the_run(pytester: pytest.Pytester) -> None:
    first = DyingServer(lives=0)  # a port of our own, the same for both runs (the
    port = first.server.server_address[1]  # base URL is part of the run's settings)
    first.stop()
    _run(pytester, lives=2, port=port)
    retry = _summary(pytester)["totals"]["unusable"]["retry"].split()
    pytester.makefile(".toml", bench_sums=SUITE)
    server = DyingServer(lives=100, port=port)
    try:
        again = pytester.runpytest(*_args(server), *retry)
    finally:
        server.stop()
    assert again.ret == pytest.ExitCode.OK
    assert server.served == 4  # the harness errors only; the passed tasks were kept
    again.stdout.fnmatch_lines(["6 tasks: 6 passed"])
    assert Path(pytester.path / "agentbench-results").is_dir()
