"""A gateway call's wait in a one-at-a-time server's queue is credited to the external
agent's deadline as a built-in rollout's is (issue 33): recorded on the call, summed in
the agent's entry and on the attempt, and the agent's time runs on by as much."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_agentbench.scripted.server import ScriptedServer

#: An agent that asks its model once, works 1.5 s, and says so.
ASK_ONCE = r"""
import json, os, time, urllib.request

body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "go"}]}
request = urllib.request.Request(
    os.environ["OPENAI_BASE_URL"] + "/chat/completions", data=json.dumps(body).encode(),
    headers={"content-type": "application/json",
             "authorization": "Bearer " + os.environ["OPENAI_API_KEY"]})
with urllib.request.urlopen(request, timeout=120) as response:
    response.read()
time.sleep(1.5)  # and then some work of its own
print("asked")
"""

#: 4.5 s of the model's time (seven chunks): two of them, one after the other, and the
#: agent's own work outlast the timeout; one, the work and a slow start (3 s, a loaded
#: machine's Python) fit in it.
SLOW_REPLY = '{ text = "ok ok ok ok ok ok ok", chunk_size = 3, chunk_delay_s = 0.65 }'


def _task(name: str) -> str:
    return f"""
[[task]]
id = "{name}"
input = "Ask."
target = "ok"
agent = {{ kind = "command", argv = ["{{python}}", "{{suite_dir}}/ask_once.py"] }}
scripted = [{SLOW_REPLY}]
"""


@pytest.mark.slow
def test_a_gateway_call_queued_at_a_one_at_a_time_server_is_not_the_agents_time(
    pytester: pytest.Pytester,
) -> None:
    """Two agents at once, a 9 s timeout, a server that serves one request at a time
    and takes 4.5 s a reply: the second agent's call waits for the first's, then takes
    its own 4.5 s (and the agent works 1.5 s more: 10.5 s). Credited, both pass; counted
    as the agent's time, the second timed out."""
    (pytester.path / "ask_once.py").write_text(ASK_ONCE)
    pytester.makefile(
        ".toml",
        bench_queue='[suite]\nname = "queue"\ntimeout_s = 9\nverifier = { kind = "includes" }\n'
        + _task("first")
        + _task("second"),
    )
    with ScriptedServer(serial=True) as server:
        result = pytester.runpytest_subprocess(
            "--agentbench",
            "--agentbench-model",
            "scripted",
            "--agentbench-base-url",
            server.url,
            "--agentbench-concurrency",
            "2",
            "-p",
            "no:cacheprovider",
            timeout=300,
        )
        assert server.stats["max_in_flight"] == 2, "both calls were at the server at once"
    run = (pytester.path / "agentbench-results" / "latest").resolve()
    tasks = run / "tasks" / "queue"
    found = {
        name: json.loads((tasks / f"{name}[scripted]" / "result.json").read_text())
        for name in ("first", "second")
    }
    assert {name: r["outcome"] for name, r in found.items()} == {
        "first": "passed",
        "second": "passed",
    }, {name: r["error"] for name, r in found.items()}
    waited = {name: r["attempts"][0].get("waited_s", 0.0) for name, r in found.items()}
    queued = max(waited, key=lambda name: waited[name])
    assert waited[queued] >= 1.0, waited
    trajectory = json.loads((tasks / f"{queued}[scripted]" / "trajectory.json").read_text())
    calls = [entry for entry in trajectory["requests"] if "call" in entry]
    agents = [entry["agent"] for entry in trajectory["requests"] if "agent" in entry]
    assert len(calls) == 1 and calls[0]["waited_s"] >= 1.0, "recorded on the call"
    assert agents[0]["waited_s"] == pytest.approx(calls[0]["waited_s"], abs=0.002)
    assert found[queued]["record"]["waited_s"] >= 1.0, "and on the task record"
    assert Path(run).is_dir()
    result.assert_outcomes(passed=2)
