"""The ACP client (agents/acp.py) against an ACP agent of our own (tests/agent_programs/
acp_agent.py, standard library only) that asks the scripted provider for its model: a real
subprocess in the sandbox, real pipes, real HTTP. The gateway is not involved here; the
agent's endpoint is the scripted provider itself."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from pytest_agentbench.agents.acp import AcpClient
from pytest_agentbench.agents.acp_process import AcpAgent
from pytest_agentbench.agents.acp_rpc import AcpError
from pytest_agentbench.agents.endpoint import AgentEndpoint
from pytest_agentbench.sandbox.isolation import plan_for
from pytest_agentbench.sandbox.process import Limits, sandbox_env
from pytest_agentbench.scripted import ScriptedServer

AGENT = Path(__file__).parents[1] / "agent_programs" / "acp_agent.py"


def _endpoint_env(url: str, workspace: Path, model: str) -> dict[str, str]:
    base = url.removesuffix("/v1")
    env = sandbox_env(workspace, {"AGENT_MODEL": model})
    return env | AgentEndpoint(base, "sk-stand-in-for-this-task").environment()


def _agent(
    server: ScriptedServer, tmp_path: Path, model: str, *, policy: str = "allow"
) -> tuple[AcpAgent, Path]:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    agent = AcpAgent(
        [sys.executable, "-I", str(AGENT)],
        workspace=workspace,
        env=_endpoint_env(server.url, workspace, model),
        limits=Limits(timeout_s=60, cpu_s=60),
        plan=plan_for("basic"),  # the scripted provider is on loopback: the network is needed
        policy=policy,
    )
    return agent, workspace


def _types(client: AcpClient) -> list[object]:
    return [event.get("type") for event in client.events]


def test_a_prompt_runs_tools_for_real_and_a_second_prompt_continues_the_session(
    tmp_path: Path,
) -> None:
    script = [
        {
            "text": "Making it.",
            "tool_calls": [
                {"id": "c1", "name": "bash", "arguments": {"command": "echo made > made.txt"}}
            ],
        },
        {
            "tool_calls": [
                {
                    "id": "c2",
                    "name": "write_file",
                    "arguments": {"path": "notes/a.txt", "content": "note"},
                }
            ]
        },
        {"tool_calls": [{"id": "c3", "name": "read_file", "arguments": {"path": "made.txt"}}]},
        "All done.",
        "Fixed after feedback.",
    ]
    with ScriptedServer({"acp-task": script}) as server:
        agent, workspace = _agent(server, tmp_path, "acp-task")
        deadline = time.monotonic() + 60
        client = agent.start(deadline)
        first = agent.prompt("Make made.txt", deadline)
        second = agent.prompt("The verifier says: try again", deadline)
        result = agent.stop()
        requests = server.requests
    assert (workspace / "made.txt").read_text() == "made\n"  # the agent's bash ran for real
    assert (workspace / "notes" / "a.txt").read_text() == "note"  # through fs/write_text_file
    assert first.stop_reason == "end_turn" and first.text == "Making it.All done."
    assert second.text == "Fixed after feedback."
    assert first.agent_usage is not None and first.agent_usage["outputTokens"] > 0
    assert client.agent_info["name"] == "stand-in-acp-agent"
    types = _types(client)
    for kind in (
        "session",
        "prompt",
        "plan",
        "tool_call",
        "permission",
        "fs_write",
        "fs_read",
        "message",
        "prompt_end",
    ):
        assert kind in types, kind
    permission = next(e for e in client.events if e["type"] == "permission")
    assert permission["decision"] == "yes" and permission["title"] == "echo made > made.txt"
    read = next(e for e in client.events if e["type"] == "fs_read")
    assert read["path"] == "made.txt" and read["chars"] == 5
    assert len(client.tool_calls) == 3
    # the repair prompt went on in the same conversation: its request holds the first one
    last = requests[-1]["body"]
    assert isinstance(last, dict)
    contents = [m.get("content") for m in last["messages"]]
    assert "Make made.txt" in contents and "The verifier says: try again" in contents
    assert result.exit_code == 0 and result.killed_by is None  # it exited at the end of its input


def test_the_reject_policy_keeps_the_command_from_running(tmp_path: Path) -> None:
    script = [
        {"tool_calls": [{"name": "bash", "arguments": {"command": "echo x > made.txt"}}]},
        "Gave up.",
    ]
    with ScriptedServer({"acp-reject": script}) as server:
        agent, workspace = _agent(server, tmp_path, "acp-reject", policy="reject")
        deadline = time.monotonic() + 60
        client = agent.start(deadline)
        agent.prompt("Make made.txt", deadline)
        agent.stop()
    assert not (workspace / "made.txt").exists()
    permission = next(e for e in client.events if e["type"] == "permission")
    assert permission["decision"] == "no" and permission["policy"] == "reject"
    update = [e for e in client.events if e["type"] == "tool_call_update"]
    assert "permission refused" in str(update[-1]["output"])


def test_file_requests_stay_inside_the_workspace(tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("secret")
    script = [
        {
            "tool_calls": [
                {"name": "write_file", "arguments": {"path": "../escaped.txt", "content": "x"}}
            ]
        },
        {"tool_calls": [{"name": "read_file", "arguments": {"path": str(outside)}}]},
        {
            "tool_calls": [
                {"name": "write_file", "arguments": {"path": "inside.txt", "content": "ok"}}
            ]
        },
        "Done.",
    ]
    with ScriptedServer({"acp-fs": script}) as server:
        agent, workspace = _agent(server, tmp_path, "acp-fs")
        os.symlink(outside, workspace / "link.txt")
        deadline = time.monotonic() + 60
        client = agent.start(deadline)
        agent.prompt("Try to leave", deadline)
        agent.stop()
        bodies = [r["body"] for r in server.requests]
    assert not (tmp_path / "escaped.txt").exists()
    assert (workspace / "inside.txt").read_text() == "ok"
    refused = [e for e in client.events if e["type"] == "fs_refused"]
    assert [e["method"] for e in refused] == ["fs/write_text_file", "fs/read_text_file"]
    # what the model saw of the refused read: an error, never the file's text
    assert "secret" not in str(bodies[-1])


def test_a_prompt_past_its_deadline_is_cancelled_and_the_agent_says_so(
    tmp_path: Path,
) -> None:
    # the last reply repeats: the agent keeps calling a slow tool until it is cancelled
    script = [{"tool_calls": [{"name": "bash", "arguments": {"command": "sleep 0.2"}}]}]
    with ScriptedServer({"acp-slow": script}) as server:
        agent, _ = _agent(server, tmp_path, "acp-slow")
        client = agent.start(time.monotonic() + 60)
        result = agent.prompt("Never finish", time.monotonic() + 1.0)
        ended = agent.stop("timeout")
    assert result.timed_out and result.stop_reason == "cancelled"
    assert "cancel" in _types(client)
    assert ended.killed_by in (None, "timeout")
    assert agent.command is not None and agent.command.proc.poll() is not None


def test_an_agent_that_dies_is_a_clear_error(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    agent = AcpAgent(
        [sys.executable, "-I", "-c", "import sys; sys.stderr.write('no model configured\\n')"],
        workspace=workspace,
        env=sandbox_env(workspace),
        limits=Limits(timeout_s=30),
        plan=plan_for("basic"),
    )
    with pytest.raises(AcpError, match="the agent is gone"):
        agent.start(time.monotonic() + 30)
    ended = agent.stop()
    assert "no model configured" in ended.stderr
    assert ended.exit_code == 0


def test_an_unknown_policy_is_refused(tmp_path: Path) -> None:
    with (
        open(os.devnull, "wb") as sink,
        open(os.devnull, "rb") as source,
        pytest.raises(AcpError, match="unknown ACP permission policy 'maybe'"),
    ):
        AcpClient(sink, source, workspace=tmp_path, policy="maybe")
