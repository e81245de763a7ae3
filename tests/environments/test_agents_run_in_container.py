"""Agents under test run a Harbor task inside its container, offline: the example stand-in
agent (example_suites/agents/standin_agent.py, with the image's python3), the real Claude
Code CLI and the real Codex CLI (the host's installations mounted read-only at the same
paths: tests/real_agents_support.py finds them), each a ``pytest --agentbench`` run of a
Harbor dataset whose scripted replies play the agent's model. The agent writes
``/app/answer.txt`` with its own shell tool, in the container; the task's ``test.sh``
verifies it there. On the host's network the agent reaches the gateway at 127.0.0.1;
with ``allow_internet = false`` only through the gateway bridge. Either way each call is
its task's (the route's stand-in key, never the host's), and the record says where the
agent ran. A missing engine, base image or agent skips with the reason."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from harbor_support import BASE_IMAGE, TASK_TOML, write_task
from real_agents_support import agents_dir, require_tool, shell_call

from pytest_agentbench import schemas
from pytest_agentbench.environments.engine import Engine

pytestmark = pytest.mark.slow

STANDIN = Path(__file__).parents[2] / "example_suites" / "agents" / "standin_agent.py"
#: What the host's environment holds as its keys: the agent must never see them.
HOST_KEY = "sk-host-secret-never-in-a-container"
#: The agent's one command: the answer, and its environment kept for the test to read.
COMMAND = "echo 42 > /app/answer.txt; env > /logs/agent/env.txt"
CODEX_PROVIDER = [
    "-c", 'sandbox_mode="danger-full-access"', "-c", 'model_provider="agentbench"',
    "-c", 'model_providers.agentbench={name="agentbench",base_url="{base_url}/v1",'
    'env_key="OPENAI_API_KEY",wire_api="responses"}', "-m", "task-model",
]  # fmt: skip


def agent_table(kind: str, folder: Path) -> dict[str, Any]:
    """The ``[metadata.agentbench.agent]`` table of ``kind``, its installation mounted."""
    if kind == "standin":
        program = folder / "standin_agent.py"
        shutil.copy(STANDIN, program)
        return {"kind": "command", "argv": ["python3", str(program), "{prompt}"],
                "mounts": [str(program)]}  # fmt: skip
    npm = str(agents_dir() / "npm")
    if kind == "claude":
        exe = require_tool("claude")
        return {
            "kind": "command",
            "argv": [exe, "-p", "{prompt}", "--allowedTools", "Bash", "--output-format", "json"],
            "env": {"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"},
            "mounts": [npm],
        }
    exe = require_tool("codex")
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed: Codex's launcher needs it")
    return {
        "kind": "command",
        "argv": [exe, "exec", "--skip-git-repo-check", *CODEX_PROVIDER, "{prompt}"],
        "mounts": [npm, str(Path(node).resolve())],
    }


def reply(kind: str) -> str:
    """The scripted model's first reply: the agent's own shell tool runs COMMAND."""
    if kind == "standin":
        call = '{ name = "bash", arguments = { command = ' + json.dumps(COMMAND) + " } }"
    else:
        call = shell_call(kind, COMMAND)
    return '{ text = "Writing it.", tool_calls = [' + call + "] }"


def task_toml(kind: str, table: dict[str, Any], allow_internet: bool) -> str:
    network = "" if allow_internet else "allow_internet = false\n"
    toml = TASK_TOML.replace("[environment]\n", f"[environment]\n{network}")
    lines = [f"{key} = {json.dumps(value)}" for key, value in table.items() if key != "env"]
    if "env" in table:
        env = ", ".join(f"{k} = {json.dumps(v)}" for k, v in table["env"].items())
        lines.append(f"env = {{ {env} }}")
    agent = "\n".join(lines).replace('": ', '" = ')
    return (
        f'{toml}\n[metadata.agentbench]\nscripted = [{reply(kind)}, "Done."]\n\n'
        f"[metadata.agentbench.agent]\n{agent}\n"
    )


@pytest.mark.parametrize("kind", ["standin", "claude", "codex"])
def test_an_agent_runs_a_harbor_task_in_its_container(
    pytester: pytest.Pytester, engine: Engine, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    dataset = pytester.path / "in-container"
    programs = pytester.path / "programs"
    programs.mkdir()
    table = agent_table(kind, programs)
    for name, allow in (("host-network", True), ("no-network", False)):
        write_task(dataset, name, toml=task_toml(kind, table, allow))
    for variable in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.setenv(variable, HOST_KEY)

    result = pytester.runpytest_subprocess(
        "--agentbench", "in-container", "-p", "no:cacheprovider", "--agentbench-engine",
        engine.name,
    )  # fmt: skip
    out = result.stdout.str()
    assert result.ret == 0, out
    run_dir = (pytester.path / "agentbench-results" / "latest").resolve()
    for name, network in (("host-network", "host"), ("no-network", "none (gateway bridge)")):
        [folder] = (run_dir / "tasks" / "in-container").glob(f"{name}*")
        record = json.loads((folder / "result.json").read_text())
        assert record["outcome"] == "passed" and record["reward"] == 1.0, (name, record)
        # verified in the container by test.sh: its reward, copied out
        assert (folder / "verifier" / "reward.txt").read_text().strip() == "1"
        trajectory = json.loads((folder / "trajectory.json").read_text())
        schemas.validate("trajectory", trajectory)  # the container record included
        requests = trajectory["requests"]
        relayed = [e for e in requests if "protocol" in e]
        assert len(relayed) == 2, (name, relayed)  # both model calls on the task's route
        [entry] = [e["agent"] for e in requests if "agent" in e]
        assert entry["exit_code"] == 0, entry
        where = entry["container"]
        assert where["engine"] == engine.name and where["network"] == network
        assert all(target in where["mounts"] for target in table["mounts"])
        kept = [e for e in requests if "containment" in e]
        assert kept and kept[-1]["containment"]["level"] == "container"
        # the agent's environment in the container: its stand-in key and the gateway
        seen = (folder / "agent" / "env.txt").read_text()
        assert HOST_KEY not in seen
        assert "ANTHROPIC_API_KEY=" in seen and "OPENAI_BASE_URL=http://127.0.0.1:" in seen
        if network != "host":
            assert "OPENAI_BASE_URL=http://127.0.0.1:41000/agent/" in seen
    assert not Path("/app/answer.txt").exists()  # written in the containers, not here


def test_a_command_agent_of_our_own_suite_runs_in_the_suites_environment(
    pytester: pytest.Pytester, engine: Engine
) -> None:
    program = pytester.path / "standin_agent.py"
    shutil.copy(STANDIN, program)
    (pytester.path / "env").mkdir()
    (pytester.path / "env" / "Dockerfile").write_text(
        f"FROM {BASE_IMAGE}\nWORKDIR /work\nRUN echo built > /etc/built-marker\n"
    )
    command = "cat /etc/built-marker > answer.txt"
    pytester.makefile(
        ".toml",
        bench_own=f"""
[suite]
mode = "agent"
repairs = 0
environment = {{ dockerfile = "env" }}
verifier = {{ kind = "command", run = "grep -qx built answer.txt" }}

[suite.agent]
kind = "command"
argv = ["python3", "{program}", "{{prompt}}"]
mounts = ["{program}"]

[[task]]
id = "own"
input = "Copy /etc/built-marker to answer.txt"
scripted = [
  {{ tool_calls = [{{ name = "bash", arguments = {{ command = {json.dumps(command)} }} }}] }},
  "Done.",
]
""",
    )
    result = pytester.runpytest_subprocess(
        "--agentbench", "-p", "no:cacheprovider", "--agentbench-engine", engine.name
    )
    assert result.ret == 0, result.stdout.str()
    run_dir = (pytester.path / "agentbench-results" / "latest").resolve()
    trajectory = json.loads(next(run_dir.glob("tasks/*/own*/trajectory.json")).read_text())
    [entry] = [e["agent"] for e in trajectory["requests"] if "agent" in e]
    assert entry["container"]["engine"] == engine.name and entry["container"]["network"] == "host"
