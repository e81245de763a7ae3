"""Agents no one here wrote, under test through the gateway, offline: the real Claude Code
CLI (Anthropic Messages), the real Codex CLI (OpenAI Responses) and an OpenAI Agents SDK
program (Chat Completions), each a ``pytest --agentbench`` run (pytester) of a suite whose
scripted replies play the agent's model. Each run holds four tasks:

- a scripted tool call the agent really executes in its sandboxed workspace, judged by a
  ``command`` verifier, with usage counted by the gateway;
- a repair round that continues the agent's own session (``resume_argv`` / a second call);
- a scripted loop in the model's stream, killed live with the agent's process group;
- a deadline: the model never answers, the task times out and the agent is ended.

Claude Code runs once more against an ``openai-compat`` model (Chat Completions only):
the gateway translates its Messages calls.

The agents are found as tests/real_agents_support.py says (``.ci/install-agents`` installs them);
a missing one skips its test with the reason. The suites are the ones docs/agents-external.md
shows, with the executable's path filled in.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from real_agents_support import (
    agent_tasks,
    copy_programs,
    processes_in,
    require_agents_python,
    require_tool,
    version,
)

from pytest_agentbench import schemas

pytestmark = pytest.mark.slow

CLAUDE_ARGS = '"--allowedTools", "Bash", "--output-format", "json"'
PROVIDER = (
    '"-c", "sandbox_mode=\\"danger-full-access\\"", "-c", "model_provider=\\"agentbench\\"", '
    '"-c", "model_providers.agentbench={name=\\"agentbench\\",base_url=\\"{base_url}/v1\\",'
    'env_key=\\"OPENAI_API_KEY\\",wire_api=\\"responses\\"}", "-m", "task-model"'
)


def agent_table(kind: str, exe: str) -> str:
    if kind == "claude":
        return f"""
[suite.agent]
kind = "command"
argv = ["{exe}", "-p", "{{prompt}}", {CLAUDE_ARGS}]
resume_argv = ["{exe}", "-p", "{{prompt}}", "--continue", {CLAUDE_ARGS}]
env = {{ CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC = "1" }}
"""
    if kind == "codex":
        return f"""
[suite.agent]
kind = "command"
argv = ["{exe}", "exec", "--skip-git-repo-check", {PROVIDER}, "{{prompt}}"]
resume_argv = [
  "{exe}", "exec", "resume", "--last", "--skip-git-repo-check", {PROVIDER}, "{{prompt}}"
]
"""
    program = "{suite_dir}/agents/agents_sdk_agent.py"
    return f"""
[suite.agent]
kind = "command"
argv = ["{exe}", "{program}", "{{prompt}}"]
resume_argv = ["{exe}", "{program}", "--resume", "{{prompt}}"]
"""


def suite(kind: str, exe: str) -> str:
    return f"""
[suite]
name = "real-{kind}"
timeout_s = 120
repairs = 0
verifier = {{ kind = "command", run = "grep -qx hello out.txt" }}
{agent_table(kind, exe)}
{agent_tasks(kind)}"""


def run_suite(pytester: pytest.Pytester, kind: str, exe: str) -> dict[str, dict[str, Any]]:
    copy_programs(pytester.path)
    pytester.makefile(".toml", **{f"bench_real_{kind}": suite(kind, exe)})
    result = pytester.runpytest_subprocess(
        "--agentbench", "-p", "no:cacheprovider", "--agentbench-concurrency", "4"
    )
    assert result.ret == 1, result.stdout.str()  # the loop and the deadline fail on purpose
    tasks = (pytester.path / "agentbench-results" / "latest").resolve() / "tasks" / f"real-{kind}"
    found = {}
    for folder in tasks.iterdir():
        found[folder.name.split("[")[0]] = {
            "dir": folder,
            "result": json.loads((folder / "result.json").read_text()),
            "trajectory": json.loads((folder / "trajectory.json").read_text()),
        }
    return found


def agent_entries(task: dict[str, Any]) -> list[dict[str, Any]]:
    return [e["agent"] for e in task["trajectory"]["requests"] if "agent" in e]


def relayed(task: dict[str, Any]) -> list[dict[str, Any]]:
    return [e for e in task["trajectory"]["requests"] if "protocol" in e]


def check_run(tasks: dict[str, dict[str, Any]], protocol: str) -> None:
    done = tasks["tool-call"]
    assert done["result"]["outcome"] == "passed", done["result"]["error"]
    # the scripted tool call ran for real, in the agent's sandboxed workspace
    assert (done["dir"] / "workspace" / "out.txt").read_text() == "hello\n"
    calls = relayed(done)
    assert len(calls) == 2 and {c["protocol"] for c in calls} == {protocol}
    usage = done["result"]["usage"]
    assert usage["input"] > 0 and usage["output"] > 0  # counted by the gateway, live
    assert usage["input"] == sum(c["usage"]["input"] for c in calls)
    [agent] = agent_entries(done)
    assert agent["exit_code"] == 0 and agent["model_calls"] == 2

    repaired = tasks["repaired"]["result"]
    assert repaired["outcome"] == "passed" and repaired["repaired"] is True
    assert repaired["attempts_used"] == 2
    second = agent_entries(tasks["repaired"])[-1]
    assert second["argv"] != agent_entries(tasks["repaired"])[0]["argv"]  # the resume line

    loop = tasks["loop"]["result"]
    assert loop["outcome"] == "loop_killed", loop["error"]
    assert loop["error"].startswith("agent killed: loop in the model's stream")
    assert agent_entries(tasks["loop"])[0]["stopped"] == "loop_killed"

    late = tasks["deadline"]["result"]
    assert late["outcome"] == "timeout", late["error"]
    assert late["error"].startswith("agent timed out after 12 s")

    for task in tasks.values():  # nothing of any agent outlives its task
        assert processes_in(task["dir"] / "workspace") == []


def test_claude_code(pytester: pytest.Pytester, record_property: Any) -> None:
    exe = require_tool("claude")
    record_property("agent_version", version([exe]))
    tasks = run_suite(pytester, "claude", exe)
    check_run(tasks, "messages")
    # Claude Code reports its own usage (--output-format json): recorded beside ours
    [agent] = agent_entries(tasks["tool-call"])
    assert (
        agent["reported"]["usage"]["input_tokens"] == tasks["tool-call"]["result"]["usage"]["input"]
    )
    assert agent["usage_disagreement"] is None


def test_codex(pytester: pytest.Pytester, record_property: Any) -> None:
    exe = require_tool("codex")
    record_property("agent_version", version([exe]))
    check_run(run_suite(pytester, "codex", exe), "responses")


def test_openai_agents_sdk(pytester: pytest.Pytester) -> None:
    python = require_agents_python()
    check_run(run_suite(pytester, "sdk", python), "chat")


def run_translated(
    pytester: pytest.Pytester, kind: str, exe: str, model: str, call: dict[str, Any]
) -> list[dict[str, Any]]:
    """One task whose model (``model``, served by a scripted server named as its base
    URL) does not speak the agent's protocol: the scripted tool ``call`` writes out.txt.
    The task passes; the gateway's records of the model calls are returned."""
    from pytest_agentbench.scripted.server import ScriptedServer

    copy_programs(pytester.path)
    server = ScriptedServer()
    url = server.start()
    server.set_default([{"text": "Writing it.", "tool_calls": [call]}, "Done: hello."])
    pytester.makefile(
        ".toml",
        bench_translated=f"""
[suite]
name = "translated"
timeout_s = 120
verifier = {{ kind = "command", run = "grep -qx hello out.txt" }}
{agent_table(kind, exe)}
[[task]]
id = "tool-call"
input = "Create out.txt holding hello."
""",
    )
    try:
        result = pytester.runpytest_subprocess(
            "--agentbench",
            "-p",
            "no:cacheprovider",
            "--agentbench-model",
            model,
            "--agentbench-base-url",
            url,
        )
        paths = {r["path"] for r in server.requests}
    finally:
        server.stop()
    assert result.ret == 0, result.stdout.str()
    tasks = (pytester.path / "agentbench-results" / "latest").resolve() / "tasks" / "translated"
    (folder,) = tasks.iterdir()
    assert (folder / "workspace" / "out.txt").read_text() == "hello\n"
    trajectory = json.loads((folder / "trajectory.json").read_text())
    schemas.validate("trajectory", trajectory)  # translated, dropped_tools included
    calls = [e for e in trajectory["requests"] if "protocol" in e]
    assert len(calls) >= 2 and all(c["usage"]["input"] > 0 for c in calls)
    # the model's server saw its own protocol only
    assert paths == {"/v1/chat/completions" if model.startswith("openai") else "/v1/messages"}
    return calls


def test_claude_code_through_protocol_translation(pytester: pytest.Pytester) -> None:
    """Claude Code (Anthropic Messages) against an OpenAI-compatible server that speaks
    Chat Completions only (``openai-compat``): the gateway translates each call both
    ways, and the scripted tool call still runs for real in the agent's workspace."""
    exe = require_tool("claude")
    bash = {"name": "Bash", "arguments": {"command": "echo hello > out.txt", "description": "run"}}
    calls = run_translated(pytester, "claude", exe, "openai-compat/anything", bash)
    assert {c["translated"] for c in calls} == {"messages→chat"}


def test_codex_through_protocol_translation(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Codex (OpenAI Responses) against an Anthropic model (Messages only): translated;
    its built-in ``web_search`` tool and its tool namespace are not offered to the model,
    and the call records say so."""
    exe = require_tool("codex")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    shell = {"name": "exec_command", "arguments": {"cmd": "echo hello > out.txt"}}
    calls = run_translated(pytester, "codex", exe, "anthropic/anything", shell)
    assert {c["translated"] for c in calls} == {"responses→messages"}
    assert "web_search" in calls[0]["dropped_tools"]
