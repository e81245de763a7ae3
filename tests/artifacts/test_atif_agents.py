"""``export atif`` of the agent kinds the first run of tests/artifacts/test_atif.py does
not have, and of a judged task: an ACP agent (tests/agent_programs/acp_agent.py over
stdio) and a Python agent, each through the real gateway in the sandbox, and a task a
scripted judge grades, whose calls are the judge's and not the agent's steps."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from real_agents_support import copy_programs

from pytest_agentbench import schemas
from pytest_agentbench.__main__ import main

AGENTS = """
[suite]
name = "kinds"
timeout_s = 60
repairs = 0
verifier = { kind = "command", run = "grep -qx hello out.txt" }

[[task]]
id = "acp"
input = "Create out.txt holding hello."
agent = { kind = "acp", argv = ["{python}", "{suite_dir}/agents/acp_agent.py"] }
scripted = [
  { tool_calls = [{ id = "c1", name = "bash", arguments = { command = "echo hello > out.txt" } }] },
  "Done: out.txt holds hello.",
]

[[task]]
id = "python"
input = "Say hello."
agent = { kind = "python", function = "my_agent:solve" }
scripted = ["hello"]
"""
PYTHON_AGENT = """
import json
import urllib.request


def solve(task, workspace, base_url, key):
    body = json.dumps({"model": "any", "messages": [{"role": "user", "content": task.prompt}]})
    request = urllib.request.Request(
        base_url + "/v1/chat/completions",
        data=body.encode(),
        headers={"content-type": "application/json", "authorization": "Bearer " + key},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        answer = json.loads(response.read())["choices"][0]["message"]["content"]
    (workspace / "out.txt").write_text(answer + "\\n")
    return "wrote " + answer
"""
JUDGED = """
[suite]
name = "judged"
verifier = { kind = "judge", rubric = "A good reply names the 30-day refund window." }

[[task]]
id = "refund"
input = "Can I still return my headphones after 20 days?"
[[task.scripted]]
text = "Yes, within our 30-day window."
usage = { prompt_tokens = 40, completion_tokens = 9 }
[task.verifier]
scripted_judge = [
  { includes = "30-day", reply = { rationale = "Names the window.", verdict = "pass" } },
]
"""


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("atif-agents")
    copy_programs(folder)
    (folder / "bench_kinds.toml").write_text(AGENTS)
    (folder / "bench_judged.toml").write_text(JUDGED)
    (folder / "my_agent.py").write_text(PYTHON_AGENT)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--agentbench", "-p", "no:cacheprovider", "-q"],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert "3 passed" in done.stdout, done.stdout[-3000:] + done.stderr[-3000:]
    run = (folder / "agentbench-results" / "latest").resolve()
    assert main(["export", "atif", str(run)]) == 0
    return run / "atif"


def _read(path: Path) -> dict[str, object]:
    data = json.loads(path.read_text())
    schemas.validate("atif", data)
    return dict(data)


def _steps(data: dict[str, object]) -> list[dict[str, object]]:
    return list(data["steps"])  # type: ignore[call-overload]


def _own(step: dict[str, object]) -> dict[str, object]:
    return dict(step["extra"]["agentbench"])  # type: ignore[index]


def test_an_acp_agent_exports_its_gateway_calls_and_its_process(exported: Path) -> None:
    data = _read(exported / "kinds" / "acp[scripted].atif.json")
    assert data["agent"]["name"] == "pytest-agentbench (acp agent)"  # type: ignore[index]
    steps = _steps(data)
    assert [s["source"] for s in steps] == ["user", "agent", "agent", "system"]
    assert steps[1]["tool_calls"][0]["function_name"] == "bash"  # type: ignore[index]
    assert steps[2]["message"] == "Done: out.txt holds hello."
    assert all(_own(s)["protocol"] == "chat" for s in steps[1:3])
    ended = _own(steps[3])["agent"]
    assert ended["kind"] == "acp" and ended["model_calls"] == 2  # type: ignore[index]
    assert str(steps[3]["message"]).startswith("acp agent ended: ")
    assert data["extra"]["agentbench"]["outcome"] == "passed"  # type: ignore[index]


def test_a_python_agent_exports_its_gateway_call_and_its_return(exported: Path) -> None:
    data = _read(exported / "kinds" / "python[scripted].atif.json")
    assert data["agent"]["name"] == "pytest-agentbench (python agent)"  # type: ignore[index]
    steps = _steps(data)
    assert [s["source"] for s in steps] == ["user", "agent", "system"]
    assert steps[0]["message"] == "Say hello." and steps[1]["message"] == "hello"
    assert steps[2]["message"] == "python agent ended: exit code 0, 1 model call(s)"
    # the gateway's record of the process, as it was (a python agent runs as a command)
    assert _own(steps[2])["agent"]["model_calls"] == 1  # type: ignore[index]


def test_a_judges_calls_are_apart_from_the_agents_steps(exported: Path) -> None:
    data = _read(exported / "judged" / "refund[scripted].atif.json")
    steps = _steps(data)
    # the model's one call is the one agent step; the judge's call is not a step, and its
    # usage is in the judge's record, not in the rollout's totals
    assert [s["source"] for s in steps] == ["user", "agent"]
    assert steps[1]["metrics"] == {"prompt_tokens": 40, "completion_tokens": 9}
    final = data["final_metrics"]
    assert final["total_prompt_tokens"] == 40  # type: ignore[index]
    assert final["total_completion_tokens"] == 9  # type: ignore[index]
    judge = data["extra"]["agentbench"]["judge"]  # type: ignore[index]
    assert judge["calls"] == 1 and judge["usage"]["input"] > 40
