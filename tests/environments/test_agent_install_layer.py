"""An agent under test installed by its table's ``install`` step, run once per task image as
a layer on top of it (runner/container_session.py ``agent_layer``), with real Podman: the
example stand-in agent written into the image by the step (nothing mounted) passes two
Harbor tasks of one image; the layer is built for one and reused by the other."""

from __future__ import annotations

import json
import secrets
from pathlib import Path

import pytest
from harbor_support import TASK_TOML, write_task

from pytest_agentbench.environments.engine import Engine

pytestmark = pytest.mark.slow

STANDIN = Path(__file__).parents[2] / "example_suites" / "agents" / "standin_agent.py"


def test_an_agent_installed_by_its_step_runs_from_a_layer_built_once(
    pytester: pytest.Pytester, engine: Engine
) -> None:
    program = STANDIN.read_text()
    assert "AGENTBENCH_EOF" not in program
    install = (  # a step of this run's own: an image of it is not in the store yet
        f"# run {secrets.token_hex(8)}\nmkdir -p /opt/standin\n"
        f"cat > /opt/standin/agent.py <<'AGENTBENCH_EOF'\n{program}AGENTBENCH_EOF\n"
    )
    call = '{ name = "bash", arguments = { command = "echo 42 > /app/answer.txt" } }'
    toml = (
        TASK_TOML
        + f'\n[metadata.agentbench]\nscripted = [{{ tool_calls = [{call}] }}, "Done."]\n'
        + '\n[metadata.agentbench.agent]\nkind = "command"\n'
        + 'argv = ["python3", "/opt/standin/agent.py", "{prompt}"]\n'
        + f"install = {json.dumps(install)}\n"
    )
    for name in ("first", "second"):
        write_task(pytester.path / "installed", name, toml=toml)
    result = pytester.runpytest_subprocess(
        "--agentbench", "installed", "-p", "no:cacheprovider", "--agentbench-engine", engine.name
    )
    assert result.ret == 0, result.stdout.str()
    run_dir = (pytester.path / "agentbench-results" / "latest").resolve()
    logs = {}
    for name in ("first", "second"):
        [folder] = (run_dir / "tasks" / "installed").glob(f"{name}*")
        record = json.loads((folder / "result.json").read_text())
        assert record["outcome"] == "passed", record
        logs[name] = (folder / "environment" / "agent-install.log").read_text()
        trajectory = json.loads((folder / "trajectory.json").read_text())
        [entry] = [e["agent"] for e in trajectory["requests"] if "agent" in e]
        assert entry["container"]["mounts"] == []  # nothing of the host's: installed
    # the two rollouts may run at once: one builds the layer, the other waits and reuses it
    reused = sorted(log.startswith("reused ") for log in logs.values())
    assert reused == [False, True], logs
