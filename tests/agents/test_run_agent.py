"""The run-wide agent under test, ``--agentbench-agent FILE``: real ``pytest --agentbench``
runs (pytester, subprocess) of the example stand-in agent named by a file outside the
suite. It runs every agent task naming no agent of its own; a task's own agent wins; the
record says which ran and from where; resume never mixes records of another agent; a
bad file is one clear usage error naming the file and the key."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from pytest_agentbench.schemas import validate

ROOT = Path(__file__).resolve().parents[2]
STANDIN = ROOT / "example_suites" / "agents" / "standin_agent.py"
GREET_TESTS = (
    "from greet import greet\\ndef test_greet():\\n    assert greet('Ada') == 'Hello, Ada!'\\n"
)
WRITE_GREETING = (
    '{ text = "Writing.", tool_calls = [{ name = "write_file", arguments = { path = "greet.py", '
    "content = \"def greet(name):\\n    return 'Hello, ' + name + '!'\\n\" } }] }"
)
#: The suite: one agent task with no agent (the run-wide one runs it), one naming its own
#: (it prints "own"; were the run-wide stand-in run instead it would answer "run-wide").
SUITE = f"""
[suite]
name = "plain"
mode = "agent"
timeout_s = 60

[[task]]
id = "greet"
input = "Create greet.py with greet(name) returning 'Hello, <name>!'."
verifier = {{ kind = "python_tests", module = "greet", tests = "{GREET_TESTS}" }}
scripted = [{WRITE_GREETING}, "Done."]

[[task]]
id = "own"
input = "Say who you are."
target = "own"
verifier = {{ kind = "exact" }}
scripted = ["run-wide"]

[task.agent]
kind = "command"
argv = ["{{python}}", "{{suite_dir}}/own_agent.py"]
final_message = "stdout"
"""
#: The task's own agent: one model call through the gateway, then it says "own".
OWN_AGENT = """
import json, os, urllib.request
body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
request = urllib.request.Request(
    os.environ["OPENAI_BASE_URL"] + "/chat/completions", data=json.dumps(body).encode(),
    headers={"content-type": "application/json",
             "authorization": "Bearer " + os.environ["OPENAI_API_KEY"]})
urllib.request.urlopen(request, timeout=60).read()
print("own")
"""
#: The agent file: ``{agent_dir}`` is its own folder, ``{python}`` the run's interpreter.
AGENT_FILE = """\
kind = "command"
argv = ["{python}", "{agent_dir}/standin_agent.py", "{prompt}"]
timeout_s = 60
"""


def _setup(pytester: pytest.Pytester) -> Path:
    """The suite in the test's folder, the agent file and the stand-in in another."""
    pytester.makefile(".toml", bench_plain=SUITE)
    (pytester.path / "own_agent.py").write_text(OWN_AGENT)
    home = pytester.path / "elsewhere" / "my-agent"
    home.mkdir(parents=True)
    shutil.copy(STANDIN, home / "standin_agent.py")
    agent_file = home / "agent.toml"
    agent_file.write_text(AGENT_FILE)
    return agent_file


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess(
        "--agentbench", "bench_plain.toml", "-p", "no:cacheprovider", *args, timeout=300
    )


def _record(pytester: pytest.Pytester, task: str) -> dict[str, object]:
    folder = pytester.path / "agentbench-results" / "latest" / "tasks" / "plain"
    record = json.loads((folder / f"{task}[scripted]" / "result.json").read_text())["record"]
    assert isinstance(record, dict)
    return record


@pytest.mark.slow
def test_the_run_wide_agent_runs_tasks_naming_none_and_a_tasks_own_wins(
    pytester: pytest.Pytester,
) -> None:
    agent_file = _setup(pytester)
    result = _run(pytester, "--agentbench-agent", str(agent_file))
    out = result.stdout.str()
    assert result.ret == 0, out
    assert "2 tasks: 2 passed" in out, out
    greet = _record(pytester, "greet")
    validate("task_record", greet)
    # the stand-in ran it: its tool call made greet.py, which python_tests imported
    agent = greet["agent"]
    assert isinstance(agent, dict)
    assert agent["from"] == "run" and agent["file"] == str(agent_file), agent
    argv = agent["argv"]
    assert isinstance(argv, list) and argv[1] == str(agent_file.parent / "standin_agent.py")
    own = _record(pytester, "own")
    assert own["outcome"] == "passed", own  # "own", not the run-wide agent's "run-wide"
    assert isinstance(own["agent"], dict) and own["agent"]["from"] == "task", own
    summary = json.loads(
        (pytester.path / "agentbench-results" / "latest" / "summary.json").read_text()
    )
    assert summary["settings"]["agent"]["file"] == str(agent_file), summary["settings"]
    # the ini key names the same agent
    pytester.makeini(f"[pytest]\nagentbench_agent = {agent_file}\n")
    again = _run(pytester)
    assert "2 tasks: 2 passed" in again.stdout.str(), again.stdout.str()
    assert _record(pytester, "greet")["agent"] == agent


@pytest.mark.slow
def test_resume_never_keeps_a_record_made_by_another_agent(pytester: pytest.Pytester) -> None:
    agent_file = _setup(pytester)
    # without the agent the built-in loop runs greet (and passes: its tools write the file)
    first = _run(pytester)
    assert first.ret == 0, first.stdout.str()
    assert "agent" not in _record(pytester, "greet")
    second = _run(pytester, "--agentbench-resume", "--agentbench-agent", str(agent_file))
    assert second.ret == 0, second.stdout.str()
    # greet ran again (by the stand-in); own kept: its own agent did not change
    assert _resumed(pytester) == {"greet": False, "own": True}
    assert _record(pytester, "greet")["agent"]["from"] == "run"  # type: ignore[index]
    third = _run(pytester, "--agentbench-resume", "--agentbench-agent", str(agent_file))
    assert third.ret == 0, third.stdout.str()
    assert _resumed(pytester) == {"greet": True, "own": True}


def _resumed(pytester: pytest.Pytester) -> dict[str, bool]:
    """Which tasks the latest run's summary says were resumed."""
    summary = pytester.path / "agentbench-results" / "latest" / "summary.json"
    tasks = json.loads(summary.read_text())["tasks"]
    return {t["task_id"]: bool(t.get("resumed")) for t in tasks}


def test_a_bad_agent_file_is_one_clear_usage_error(pytester: pytest.Pytester) -> None:
    _setup(pytester)
    bad = pytester.path / "bad-agent.toml"
    bad.write_text('kind = "command"\nargv = "python3 agent.py"\ncolour = "blue"\n')
    result = _run(pytester, "--agentbench-agent", str(bad))
    err = result.stderr.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR, (result.stdout.str(), err)
    assert str(bad) in err and "argv: 'python3 agent.py' is not of type 'array'" in err, err
    assert "'colour' was unexpected" in err, err
    missing = _run(pytester, "--agentbench-agent", str(pytester.path / "nowhere.toml"))
    assert missing.ret == pytest.ExitCode.USAGE_ERROR
    assert "nowhere.toml" in missing.stderr.str() and "cannot be read" in missing.stderr.str()
