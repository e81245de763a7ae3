"""A context overflow through the gateway ends the attempt as the built-in loop's does: a
harness error of kind ``context_overflow`` naming the call and the token counts, kept out
of the score, whatever the agent did next — a command agent that shrugs and answers, one
that exits 1, a Python agent, an ACP agent, and the real Claude Code and Codex where
installed. Real ``pytest --agentbench`` runs (pytester, a subprocess) against the
scripted provider, which plays llama-cpp-python's overflow error."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from real_agents_support import copy_programs, require_tool

pytestmark = pytest.mark.slow

#: llama-cpp-python's message for a prompt past its window (both counts and the output asked).
OVERFLOW = (
    "{ error = { status = 400, message = \"This model's maximum context length is 2048 "
    "tokens. However, you requested 2285 tokens (2029 in the messages, 256 in the "
    'completion)." } }'
)

#: A command agent that asks its model once, then does what its argument says.
SHRUG = r"""
import json, os, sys, urllib.error, urllib.request
body = {"model": "m", "max_tokens": 256, "messages": [{"role": "user", "content": "hi"}]}
request = urllib.request.Request(
    os.environ["OPENAI_BASE_URL"] + "/chat/completions", data=json.dumps(body).encode(),
    headers={"content-type": "application/json",
             "authorization": "Bearer " + os.environ["OPENAI_API_KEY"]})
try:
    urllib.request.urlopen(request, timeout=60).read()
except urllib.error.HTTPError as exc:
    print("the model refused:", exc.code, file=sys.stderr)
if sys.argv[1] == "exit1":
    sys.exit(1)
print("done")
"""

PYTHON_AGENT = """
import json
import urllib.error
import urllib.request


def solve(task, workspace, base_url, key):
    body = json.dumps({"model": "any", "messages": [{"role": "user", "content": "hi"}]})
    request = urllib.request.Request(
        base_url + "/v1/chat/completions",
        data=body.encode(),
        headers={"content-type": "application/json", "authorization": "Bearer " + key},
    )
    try:
        urllib.request.urlopen(request, timeout=30).read()
    except urllib.error.HTTPError:
        pass
    return "done"
"""


def _records(pytester: pytest.Pytester, suite: str) -> dict[str, dict[str, Any]]:
    tasks = (pytester.path / "agentbench-results" / "latest").resolve() / "tasks" / suite
    found = {}
    for folder in tasks.iterdir():
        found[folder.name.split("[")[0]] = json.loads((folder / "result.json").read_text())
    return found


def _assert_overflow(record: dict[str, Any], name: str) -> None:
    assert record["outcome"] == "harness_error", (name, record["outcome"], record["error"])
    failure = record["failure"]
    assert failure["kind"] == "context_overflow" and failure["stage"] == "model", (name, failure)
    assert failure["status"] == 400, (name, failure)
    error = record["error"]
    assert error.startswith("agent stopped: model call 1 (attempt 1, turn 1) refused: "), (
        name,
        error,
    )
    counts = "(2029 prompt tokens + 256 requested completion tokens > 2048 context tokens)"
    assert counts in error, (name, error)
    assert record["reward"] is None, name


def test_an_overflowed_call_is_a_harness_error_whatever_the_agent_does_next(
    pytester: pytest.Pytester,
) -> None:
    copy_programs(pytester.path)
    (pytester.path / "agents" / "shrug.py").write_text(SHRUG)
    pytester.makepyfile(my_agent=PYTHON_AGENT)
    acp = json.dumps(["{python}", "{suite_dir}/agents/acp_agent.py"])
    pytester.makefile(
        ".toml",
        bench_overflow=f"""
[suite]
name = "overflow"
timeout_s = 60
verifier = {{ kind = "includes" }}

[[task]]
id = "answers-anyway"
input = "Go."
target = "done"
scripted = [{OVERFLOW}, "done"]
agent = {{ kind = "command", argv = ["{{python}}", "{{suite_dir}}/agents/shrug.py", "answer"] }}

[[task]]
id = "exits-1"
input = "Go."
target = "done"
scripted = [{OVERFLOW}, "done"]
agent = {{ kind = "command", argv = ["{{python}}", "{{suite_dir}}/agents/shrug.py", "exit1"] }}

[[task]]
id = "python"
input = "Go."
target = "done"
scripted = [{OVERFLOW}, "done"]
agent = {{ kind = "python", function = "my_agent:solve" }}

[[task]]
id = "acp"
input = "Go."
target = "done"
scripted = [{OVERFLOW}, "done"]
agent = {{ kind = "acp", argv = {acp} }}
""",
    )
    result = pytester.runpytest_subprocess("--agentbench", "-p", "no:cacheprovider")
    out = result.stdout.str()
    assert "4 tasks: 4 harness error(s)" in out, out
    records = _records(pytester, "overflow")
    assert sorted(records) == ["acp", "answers-anyway", "exits-1", "python"]
    for name, record in records.items():
        _assert_overflow(record, name)


REAL = {
    "claude": '["{exe}", "-p", "{{prompt}}", "--output-format", "json"]',
    "codex": (
        '["{exe}", "exec", "--skip-git-repo-check", "-c", "model_provider=\\"agentbench\\"", '
        '"-c", "model_providers.agentbench={{name=\\"agentbench\\",base_url=\\"{{base_url}}/v1\\",'
        'env_key=\\"OPENAI_API_KEY\\",wire_api=\\"responses\\"}}", "-m", "task-model", '
        '"{{prompt}}"]'
    ),
}


@pytest.mark.parametrize("kind", ["claude", "codex"])
def test_a_real_agents_overflowed_call_is_a_harness_error(
    pytester: pytest.Pytester, kind: str
) -> None:
    """Claude Code and Codex, whose first call the server refuses as an overflow (they
    retry, or exit 1): a context-overflow harness error, not a failed task."""
    exe = require_tool(kind)
    argv = REAL[kind].format(exe=exe)
    pytester.makefile(
        ".toml",
        bench_real=f"""
[suite]
name = "real"
timeout_s = 120
verifier = {{ kind = "includes" }}

[suite.agent]
kind = "command"
argv = {argv}
env = {{ CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC = "1" }}

[[task]]
id = "overflows"
input = "Say done."
target = "done"
scripted = [{OVERFLOW}, "done", "done", "done"]
""",
    )
    result = pytester.runpytest_subprocess("--agentbench", "-p", "no:cacheprovider")
    record = _records(pytester, "real")["overflows"]
    _assert_overflow(record, kind)
    assert "harness error" in result.stdout.str()


def test_the_overflow_message_names_what_the_agent_asked_when_the_server_did_not(
    tmp_path: Path,
) -> None:
    """A server that gives the prompt and context counts alone (llama.cpp): the message
    adds the output tokens the agent's request asked for."""
    from pytest_agentbench.agents.route import overflow_message
    from pytest_agentbench.errors import ContextOverflow

    exc = ContextOverflow("m: context overflow", prompt_tokens=3223, context_tokens=2048)
    where = {"call": 1, "attempt": 1, "turn": 1}
    said = overflow_message(where, {"max_tokens": 64000}, exc)
    assert said.startswith("model call 1 (attempt 1, turn 1) refused: m: context overflow")
    assert said.endswith(" [64000 output tokens asked]")
    bare = overflow_message(where, {}, ContextOverflow("m: context overflow"))
    assert bare.endswith("m: context overflow [the server gave no token counts]")


FIXTURE_TEST = """
import json
import urllib.error
import urllib.request

import pytest


TOO_LONG = "prompt is too long: 3223 tokens > 2048 maximum"


@pytest.mark.agentbench_scripted({"error": {"status": 400, "message": TOO_LONG}})
def test_shrugs(agentbench_model):
    endpoint = agentbench_model.endpoint()
    turns = [{"role": "user", "content": "hi"}]
    body = json.dumps({"model": "m", "max_tokens": 64000, "messages": turns})
    request = urllib.request.Request(endpoint.base_url + "/v1/messages", data=body.encode(),
        headers={"content-type": "application/json", "x-api-key": endpoint.key})
    with pytest.raises(urllib.error.HTTPError):
        urllib.request.urlopen(request, timeout=30)
"""


def test_an_agent_in_an_ordinary_test_that_overflows_is_a_harness_error(
    pytester: pytest.Pytester,
) -> None:
    """The fixture's endpoint follows the same rule: the test passed (it expected the
    error), its record is the context overflow, with Anthropic's counts and the output
    the request asked for."""
    pytester.makepyfile(test_fixture_overflow=FIXTURE_TEST)
    pytester.runpytest_subprocess("--agentbench", "-p", "no:cacheprovider")
    summary = json.loads(
        (pytester.path / "agentbench-results" / "latest" / "summary.json").read_text()
    )
    [record] = summary["tasks"]
    assert record["outcome"] == "harness_error", record
    assert record["failure"]["kind"] == "context_overflow", record["failure"]
    message = record["failure"]["message"]
    assert message.startswith("model call 1 (attempt 1, turn 1) refused: "), message
    assert "(3223 prompt tokens > 2048 context tokens)" in message, message
    assert message.endswith("[64000 output tokens asked]"), message
