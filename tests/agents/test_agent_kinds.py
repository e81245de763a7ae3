"""The ``acp`` and ``python`` agent kinds end to end: ``pytest --agentbench`` runs
(pytester, a real subprocess) whose agents are ours but foreign to the plugin — an ACP
agent speaking the protocol over stdio (tests/agent_programs/acp_agent.py) and a Python
function — each reaching the scripted model through the real gateway, in the sandbox."""

from __future__ import annotations

import json
from typing import Any

import pytest
from real_agents_support import copy_programs

pytestmark = pytest.mark.slow


def run(pytester: pytest.Pytester, name: str, body: str) -> dict[str, dict[str, Any]]:
    copy_programs(pytester.path)
    pytester.makefile(".toml", **{f"bench_{name}": body})
    result = pytester.runpytest_subprocess("--agentbench", "-p", "no:cacheprovider")
    assert result.ret in (0, 1), result.stdout.str() + result.stderr.str()
    tasks = (pytester.path / "agentbench-results" / "latest").resolve() / "tasks" / name
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


def bash(command: str, call_id: str) -> str:
    return (
        f'{{ tool_calls = [{{ id = "{call_id}", name = "bash", '
        f"arguments = {{ command = {json.dumps(command)} }} }}] }}"
    )


WRITE = '{ id = "c2", name = "write_file", arguments = { path = "notes.txt", content = "kept" } }'
ARGV = json.dumps(["{python}", "{suite_dir}/agents/acp_agent.py"])
ACP_SUITE = f"""
[suite]
name = "acp"
timeout_s = 60
repairs = 0
verifier = {{ kind = "command", run = "grep -qx hello out.txt" }}

[suite.agent]
kind = "acp"
argv = {ARGV}

[[task]]
id = "tools"
input = "Create out.txt holding hello."
scripted = [
  {bash("echo hello > out.txt", "c1")},
  {{ tool_calls = [{WRITE}] }},
  {{ tool_calls = [{{ id = "c3", name = "read_file", arguments = {{ path = "out.txt" }} }}] }},
  "Done: out.txt holds hello.",
]

[[task]]
id = "repaired"
input = "Create out.txt holding hello."
repairs = 1
scripted = [
  {bash("echo wrong > out.txt", "c1")}, "Done.", {bash("echo hello > out.txt", "c2")}, "Fixed.",
]

[[task]]
id = "rejected"
input = "Create out.txt holding hello."
agent = {{ kind = "acp", permissions = "reject", argv = {ARGV} }}
scripted = [{bash("echo hello > out.txt", "c1")}, "Could not."]

[[task]]
id = "loop"
input = "Explain."

[[task.scripted]]
text = "Let me think about this again. "
repeat = 4000
chunk_size = 31
chunk_delay_s = 0.0005

[[task]]
id = "deadline"
input = "Explain."
timeout_s = 5
scripted = [{{ hang = true }}]
"""


def test_an_acp_agent_through_the_gateway(pytester: pytest.Pytester) -> None:
    tasks = run(pytester, "acp", ACP_SUITE)

    done = tasks["tools"]
    assert done["result"]["outcome"] == "passed", done["result"]["error"]
    workspace = done["dir"] / "workspace"
    assert (workspace / "out.txt").read_text() == "hello\n"  # the agent's own shell call
    assert (workspace / "notes.txt").read_text() == "kept"  # through fs/write_text_file
    [agent] = agent_entries(done)
    assert agent["kind"] == "acp" and agent["stop_reason"] == "end_turn"
    assert agent["agent_info"]["name"] == "stand-in-acp-agent" and agent["model_calls"] == 4
    kinds = [event["type"] for event in agent["events"]]
    for kind in ("session", "prompt", "plan", "tool_call", "permission", "fs_write", "fs_read"):
        assert kind in kinds, kind
    assert agent["reported"]["usage"]["outputTokens"] > 0  # the agent's own count …
    usage = done["result"]["usage"]
    assert usage["input"] > 0 and usage["output"] > 0  # … and the gateway's, live
    assert agent["usage_disagreement"] is None  # this agent sums the gateway's replies

    repaired = tasks["repaired"]
    assert repaired["result"]["outcome"] == "passed" and repaired["result"]["repaired"]
    first, second = agent_entries(repaired)
    assert first["session_id"] == second["session_id"]  # the repair went on in its session
    assert second["events"][0]["type"] == "prompt"
    assert "Feedback: The check scored 0" in second["events"][0]["text"]

    rejected = tasks["rejected"]
    assert rejected["result"]["outcome"] == "failed"
    assert not (rejected["dir"] / "workspace" / "out.txt").exists()
    [agent] = agent_entries(rejected)
    permission = next(e for e in agent["events"] if e["type"] == "permission")
    assert permission["policy"] == "reject" and permission["decision"] == "no"

    loop = tasks["loop"]["result"]
    assert loop["outcome"] == "loop_killed", loop["error"]
    assert loop["error"].startswith("agent killed: loop in the model's stream")

    late = tasks["deadline"]["result"]
    assert late["outcome"] == "timeout", late["error"]
    assert late["error"].startswith("agent timed out after 5 s")


PYTHON_AGENT = """
import json
import urllib.request


def ask(base_url, key, text):
    body = json.dumps({"model": "any", "messages": [{"role": "user", "content": text}]})
    request = urllib.request.Request(
        base_url + "/v1/chat/completions",
        data=body.encode(),
        headers={"content-type": "application/json", "authorization": "Bearer " + key},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())["choices"][0]["message"]["content"]


def solve(task, workspace, base_url, key):
    print("this goes to stderr, not into the answer")
    text = task.feedback if task.attempt else task.prompt
    answer = ask(base_url, key, text)
    (workspace / "out.txt").write_text(answer + "\\n")
    (workspace / f"attempt{task.attempt}.json").write_text(
        json.dumps({"id": task.id, "suite": task.suite, "feedback": task.feedback})
    )
    return "wrote " + answer


def broken(task, workspace, base_url, key):
    raise RuntimeError("the agent's own bug")
"""


def test_a_python_agent_through_the_gateway(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(my_agent=PYTHON_AGENT)
    tasks = run(
        pytester,
        "py",
        """
[suite]
name = "py"
timeout_s = 60
repairs = 1
agent = { kind = "python", function = "my_agent:solve" }
verifier = { kind = "command", run = "grep -qx hello out.txt" }

[[task]]
id = "repaired"
input = "Say hello."
scripted = ["wrong", "hello"]

[[task]]
id = "broken"
input = "Say hello."
repairs = 0
agent = { kind = "python", function = "my_agent:broken" }
scripted = ["hello"]
""",
    )
    repaired = tasks["repaired"]
    result = repaired["result"]
    assert result["outcome"] == "passed" and result["repaired"], result["error"]
    assert result["attempts"][-1]["answer"] == "wrote hello"  # the return value, not prints
    workspace = repaired["dir"] / "workspace"
    first = json.loads((workspace / "attempt0.json").read_text())
    second = json.loads((workspace / "attempt1.json").read_text())
    assert first == {"id": "repaired", "suite": "py", "feedback": None}
    assert "Feedback: The check scored 0" in second["feedback"]
    assert result["usage"]["input"] > 0  # counted by the gateway
    agents = agent_entries(repaired)
    assert "this goes to stderr" in agents[0]["stderr"]

    broken = tasks["broken"]["result"]
    assert broken["outcome"] == "failed"
    assert broken["error"].startswith("agent exited 1: RuntimeError: the agent's own bug")


FIXTURE_TESTS = '''
import json
import os
import subprocess
import sys

import pytest
from openai import OpenAI

AGENT = """
import json, os, urllib.request
body = {"model": "m", "messages": [{"role": "user", "content": "and you?"}]}
request = urllib.request.Request(os.environ["OPENAI_BASE_URL"] + "/chat/completions",
    data=json.dumps(body).encode(), headers={"content-type": "application/json",
    "authorization": "Bearer " + os.environ["OPENAI_API_KEY"]})
print(json.loads(urllib.request.urlopen(request).read())["choices"][0]["message"]["content"])
"""


@pytest.mark.agentbench_scripted(
    {"text": "in-process", "usage": {"prompt_tokens": 30, "completion_tokens": 2}},
    {"text": "subprocess", "usage": {"prompt_tokens": 12, "completion_tokens": 1}},
)
def test_my_agent(agentbench_model):
    endpoint = agentbench_model.endpoint()
    assert endpoint.key.startswith("agb-")  # a stand-in, never the real key
    client = OpenAI(base_url=endpoint.base_url + "/v1", api_key=endpoint.key, max_retries=0)
    reply = client.chat.completions.create(
        model="any", messages=[{"role": "user", "content": "hello"}]
    )
    assert reply.choices[0].message.content == "in-process"
    env = {"PATH": os.environ["PATH"], **endpoint.environment()}
    out = subprocess.run([sys.executable, "-c", AGENT], env=env, capture_output=True,
                         text=True, check=True).stdout
    assert out.strip() == "subprocess"


@pytest.mark.agentbench_scripted({"text": "Let me check that once more. ", "repeat": 4000,
                                  "chunk_size": 29, "chunk_delay_s": 0.0005})
def test_my_looping_agent(agentbench_model):
    endpoint = agentbench_model.endpoint()
    client = OpenAI(base_url=endpoint.base_url + "/v1", api_key=endpoint.key, max_retries=0)
    stream = client.chat.completions.create(
        model="any", messages=[{"role": "user", "content": "go"}], stream=True
    )
    text = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
    assert "done" in text
'''


def test_agents_in_ordinary_tests_reach_the_gateway_through_the_fixture(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_fixture_agents=FIXTURE_TESTS)
    result = pytester.runpytest_subprocess("--agentbench", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=1)
    summary = json.loads(
        (pytester.path / "agentbench-results" / "latest" / "summary.json").read_text()
    )
    records = {t["task_id"]: t for t in summary["tasks"]}
    mine = records["test_my_agent"]
    assert mine["outcome"] == "passed"
    # both calls, in-process and from the subprocess, counted into the test's record
    assert (mine["usage"]["input"], mine["usage"]["output"]) == (42, 3)
    looping = records["test_my_looping_agent"]
    assert looping["outcome"] == "loop_killed", looping
    assert looping["failure"]["message"].startswith("agent killed: loop in the model's stream")


def test_acp_and_python_agents_in_the_strict_sandbox(pytester: pytest.Pytester) -> None:
    """Under ``strict`` the agents have no network but the bridge to their gateway route:
    the ACP agent's shell call and the Python agent's model call still work, and the
    record says the network was the gateway only."""
    from pytest_agentbench.sandbox.isolation import containment

    if containment("auto")["level"] != "strong":
        pytest.skip("strict needs bubblewrap: " + str(containment("auto")["detail"]))
    pytester.makepyfile(my_agent=PYTHON_AGENT)
    copy_programs(pytester.path)
    pytester.makefile(
        ".toml",
        bench_strict=f"""
[suite]
name = "strict"
timeout_s = 60
verifier = {{ kind = "command", run = "grep -qx hello out.txt" }}

[[task]]
id = "acp"
input = "Create out.txt holding hello."
agent = {{ kind = "acp", argv = {ARGV} }}
scripted = [{bash("echo hello > out.txt", "c1")}, "Done."]

[[task]]
id = "python"
input = "Say hello."
agent = {{ kind = "python", function = "my_agent:solve" }}
scripted = ["hello"]
""",
    )
    result = pytester.runpytest_subprocess(
        "--agentbench", "-p", "no:cacheprovider", "--agentbench-sandbox", "strict"
    )
    assert result.ret == 0, result.stdout.str()
    tasks = (pytester.path / "agentbench-results" / "latest").resolve() / "tasks" / "strict"
    for folder in tasks.iterdir():
        entries = json.loads((folder / "trajectory.json").read_text())["requests"]
        [agent] = [e["agent"] for e in entries if "agent" in e]
        assert agent["network"] == "gateway only", folder.name
