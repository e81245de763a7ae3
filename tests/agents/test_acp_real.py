"""Real ACP agents no one here wrote, under test through the gateway, offline: Zed's
Claude Code adapter (npm ``@zed-industries/claude-agent-acp``, Anthropic Messages) and
Codex adapter (``@zed-industries/codex-acp``, OpenAI Responses), each as an ``acp``
agent in a ``pytest --agentbench`` run whose scripted replies play the model. Tasks: a
scripted shell call the agent executes for real (Claude's adapter asks permission first,
answered by the suite's policy), a repair round as a second prompt in the same session,
a scripted loop killed live, a deadline. Found as tests/real_agents_support.py says; skipped with
the reason when not installed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from real_agents_support import agent_tasks, processes_in, require_tool

pytestmark = pytest.mark.slow

CODEX_CONFIG = [
    "-c",
    'model_provider="agentbench"',
    "-c",
    'model_providers.agentbench={name="agentbench",base_url="{base_url}/v1",'
    'env_key="OPENAI_API_KEY",wire_api="responses"}',
    "-c",
    'model="task-model"',
    "-c",
    'sandbox_mode="danger-full-access"',
    "-c",
    'approval_policy="never"',
]


def suite(kind: str, exe: str) -> str:
    if kind == "claude":
        table = (
            f"argv = {json.dumps([exe])}\n"
            'env = { CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC = "1" }'
        )
    else:
        table = f"argv = {json.dumps([exe, *CODEX_CONFIG])}"
    call_kind = "claude" if kind == "claude" else "codex"

    return f"""
[suite]
name = "acp-{kind}"
timeout_s = 120
repairs = 0
verifier = {{ kind = "command", run = "grep -qx hello out.txt" }}

[suite.agent]
kind = "acp"
{table}
{agent_tasks(call_kind)}"""


def run_suite(pytester: pytest.Pytester, kind: str, exe: str) -> dict[str, dict[str, Any]]:
    pytester.makefile(".toml", **{f"bench_acp_{kind}": suite(kind, exe)})
    result = pytester.runpytest_subprocess(
        "--agentbench", "-p", "no:cacheprovider", "--agentbench-concurrency", "4"
    )
    assert result.ret == 1, result.stdout.str()
    tasks = (pytester.path / "agentbench-results" / "latest").resolve() / "tasks" / f"acp-{kind}"
    found: dict[str, dict[str, Any]] = {}
    for folder in tasks.iterdir():
        found[folder.name.split("[")[0]] = {
            "dir": folder,
            "result": json.loads((folder / "result.json").read_text()),
            "trajectory": json.loads((folder / "trajectory.json").read_text()),
        }
    return found


def agent_entries(task: dict[str, Any]) -> list[dict[str, Any]]:
    return [e["agent"] for e in task["trajectory"]["requests"] if "agent" in e]


def check_run(tasks: dict[str, dict[str, Any]], protocol: str, adapter: str) -> None:
    done = tasks["tool-call"]
    assert done["result"]["outcome"] == "passed", done["result"]["error"]
    assert (Path(done["dir"]) / "workspace" / "out.txt").read_text() == "hello\n"
    [agent] = agent_entries(done)
    assert agent["kind"] == "acp" and agent["stop_reason"] == "end_turn"
    assert agent["agent_info"]["name"] == adapter
    calls = [e for e in done["trajectory"]["requests"] if "protocol" in e]
    assert len(calls) >= 2 and {c["protocol"] for c in calls} == {protocol}
    kinds = [event["type"] for event in agent["events"]]
    assert "tool_call" in kinds and "message" in kinds
    usage = done["result"]["usage"]
    assert usage["input"] > 0 and usage["output"] > 0

    repaired = tasks["repaired"]
    assert repaired["result"]["outcome"] == "passed", repaired["result"]["error"]
    first, second = agent_entries(repaired)
    assert first["session_id"] == second["session_id"]  # the second prompt, same session

    loop = tasks["loop"]["result"]
    assert loop["outcome"] == "loop_killed", loop["error"]
    late = tasks["deadline"]["result"]
    assert late["outcome"] == "timeout", late["error"]
    for task in tasks.values():
        assert processes_in(Path(task["dir"]) / "workspace") == []


def test_claude_code_over_acp(pytester: pytest.Pytester) -> None:
    exe = require_tool("claude-agent-acp")
    tasks = run_suite(pytester, "claude", exe)
    check_run(tasks, "messages", "@zed-industries/claude-agent-acp")
    # its Bash call asked for permission, and the 'allow' policy answered
    [agent] = agent_entries(tasks["tool-call"])
    permission = next(e for e in agent["events"] if e["type"] == "permission")
    assert permission["policy"] == "allow" and permission["decision"].startswith("allow")
    assert agent["reported"]["usage"]["outputTokens"] > 0  # the adapter's own count


def test_codex_over_acp(pytester: pytest.Pytester) -> None:
    exe = require_tool("codex-acp")
    check_run(run_suite(pytester, "codex", exe), "responses", "codex-acp")
