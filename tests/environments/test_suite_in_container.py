"""A suite of our own format naming an environment runs for real in Podman: the image
built from its Dockerfile folder, the task's files seeded in the container, the built-in
agent's bash run there, and the command verifier judging the container's workspace (a
stale reward link the agent left is removed, never read). No container left behind."""

from __future__ import annotations

import json

import pytest
from containers_support import BASE_IMAGE, left_by, usable_engine

SUITE = """
[suite]
mode = "agent"
environment = { dockerfile = "env", memory_mb = 256 }
verifier = { kind = "command", run = "grep -q 42 answer.txt && test -f /etc/built-marker" }

[[task]]
id = "in-container"
input = "Write 42 to answer.txt"
files = { "notes.txt" = "seeded" }
scripted = [
  { tool_calls = [{ name = "bash", arguments = { command = "READS; echo 42 > answer.txt" } }] },
  "done",
]

[[task]]
id = "forges"
input = "Write 42 to answer.txt"
scripted = [
  { tool_calls = [{ name = "bash", arguments = { command = "echo 41 > answer.txt; FORGES" } }] },
  "done",
]
""".replace("READS", "cat notes.txt /etc/built-marker").replace("FORGES", "echo 1 > reward.txt")


def test_an_agent_suite_runs_and_is_verified_in_its_container(pytester: pytest.Pytester) -> None:
    engine = usable_engine()
    (pytester.path / "env").mkdir()
    (pytester.path / "env" / "Dockerfile").write_text(
        f"FROM {BASE_IMAGE}\nWORKDIR /work\nRUN echo built > /etc/built-marker\n"
    )
    (pytester.path / "bench_own.toml").write_text(SUITE)
    result = pytester.runpytest("--agentbench", "-p", "no:cacheprovider")
    result.stdout.fnmatch_lines(["2 tasks: 1 passed, 1 failed"])
    run = (pytester.path / "agentbench-results" / "latest").resolve()
    trajectory = json.loads(next(run.glob("tasks/own/in-container*/trajectory.json")).read_text())
    outputs = [
        r["tool_results"][0]["output"] for r in trajectory["requests"] if r.get("tool_results")
    ]
    assert outputs and outputs[0].startswith("seededbuilt"), outputs
    forged = json.loads(next(run.glob("tasks/own/forges*/result.json")).read_text())
    assert forged["outcome"] == "failed" and forged["reward"] == 0.0
    assert left_by(engine, run.name) == []
