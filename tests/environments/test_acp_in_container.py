"""ACP agents under test in their Harbor task's container (agents/container_acp.py), with
real Podman, the real gateway and the scripted provider playing the model:

- our ACP stand-in (tests/agent_programs/acp_agent.py, run by the image's python3) passes
  a Harbor task, on the host's network and behind the gateway bridge: its shell commands
  run in the container through the terminals our client offers there, its file writes
  land in the container, and test.sh verifies the answer there;
- a hostile ACP agent that keeps writing (itself and through a straggler that shed the
  exec's mark) is stopped at ``[agent] timeout_sec``: every process inside ended, no write
  after;
- file requests for a path outside the workdir and through a symlink are served as in
  the container (its own files, its links followed there), never the host's;
- the real Claude Code ACP adapter, when installed, passes a task the same way.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
from agents_in_container_support import clients_for
from harbor_support import BASE_IMAGE, TASK_TOML, write_task
from real_agents_support import PROGRAMS, agents_dir, require_tool, shell_call

from pytest_agentbench.agents.gateway import Gateway
from pytest_agentbench.agents.runners import open_container_session
from pytest_agentbench.environments.engine import Engine
from pytest_agentbench.runner.container_session import EnvironmentPlace
from pytest_agentbench.runner.loopguard import KillPolicy
from pytest_agentbench.runner.turn_requests import first_messages
from pytest_agentbench.suites.harbor import load_harbor_task
from pytest_agentbench.suites.task import Task

pytestmark = pytest.mark.slow

HOST_KEY = "sk-host-secret-never-in-a-container"
#: The image of the file-request test: a file only the image holds.
MARKED = f"FROM {BASE_IMAGE}\nWORKDIR /app\nRUN echo image-only > /etc/agentbench-marker\n"


def bash(command: str) -> str:
    return '{ name = "bash", arguments = { command = ' + json.dumps(command) + " } }"


def acp_table(program: Path) -> str:
    return (
        '\n[metadata.agentbench.agent]\nkind = "acp"\n'
        f'argv = ["python3", "{program}"]\nmounts = ["{program}"]\n'
    )


def test_the_acp_stand_in_passes_a_harbor_task_in_its_container(
    pytester: pytest.Pytester, engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    program = pytester.path / "acp_agent.py"
    shutil.copy(PROGRAMS / "acp_agent.py", program)
    command = "echo 42 > answer.txt; env > /logs/agent/env.txt; cat /etc/hostname"
    note = '{ name = "write_file", arguments = { path = "notes/a.txt", content = "note" } }'
    replies = f'[{{ text = "Writing it.", tool_calls = [{bash(command)}, {note}] }}, "Done."]'
    for name, allow in (("host-network", True), ("no-network", False)):
        toml = (
            TASK_TOML
            if allow
            else TASK_TOML.replace("[environment]\n", "[environment]\nallow_internet = false\n")
        )
        toml += f"\n[metadata.agentbench]\nscripted = {replies}\n" + acp_table(program)
        test_sh = (
            '#!/bin/bash\ntest "$(cat /app/answer.txt)" = 42 && test "$(cat notes/a.txt)" = note'
            " && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt\n"
        )
        write_task(pytester.path / "acp-ds", name, toml=toml, test_sh=test_sh)
    for variable in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.setenv(variable, HOST_KEY)

    result = pytester.runpytest_subprocess(
        "--agentbench", "acp-ds", "-p", "no:cacheprovider", "--agentbench-engine", engine.name
    )
    assert result.ret == 0, result.stdout.str()
    run_dir = (pytester.path / "agentbench-results" / "latest").resolve()
    for name, network in (("host-network", "host"), ("no-network", "none (gateway bridge)")):
        [folder] = (run_dir / "tasks" / "acp-ds").glob(f"{name}*")
        record = json.loads((folder / "result.json").read_text())
        assert record["outcome"] == "passed" and record["reward"] == 1.0, (name, record)
        assert (folder / "verifier" / "reward.txt").read_text().strip() == "1"
        trajectory = json.loads((folder / "trajectory.json").read_text())
        requests = trajectory["requests"]
        assert len([e for e in requests if "protocol" in e]) == 2  # on the task's route
        [entry] = [e["agent"] for e in requests if "agent" in e]
        assert entry["kind"] == "acp" and entry["stop_reason"] == "end_turn", entry
        assert entry["agent_info"]["name"] == "stand-in-acp-agent"
        assert entry["container"]["network"] == network
        kinds = [event["type"] for event in entry["events"]]
        # its shell ran in a terminal of ours, in the container; its file was written there
        assert "terminal_create" in kinds and "terminal_wait_for_exit" in kinds, kinds
        assert any(
            e["type"] == "fs_write" and e["path"] == "/app/notes/a.txt" for e in entry["events"]
        )
        # the terminal's command ran with the container's environment, not the host's
        seen = (folder / "agent" / "env.txt").read_text()
        assert HOST_KEY not in seen and "PWD=/app" in seen
    assert not Path("/app/answer.txt").exists()


def task_of(tmp_path: Path, toml: str, **parts: str) -> Task:
    folder = write_task(tmp_path / "ds", "acp", toml=toml, **parts)
    task, _ = load_harbor_task(folder / "task.toml")
    return task


def processes(container: Any) -> str:
    script = 'for p in /proc/[0-9]*; do tr "\\0" " " < "$p/cmdline"; echo; done'
    return str(container.exec(["sh", "-c", script], timeout_s=60).stdout)


def test_a_hostile_acp_agent_is_stopped_at_its_deadline_with_everything_inside(
    engine: Engine, run_id: str, gateway: Gateway, provider: str, tmp_path: Path
) -> None:
    program = tmp_path / "acp_hostile.py"
    shutil.copy(PROGRAMS / "acp_hostile.py", program)
    toml = TASK_TOML.replace("timeout_sec = 120", "timeout_sec = 2") + acp_table(program)
    task = task_of(tmp_path, toml)
    place = EnvironmentPlace(engine=engine.name, run_id=run_id, cache_dir=tmp_path / "cache")
    session = open_container_session(
        task, tmp_path / "rollout" / "workspace", gateway, clients_for(task, provider, []),
        "scripted", place, kill_policy=KillPolicy(),
    )  # fmt: skip
    container = session.container  # type: ignore[attr-defined]
    try:
        started = time.monotonic()
        run = session.attempt(
            first_messages(task), index=0, deadline=time.monotonic() + 120, timeout_s=120
        )
        assert run.stop == "timeout", (run.stop, run.error)
        assert (run.error or "").endswith("([agent] timeout_sec)"), run.error
        assert time.monotonic() - started < 30
        sizes = []
        for _ in range(2):
            listing = container.exec(["sh", "-c", "wc -c writes.txt late.txt"], timeout_s=60)
            sizes.append(listing.stdout)
            time.sleep(1.5)
        assert "writes.txt" in sizes[0] and "late.txt" in sizes[0], sizes  # it did write
        assert sizes[0] == sizes[1], sizes  # and writes no more: itself nor its straggler
        running = processes(container)
        assert "acp_hostile" not in running and "date" not in running, running
        [entry] = [e["agent"] for e in run.trajectory if "agent" in e]
        assert isinstance(entry, dict) and entry["kind"] == "acp"
    finally:
        session.close()


def test_file_requests_are_served_in_the_container_never_on_the_host(
    engine: Engine, run_id: str, gateway: Gateway, provider: str, tmp_path: Path
) -> None:
    program = tmp_path / "acp_agent.py"
    shutil.copy(PROGRAMS / "acp_agent.py", program)
    host_secret = tmp_path / "host-secret.txt"
    host_secret.write_text("host-only")
    host_target = tmp_path / "host-target.txt"
    host_target.write_text("untouched")

    links = f"ln -s /etc/agentbench-marker in-link; ln -s {host_target} out-link"
    replies = [
        {"tool_calls": [{"name": "bash", "arguments": {"command": links}}]},
        {
            "tool_calls": [
                {"name": "read_file", "arguments": {"path": "/etc/agentbench-marker"}},
                {"name": "read_file", "arguments": {"path": "in-link"}},
                {"name": "read_file", "arguments": {"path": str(host_secret)}},
                {"name": "write_file", "arguments": {"path": "out-link", "content": "from-agent"}},
                {"name": "write_file", "arguments": {"path": str(program), "content": "x"}},
            ]
        },
        "Done.",
    ]
    task = task_of(tmp_path, TASK_TOML + acp_table(program), dockerfile=MARKED)
    place = EnvironmentPlace(engine=engine.name, run_id=run_id, cache_dir=tmp_path / "cache")
    session = open_container_session(
        task, tmp_path / "rollout" / "workspace", gateway, clients_for(task, provider, replies),
        "scripted", place, kill_policy=KillPolicy(),
    )  # fmt: skip
    container = session.container  # type: ignore[attr-defined]
    try:
        run = session.attempt(
            first_messages(task), index=0, deadline=time.monotonic() + 120, timeout_s=120
        )
        assert run.stop == "answered", (run.stop, run.error)
        said = json.dumps(run.trajectory)
        # the image's own file, by its absolute path and through a link in the workdir
        assert said.count("image-only") >= 2, said[:3000]
        assert "host-only" not in said  # the host's file is not the container's
        [entry] = [e["agent"] for e in run.trajectory if "agent" in e]
        assert isinstance(entry, dict)
        events = entry["events"]
        assert isinstance(events, list)
        reads = [e for e in events if isinstance(e, dict) and e.get("type") == "fs_read"]
        assert {e["path"] for e in reads} == {"/etc/agentbench-marker", "/app/in-link"}
        refused = [e for e in events if isinstance(e, dict) and e.get("type") == "fs_refused"]
        assert {e["path"] for e in refused} == {str(host_secret), str(program)}  # read-only mount
        # the write through the link landed in the container, at the host's path there
        inside = container.exec(["cat", str(host_target)], timeout_s=60)
        assert inside.stdout == "from-agent"
    finally:
        session.close()
    assert host_target.read_text() == "untouched"
    assert program.read_text() == (PROGRAMS / "acp_agent.py").read_text()


def test_claude_code_over_acp_passes_a_harbor_task_in_its_container(
    pytester: pytest.Pytester, engine: Engine
) -> None:
    exe = require_tool("claude-agent-acp")
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed: the Claude Code ACP adapter runs under it")
    command = "echo 42 > /app/answer.txt"
    reply = f'{{ text = "Writing it.", tool_calls = [{shell_call("claude", command)}] }}'
    mounts = [str(agents_dir() / "npm"), str(Path(node).resolve())]
    toml = (
        TASK_TOML
        + f'\n[metadata.agentbench]\nscripted = [{reply}, "Done."]\n'
        + '\n[metadata.agentbench.agent]\nkind = "acp"\n'
        + f"argv = {json.dumps([exe])}\nmounts = {json.dumps(mounts)}\n"
        + 'env = { CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC = "1" }\n'
    )
    write_task(pytester.path / "claude-acp", "claude", toml=toml)
    result = pytester.runpytest_subprocess(
        "--agentbench", "claude-acp", "-p", "no:cacheprovider", "--agentbench-engine", engine.name
    )
    assert result.ret == 0, result.stdout.str()
    run_dir = (pytester.path / "agentbench-results" / "latest").resolve()
    [folder] = (run_dir / "tasks" / "claude-acp").glob("claude*")
    record = json.loads((folder / "result.json").read_text())
    assert record["outcome"] == "passed", record
    trajectory = json.loads((folder / "trajectory.json").read_text())
    [entry] = [e["agent"] for e in trajectory["requests"] if "agent" in e]
    assert entry["agent_info"]["name"] == "@zed-industries/claude-agent-acp"
    assert entry["container"]["engine"] == engine.name
    assert any(e["type"] == "permission" for e in entry["events"])
