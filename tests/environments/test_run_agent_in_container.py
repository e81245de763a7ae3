"""``--agentbench-agent FILE`` on a Harbor dataset: the example stand-in agent, named by a
file of its own, runs a task folder that names no agent, in the task's container, and
its ``test.sh`` passes it there; the oracle and nop controls still run no agent. A
missing engine or base image skips with the reason (tests/containers_support.py)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from harbor_support import TASK_TOML, write_task

from pytest_agentbench.environments.engine import Engine

pytestmark = pytest.mark.slow

STANDIN = Path(__file__).parents[2] / "example_suites" / "agents" / "standin_agent.py"
#: The scripted model's replies (the offline model needs them; a real model does not):
#: the agent's own shell tool writes the answer, then it stops.
COMMAND = "echo 42 > /app/answer.txt"
REPLIES = (
    '\n[metadata.agentbench]\nscripted = [{ tool_calls = [{ name = "bash", arguments = '
    "{ command = " + json.dumps(COMMAND) + ' } }] }, "Done."]\n'
)
#: The agent file: the stand-in beside it, mounted read-only at the same path and run by
#: the image's python3.
AGENT_FILE = """\
kind = "command"
argv = ["python3", "{agent_dir}/standin_agent.py", "{prompt}"]
mounts = ["standin_agent.py"]
"""


def test_the_run_wide_agent_runs_an_unchanged_harbor_task_in_its_container(
    pytester: pytest.Pytester, engine: Engine
) -> None:
    write_task(pytester.path / "dataset", "answer", toml=TASK_TOML + REPLIES)
    home = pytester.path / "my-agent"
    home.mkdir()
    shutil.copy(STANDIN, home / "standin_agent.py")
    (home / "agent.toml").write_text(AGENT_FILE)

    args = ["--agentbench", "dataset", "-p", "no:cacheprovider", "--agentbench-engine",
            engine.name, "--agentbench-agent", str(home / "agent.toml")]  # fmt: skip
    result = pytester.runpytest_subprocess(*args)
    out = result.stdout.str()
    assert result.ret == 0, out
    run_dir = (pytester.path / "agentbench-results" / "latest").resolve()
    [folder] = (run_dir / "tasks" / "dataset").glob("answer*")
    record = json.loads((folder / "result.json").read_text())["record"]
    assert record["outcome"] == "passed" and record["reward"] == 1.0, record
    assert record["agent"]["from"] == "run", record["agent"]
    assert record["agent"]["mounts"] == [str(home / "standin_agent.py")]
    # test.sh ran in the container and found what the agent wrote there
    assert (folder / "verifier" / "reward.txt").read_text().strip() == "1"
    requests = json.loads((folder / "trajectory.json").read_text())["requests"]
    [entry] = [e["agent"] for e in requests if "agent" in e]
    assert entry["exit_code"] == 0 and entry["container"]["engine"] == engine.name, entry
    # the controls (positive: the oracle, solve.sh; empty: nop) run no agent, as expected
    controlled = pytester.runpytest_subprocess(*args, "--agentbench-controls")
    assert controlled.ret == 0, controlled.stdout.str()
    run_dir = (pytester.path / "agentbench-results" / "latest").resolve()
    summary = json.loads((run_dir / "summary.json").read_text())
    controls = [t for t in summary["tasks"] if t.get("control")]
    assert {t["control"]["name"] for t in controls} == {"positive", "empty"}, controls
    for control in controls:
        assert "agent" not in control, control
        assert control["control"]["behaved"] is True, control
    assert not Path("/app/answer.txt").exists()  # written in the container, not here
