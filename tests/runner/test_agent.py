"""The agent loop, end to end: pytester runs of ``pytest --agentbench`` against the real
scripted server (every protocol), the real sandbox and the real code verifiers. The
scripted model decides nothing: its tool calls really run in the workspace, and the
verifier really judges what they left there."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from pytest_agentbench.models.base import ToolCall
from pytest_agentbench.runner.tool_loop import ToolLoopPolicy, ToolLoopWatch
from pytest_agentbench.runner.tools import canonical_call, cap_output

ROOT = Path(__file__).resolve().parents[2]

HEADER = """
[suite]
name = "ag"
mode = "agent"
timeout_s = 60
"""


def bash(command: str, call_id: str = "") -> dict[str, Any]:
    call: dict[str, Any] = {"name": "bash", "arguments": {"command": command}}
    if call_id:
        call["id"] = call_id
    return call


def toml_reply(calls: list[dict[str, Any]], text: str = "") -> str:
    """A scripted reply table as TOML (JSON is valid TOML for these shapes of values)."""
    parts = [f"text = {json.dumps(text)}"] if text else []
    rendered = []
    for call in calls:
        args = ", ".join(f"{k} = {json.dumps(v)}" for k, v in call["arguments"].items())
        extra = f', id = "{call["id"]}"' if "id" in call else ""
        rendered.append(f'{{ name = "{call["name"]}", arguments = {{ {args} }}{extra} }}')
    parts.append(f"tool_calls = [{', '.join(rendered)}]")
    return "{ " + ", ".join(parts) + " }"


def fix_task(task_id: str = "fix", fixed: str = "a + b") -> str:
    """Fix ``add`` with tools: read it, write it back with ``fixed``, try it, answer."""
    read = {"name": "read_file", "arguments": {"path": "calc.py"}}
    code = f"def add(a, b):\n    return {fixed}\n"
    write = {"name": "write_file", "arguments": {"path": "calc.py", "content": code}}
    replies = [
        toml_reply([read], "Reading."),
        toml_reply([write]),
        toml_reply([bash("python -c 'import calc; print(calc.add(2, 3))'")]),
        '"Fixed: add() now adds."',
    ]
    tests = '["assert add(2, 3) == 5", "assert add(0, 0) == 0"]'
    return f"""
[[task]]
id = "{task_id}"
input = "Make add() add."
files = {{ "calc.py" = "def add(a, b):\\n    return a - b\\n" }}
verifier = {{ kind = "python_tests", module = "calc", tests = {tests} }}
scripted = [{", ".join(replies)}]
"""


def run(
    pytester: pytest.Pytester, body: str, *args: str, header: str = HEADER
) -> tuple[pytest.RunResult, Path]:
    pytester.makefile(".toml", bench_ag=header + body)
    result = pytester.runpytest("--agentbench", "-p", "no:cacheprovider", *args)
    return result, (pytester.path / "agentbench-results" / "latest").resolve() / "tasks" / "ag"


def result_of(task_dir: Path) -> dict[str, Any]:
    return json.loads((task_dir / "result.json").read_text())


def turns_of(task_dir: Path) -> list[dict[str, Any]]:
    """The trajectory's model calls (the last entry says where the workspace is kept)."""
    entries = json.loads((task_dir / "trajectory.json").read_text())["requests"]
    assert "workspace" in entries[-1]
    return entries[:-1]


# --- the whole path: tools write, the verifier runs the tests -------------------------


def test_scripted_write_file_really_fixes_the_code_and_the_tests_really_run(pytester):
    body = fix_task() + fix_task("no-fix", fixed="a * b")
    result, tasks = run(pytester, body, "--agentbench-concurrency", "2")
    result.assert_outcomes(passed=1, failed=1)
    task = tasks / "fix[scripted]"
    assert (task / "workspace" / "calc.py").read_text() == "def add(a, b):\n    return a + b\n"
    ctrf = json.loads((task / "verifier" / "ctrf.json").read_text())
    assert ctrf["results"]["summary"]["passed"] == 2
    record = result_of(task)
    attempt = record["attempts"][0]
    assert attempt["turns"] == 4
    assert [c["name"] for c in attempt["tool_calls"]] == ["read_file", "write_file", "bash"]
    assert attempt["tool_calls"][1]["arguments"].startswith('{"content": "def add(a, b)')
    assert attempt["answer"] == "Fixed: add() now adds."
    turns = turns_of(task)
    outputs = [r["output"] for t in turns for r in t["tool_results"]]
    assert outputs[0] == "def add(a, b):\n    return a - b\n"
    assert outputs[2] == "5\n[exit code 0]"

    # the same session with a wrong fix fails on the same real tests
    record = result_of(tasks / "no-fix[scripted]")
    assert record["outcome"] == "failed"
    assert record["final_reward"] == 0.5
    result.stdout.fnmatch_lines(["*ag::no-fix: reward 0.5*"])


# --- each protocol drives the same session to the same end ----------------------------


@pytest.mark.parametrize("model", ["scripted", "scripted/anthropic", "scripted/openai-responses"])
def test_every_protocol_drives_the_same_agent_task_to_the_same_outcome(pytester, model):
    result, tasks = run(pytester, fix_task(), "--agentbench-model", model)
    result.assert_outcomes(passed=1)
    task = next(tasks.iterdir())
    assert (task / "workspace" / "calc.py").read_text().endswith("return a + b\n")
    record = result_of(task)
    assert record["outcome"] == "passed"
    calls = record["attempts"][0]["tool_calls"]
    assert [(c["name"], c["is_error"]) for c in calls] == [
        ("read_file", False),
        ("write_file", False),
        ("bash", False),
    ]
    # the tool results went back to the model in the protocol's own shape
    last = json.dumps(turns_of(task)[-1]["request"]["body"])
    marker = {"scripted": '"role": "tool"', "scripted/anthropic": '"tool_result"'}
    assert marker.get(model, '"function_call_output"') in last
    assert "5\\n[exit code 0]" in last


# --- tools refuse what leaves the workspace -------------------------------------------


def test_path_escapes_bad_calls_and_unknown_tools_are_error_results_not_crashes(pytester):
    outside = pytester.path / "outside.txt"
    outside.write_text("host secret")
    escapes = [
        {"name": "read_file", "arguments": {"path": "../outside.txt"}},
        {"name": "write_file", "arguments": {"path": str(outside), "content": "pwned"}},
        {"name": "read_file", "arguments": {"path": "link/outside.txt"}},
        {"name": "list_files", "arguments": {"path": "../"}},
    ]
    body = f"""
[[task]]
id = "escape"
input = "x"
verifier = {{ kind = "command", run = "test -L link" }}
scripted = [
  {toml_reply([bash(f"ln -s {pytester.path} link")])},
  {toml_reply(escapes)},
  "done",
]

[[task]]
id = "bad"
input = "x"
tools = ["read_file", "write_file"]
verifier = {{ kind = "command", run = "test -f ok.txt" }}
scripted = [
  {toml_reply([bash("touch ok.txt"), {"name": "write_file", "arguments": {"path": "ok.txt"}}])},
  {{ tool_calls = [{{ name = "write_file", arguments = "{{not json" }}] }},
  {toml_reply([{"name": "write_file", "arguments": {"path": "ok.txt", "content": "1"}}])},
  "done",
]
"""
    result, tasks = run(pytester, body, "--agentbench-concurrency", "2")
    result.assert_outcomes(passed=2)
    assert outside.read_text() == "host secret"
    task = tasks / "escape[scripted]"
    results = turns_of(task)[1]["tool_results"]
    assert [r["is_error"] for r in results] == [True, True, True, True]
    assert "'..'" in results[0]["output"]
    assert "absolute" in results[1]["output"]
    assert "symlink" in results[2]["output"]
    assert "host secret" not in json.dumps(turns_of(task))
    # the model saw them as errors on its next turn
    assert "contains '..'" in json.dumps(turns_of(task)[2]["request"]["body"])

    turns = turns_of(tasks / "bad[scripted]")
    first, second = turns[0]["tool_results"], turns[1]["tool_results"]
    assert first[0]["is_error"] and "unknown tool 'bash'" in first[0]["output"]
    assert "read_file, write_file" in first[0]["output"]
    assert first[1]["is_error"] and "'content' is a required property" in first[1]["output"]
    assert second[0]["is_error"] and "not a JSON object" in second[0]["output"]
    offered = [t["function"]["name"] for t in turns[0]["request"]["body"]["tools"]]
    assert offered == ["read_file", "write_file"]


# --- limits -------------------------------------------------------------------------


LIMITS = """
[[task]]
id = "big"
input = "x"
max_tool_output = 1000
verifier = {{ kind = "command", run = "true" }}
scripted = [{big}, "done"]

[[task]]
id = "busy"
input = "x"
max_turns = 3
repairs = 2
verifier = {{ kind = "command", run = "test -f done.txt" }}
scripted = [{busy}]

[[task]]
id = "busy-but-done"
input = "x"
max_turns = 2
verifier = {{ kind = "command", run = "test -f done.txt" }}
scripted = [{done}]

[[task]]
id = "slow"
input = "x"
timeout_s = 1.5
verifier = {{ kind = "command", run = "true" }}
scripted = [{slow}, "done"]
"""


def test_limits_output_cap_turns_and_wall_clock(pytester):
    body = LIMITS.format(
        big=toml_reply([bash("python -c \"print('a' * 3000 + 'END')\"")]),
        busy=", ".join(toml_reply([bash(f"echo {i} >> log.txt")]) for i in range(6)),
        done=", ".join(toml_reply([bash(f"echo {i} > done.txt")]) for i in range(4)),
        slow=toml_reply([bash("sleep 30")]),
    )
    result, tasks = run(pytester, body, "--agentbench-concurrency", "4")
    result.assert_outcomes(passed=2, failed=2)

    # tool output is truncated with a marker, and that is what the model is sent
    task = tasks / "big[scripted]"
    call = result_of(task)["attempts"][0]["tool_calls"][0]
    assert call["truncated"] is True
    assert call["output_chars"] > 3000
    shown = turns_of(task)[0]["tool_results"][0]["output"]
    assert "characters truncated: tool output is capped at 1000 characters" in shown
    assert shown.startswith("aaaa")
    assert shown.endswith("END\n[exit code 0]")
    assert len(shown) < 1200
    assert turns_of(task)[1]["request"]["body"]["messages"][-1]["content"] == shown

    # the turn limit stops the loop (no repairs after it) and is the reason
    task = tasks / "busy[scripted]"
    record = result_of(task)
    assert record["outcome"] == "failed"
    assert record["error"] == "turn limit (3) reached"
    assert record["attempts_used"] == 1
    assert record["attempts"][0]["turns"] == 3
    assert (task / "workspace" / "log.txt").read_text() == "0\n1\n2\n"
    assert len(turns_of(task)) == 3

    # ... unless the workspace passes the verifier anyway
    record = result_of(tasks / "busy-but-done[scripted]")
    assert record["outcome"] == "passed"
    assert record["attempts"][0]["error"] == "turn limit (2) reached"

    # the wall clock bounds a tool's command too, then the rollout times out
    task = tasks / "slow[scripted]"
    record = result_of(task)
    assert record["outcome"] == "timeout"
    assert record["attempts"][0]["tool_calls"][0]["elapsed_s"] < 10
    assert "[stopped: timeout" in turns_of(task)[0]["tool_results"][0]["output"]


# --- the tool-call loop watch ---------------------------------------------------------


def test_a_repeated_tool_call_and_a_cycle_of_calls_are_killed_as_loops(pytester):
    cycle = [
        toml_reply([{"name": "read_file", "arguments": {"path": "a.txt"}}]),
        toml_reply([{"name": "write_file", "arguments": {"path": "a.txt", "content": "x"}}]),
    ]
    body = f"""
[[task]]
id = "stuck"
input = "x"
verifier = {{ kind = "command", run = "true" }}
scripted = [{toml_reply([bash("echo again >> log.txt")])}]

[[task]]
id = "cycle"
input = "x"
max_turns = 50
files = {{ "a.txt" = "x" }}
verifier = {{ kind = "command", run = "true" }}
scripted = [{", ".join(cycle * 10)}]
"""
    result, tasks = run(pytester, body, "--agentbench-concurrency", "2")
    result.assert_outcomes(failed=2)
    task = tasks / "stuck[scripted]"
    record = result_of(task)
    assert record["outcome"] == "loop_killed"
    loop = record["loop"]
    assert (loop["channel"], loop["period"], loop["repetitions"]) == ("tools", 1, 4)
    assert loop["excerpt"] == 'bash {"command": "echo again >> log.txt"}'
    # the fourth call is the loop: it is not run
    assert (task / "workspace" / "log.txt").read_text() == "again\n" * 3
    result.stdout.fnmatch_lines(["*ag::stuck: loop killed: period 1 ×4 in tools at *"])

    record = result_of(tasks / "cycle[scripted]")
    assert record["outcome"] == "loop_killed"
    assert (record["loop"]["period"], record["loop"]["repetitions"]) == (2, 3)
    assert record["attempts"][0]["turns"] == 6


def test_loop_watch_rules() -> None:
    def call(name: str, **arguments: Any) -> str:
        return canonical_call(ToolCall("id", name, arguments, json.dumps(arguments)))

    watch = ToolLoopWatch(ToolLoopPolicy())
    # argument order does not matter; different arguments break a run
    sequence = [call("a", x=1, y=2), call("a", y=2, x=1), call("a", x=1, y=3), call("a", x=1, y=3)]
    assert [watch.add(s, 0.0) for s in sequence] == [None] * 4
    assert watch.add(call("a", x=1, y=3), 0.0) is None
    evidence = watch.add(call("a", x=1, y=3), 0.5)
    assert evidence is not None and (evidence["period"], evidence["repetitions"]) == (1, 4)
    watch = ToolLoopWatch(ToolLoopPolicy())
    abc = [call("a"), call("b"), call("c")]
    found = [watch.add(s, 0.0) for s in abc * 3]
    assert found[:-1] == [None] * 8
    assert (found[-1]["period"], found[-1]["repetitions"], found[-1]["rule"]) == (3, 3, "cycle")


def test_cap_output_keeps_both_ends() -> None:
    assert cap_output("short", 10) == ("short", False)
    text, cut = cap_output("h" * 1000 + "t" * 1000, 1000)
    assert cut and text.startswith("h" * 700 + "\n[") and text.endswith("]\n" + "t" * 300)
    assert "[… 1000 characters truncated" in text


# --- repair rounds -------------------------------------------------------------------


def test_repair_continues_the_conversation_and_keeps_the_workspace(pytester):
    body = f"""
[[task]]
id = "fix2"
input = "Write b.txt."
repairs = 1
verifier = {{ kind = "command", run = "test -f b.txt" }}
scripted = [
  {toml_reply([{"name": "write_file", "arguments": {"path": "a.txt", "content": "first"}}])},
  "Wrote it.",
  {toml_reply([bash("cp a.txt b.txt")])},
  "Now b.txt exists.",
]
"""
    result, tasks = run(pytester, body)
    result.assert_outcomes(passed=1)
    task = tasks / "fix2[scripted]"
    record = result_of(task)
    assert record["repaired"] is True
    assert [a["turns"] for a in record["attempts"]] == [2, 2]
    assert (task / "workspace" / "b.txt").read_text() == "first"
    turns = turns_of(task)
    assert [(t["attempt"], t["turn"], t["call"]) for t in turns] == [
        (1, 1, 1),
        (1, 2, 2),
        (2, 1, 3),
        (2, 2, 4),
    ]
    messages = turns[2]["request"]["body"]["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant", "user"]
    assert messages[3]["content"] == "Wrote it."
    assert "did not pass the check" in messages[4]["content"]
    assert record["attempts"][0]["feedback_sent"] == messages[4]["content"]


def test_the_example_agent_suite(pytester):
    shutil.copy(ROOT / "example_suites" / "bench_agent.toml", pytester.path)
    result = pytester.runpytest("--agentbench", "-p", "no:cacheprovider", "-v", "-k", "not median")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*add-slugify PASSED*2 attempts*",
            "*stuck-rereading LOOP KILLED*",
            "*agent::stuck-rereading: loop killed: period 1 ×4 in tools*",
        ]
    )


# --- tools from plugins --------------------------------------------------------------

PLUGIN = """
import pytest
from pytest_agentbench.models.base import ToolSpec
from pytest_agentbench.runner.tools import Tool


def shout(workspace, arguments):
    text = workspace.read_file(arguments["path"])
    workspace.write_file("loud.txt", text.upper())
    return "shouted"


@pytest.hookimpl
def pytest_agentbench_tools():
    spec = ToolSpec("shout", "Upper-case a file into loud.txt.",
                    {"type": "object", "properties": {"path": {"type": "string"}},
                     "required": ["path"]})
    return [Tool(spec, shout)]
"""


def test_a_plugin_adds_a_tool_and_unknown_tool_names_are_load_errors(pytester):
    pytester.makeconftest(PLUGIN)
    body = f"""
[[task]]
id = "loud"
input = "x"
tools = ["shout"]
files = {{ "quiet.txt" = "hello" }}
verifier = {{ kind = "command", run = "grep -q HELLO loud.txt" }}
scripted = [{toml_reply([{"name": "shout", "arguments": {"path": "quiet.txt"}}])}, "done"]

[[task]]
id = "typo"
input = "x"
tools = ["shuot"]
"""
    result, _ = run(pytester, body)
    result.stdout.fnmatch_lines(
        [
            "*$.task?1?.tools?0? must be one of bash, list_files, read_file, shout, write_file; "
            'got "shuot" (did you mean "shout"?)*'
        ]
    )
    pytester.makefile(".toml", bench_ag=HEADER + body.split('[[task]]\nid = "typo"')[0])
    result = pytester.runpytest("--agentbench", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
