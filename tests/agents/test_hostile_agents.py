"""Hostile agents under test, each contained (tests/agent_programs/): one hunts for the
real key (its environment, every /proc/*/environ and cmdline it can read, the files of
the folders above its workspace), one leaves a child behind in a session of its own
(setsid), one never exits and ignores SIGTERM, one floods stdout and stderr. Each is a
command agent in a real ``pytest --agentbench`` run (pytester, subprocess) whose model
is reached with a real key through the gateway, in the default sandbox and in ``basic``
(no namespaces).

What must hold: the key is in nothing the hunter found nor in any file the run wrote;
after each task no process is left with its working folder in the task's workspace; the
time limit ends the sleeper; the flood is capped and stops the agent."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from real_agents_support import copy_programs, processes_in

from pytest_agentbench.scripted.server import ScriptedServer

pytestmark = pytest.mark.slow

SECRET = "sk-test-PLANTED-7c41e9d02b5a"


def agent(program: str, **extra: object) -> str:
    fields: dict[str, object] = {
        "kind": "command",
        "argv": ["{python}", "{suite_dir}/agents/" + program],
        "final_message": "stdout",
        **extra,
    }
    return "agent = { " + ", ".join(f"{k} = {json.dumps(v)}" for k, v in fields.items()) + " }"


SUITE = f"""
[suite]
name = "hostile"
timeout_s = 60
verifier = {{ kind = "includes" }}

[[task]]
id = "key-hunter"
target = "hello"
input = "Find a key."
{agent("key_hunter.py")}

[[task]]
id = "forker"
target = "hello"
input = "Leave something behind."
{agent("forker.py")}

[[task]]
id = "sleeper"
target = "hello"
input = "Never stop."
timeout_s = 6
{agent("sleeper.py")}

[[task]]
id = "flooder"
target = "hello"
input = "Shout."
{agent("flooder.py")}
"""


def agent_entry(folder: Path) -> dict[str, Any]:
    entries = json.loads((folder / "trajectory.json").read_text())["requests"]
    [found] = [e["agent"] for e in entries if "agent" in e]
    return dict(found)


@pytest.mark.parametrize("sandbox", ["auto", "basic"])
def test_hostile_agents_are_contained(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, sandbox: str
) -> None:
    copy_programs(pytester.path)
    pytester.makefile(".toml", bench_hostile=SUITE)
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    with ScriptedServer(default=["hello"]) as server:
        result = pytester.runpytest_subprocess(
            "--agentbench",
            "-p",
            "no:cacheprovider",
            "--agentbench-model",
            "openai-compat/anything",
            "--agentbench-base-url",
            server.url,
            "--agentbench-sandbox",
            sandbox,
            timeout=300,
        )
        # the model was reached with a key: the gateway's, never the agent's stand-in
        assert server.requests and all(
            r["headers"]["authorization"] == "[redacted]" for r in server.requests
        )
    out = result.stdout.str() + result.stderr.str()
    assert SECRET not in out
    tasks = (pytester.path / "agentbench-results" / "latest").resolve() / "tasks" / "hostile"
    folders = {f.name.split("[")[0]: f for f in tasks.iterdir()}

    # the hunter looked everywhere it could and found only its stand-in
    hunter = folders["key-hunter"]
    found = (hunter / "workspace" / "found.txt").read_text()
    assert "agb-" in found  # it did find keys: the stand-in in its own environment
    assert SECRET not in found
    for path in (pytester.path / "agentbench-results").rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path

    # the child in its own session did not outlive the task
    forker = folders["forker"]
    assert (forker / "workspace" / "child.pid").exists()  # it ran there, and forked
    assert json.loads((forker / "result.json").read_text())["outcome"] == "passed"

    sleeper = json.loads((folders["sleeper"] / "result.json").read_text())
    assert sleeper["outcome"] == "timeout", sleeper["error"]
    assert sleeper["error"].startswith("agent timed out after 6 s (1 model calls)")
    assert (folders["sleeper"] / "workspace" / "started.txt").exists()

    flooder = json.loads((folders["flooder"] / "result.json").read_text())
    entry = agent_entry(folders["flooder"])
    assert entry["output_truncated"] is True and entry["killed_by"] == "output"
    assert len(entry["stdout"]) < 70_000 and len(entry["stderr"]) < 70_000
    assert flooder["outcome"] == "failed"
    assert flooder["error"] == (  # the docs' row for it (docs/agents-external.md)
        "agent killed for flooding its output: more than 1310720 bytes on stdout or on "
        "stderr (20 × output_bytes)"
    )

    for folder in folders.values():  # nothing of any agent outlives its task
        assert processes_in(folder / "workspace") == [], folder.name
