"""A stuck or broken server costs what it cost before the queue clock (issue 33): time
queued at a server is credited only where the server is seen or declared to serve one
request at a time, so against a server that hangs the task's timeout bounds its wall time
again; and a malformed 200 costs the retries it always did. The faults come from
fault_server_support.FaultServer, a standard-library server of its own (not the scripted
provider), one fault per model name."""

from __future__ import annotations

import json

import pytest
from fault_server_support import FaultServer

from pytest_agentbench.scripted import ScriptedServer

TWO_TASKS = """
[suite]
name = "stuck"
verifier = { kind = "includes" }

[[task]]
id = "first"
input = "Say ok."
target = "ok"

[[task]]
id = "second"
input = "Say ok."
target = "ok"
"""


def _results(pytester: pytest.Pytester) -> dict[str, dict[str, object]]:
    run = (pytester.path / "agentbench-results" / "latest").resolve()
    return {
        path.parent.name: json.loads(path.read_text(encoding="utf-8"))
        for path in (run / "tasks").rglob("result.json")
    }


HANGING = ("hang", "headers", "headers-json", "drip")


@pytest.mark.slow
def test_a_hanging_server_ends_every_task_at_its_own_timeout(pytester: pytest.Pytester) -> None:
    """Two tasks at --agentbench-timeout 8 against each way of hanging (no answer; the
    headers of a stream, then nothing; the headers of a JSON body, then nothing; a comment
    byte a second): the second request was sent while the first was in flight, yet each
    task ends near 8 s (its clock stopped while the first was in flight, it ended after
    about 16 s)."""
    pytester.makefile(".toml", bench_stuck=TWO_TASKS)
    models: list[str] = []
    for name in HANGING:
        models += ["--agentbench-model", f"{name}=openai-compat/{name}"]
    with FaultServer() as server:
        result = pytester.runpytest(
            "--agentbench",
            *models,
            "--agentbench-base-url",
            server.url,
            "--agentbench-timeout",
            "8",
            "-p",
            "no:cacheprovider",
        )
        sent = dict(server.requests)
    assert sent == dict.fromkeys(HANGING, 2), "one request per task, none retried"
    results = _results(pytester)
    assert len(results) == 2 * len(HANGING)
    for folder, found in results.items():
        assert found["outcome"] == "timeout", folder
        elapsed = found["elapsed_s"]
        assert isinstance(elapsed, float)
        assert 7.5 <= elapsed < 12, f"{folder} ended after {elapsed:.1f} s"
        assert "waited_s" not in found["record"], "nothing was credited to a queue"  # type: ignore[operator]
    result.assert_outcomes(failed=2 * len(HANGING))


def test_a_malformed_200_costs_the_retries_and_no_more(pytester: pytest.Pytester) -> None:
    """An HTML page, and an empty event stream, with status 200: four requests a task (the
    first and three retries). The empty stream is asked once unstreamed (it may be a
    context overflow, as llama-cpp-python sends one), as one of those four; the HTML page
    never is (it is no stream)."""
    pytester.makefile(".toml", bench_stuck=TWO_TASKS)
    with FaultServer() as server:
        result = pytester.runpytest(
            "--agentbench",
            "--agentbench-model",
            "html=openai-compat/html",
            "--agentbench-model",
            "empty=openai-compat/empty",
            "--agentbench-base-url",
            server.url,
            "-p",
            "no:cacheprovider",
        )
        sent = dict(server.requests)
    assert sent == {"html": 8, "empty": 8}
    results = _results(pytester)
    for folder, found in results.items():
        assert found["outcome"] == "harness_error", folder
    error = next(str(r["error"]) for f, r in results.items() if f.endswith("[empty]"))
    assert "gave up after 4 attempts" in error
    result.assert_outcomes(errors=4)


#: Answers of two seconds (twice the timeout) and of a fifth of a second.
SLOW = '{ text = "ok ok ok ok ok ok ok ok ok ok", chunk_size = 1, chunk_delay_s = 0.1 }'
QUICK = '{ text = "ok", delay_s = 0.2 }'


@pytest.mark.slow
def test_a_server_declared_to_serve_one_at_a_time_is_credited_from_the_first_request(
    pytester: pytest.Pytester,
) -> None:
    """--agentbench-serial-server: the quick task, queued behind one that times out at
    1.5 s on a one-at-a-time server, is credited its wait from the start (undeclared,
    nothing is seen before the slow one ends: no reply began when another ended)."""
    pytester.makefile(
        ".toml",
        bench_serial=f"""
[suite]
name = "serial"
verifier = {{ kind = "includes" }}
timeout_s = 1.5

[[task]]
id = "slow"
input = "Say ok."
target = "ok"
scripted = [{SLOW}]

[[task]]
id = "quick"
input = "Say ok."
target = "ok"
scripted = [{QUICK}]
""",
    )
    with ScriptedServer(serial=True) as server:
        result = pytester.runpytest(
            "--agentbench",
            "--agentbench-model",
            "scripted",
            "--agentbench-base-url",
            server.url,
            "--agentbench-serial-server",
            "--agentbench-concurrency",
            "2",
            "-p",
            "no:cacheprovider",
        )
    results = {name.split("[")[0]: found for name, found in _results(pytester).items()}
    assert results["slow"]["outcome"] == "timeout"
    quick = results["quick"]
    assert quick["outcome"] == "passed"
    elapsed, record = quick["elapsed_s"], quick["record"]
    assert isinstance(elapsed, float) and isinstance(record, dict)
    if elapsed >= 1.0:  # (unless the server happened to take the quick one first)
        assert record["waited_s"] >= 1.0, "its wait behind the slow one was credited"
    result.assert_outcomes(passed=1, failed=1)
