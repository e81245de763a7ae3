"""One generation path: a plain answer is the agent loop with no tools and one turn, and
the request type carries no field of the scripted test double (its task and turn travel
as generic request metadata). Real scripted server, real clients, real pytest runs."""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path

import pytest

from pytest_agentbench.core.records import Attempt
from pytest_agentbench.models.base import REQUEST_CALL, REQUEST_TASK, ModelRequest, ModelSpec
from pytest_agentbench.models.openai_chat import OpenAIChatClient
from pytest_agentbench.models.scripted import ScriptedClient
from pytest_agentbench.runner.agent import AgentSession
from pytest_agentbench.scripted import ScriptedServer
from pytest_agentbench.suites.task import Task

ROOT = Path(__file__).resolve().parents[2]
NATIVE = {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}


def test_a_plain_answer_is_one_turn_of_the_loop_offering_no_tools(tmp_path: Path) -> None:
    reply = {
        "text": "42",
        "tool_calls": [{"name": "bash", "arguments": {"command": "touch ran"}}],
        "usage": NATIVE,
    }
    task = Task(
        suite="s",
        id="t",
        index=0,
        path=tmp_path / "bench_s.toml",
        input="q",
        prompt="q",
        scripted=(reply, "never asked"),
    )
    with ScriptedServer() as server:
        client = ScriptedClient(ModelSpec.parse("scripted"), server.url)
        try:
            client.register([task])
            session = AgentSession.plain(task, client)
            run = session.attempt(
                [{"role": "user", "content": "q"}],
                index=0,
                deadline=time.monotonic() + 60,
                timeout_s=60,
            )
        finally:
            client.close()
        requests = server.requests
    assert (session.workspace, session.tools, session.max_turns) == (None, {}, 1)
    # the reply's tool call is not run: the reply is the answer, after one model call
    assert (run.stop, run.text, run.turns, session.calls) == ("answered", "42", 1, 1)
    assert [(r["key"], r["turn"]) for r in requests] == [(task.key, 0)]
    assert "tools" not in requests[0]["body"]
    # the answer shape: the exchange as it is, no turn numbers or tool results
    [entry] = run.trajectory
    assert not {"attempt", "turn", "call", "tool_results", "model_s"} & set(entry)
    attempt = Attempt(index=0)
    run.fill(attempt)
    assert (attempt.turns, attempt.tool_calls) == (None, None)
    assert attempt.usage_native == NATIVE
    assert (attempt.usage["input"], attempt.usage["output"]) == (5, 2)


def test_the_request_type_has_no_field_of_the_scripted_double() -> None:
    names = {f.name for f in dataclasses.fields(ModelRequest)}
    assert not {"script_key", "turn"} & names
    request = ModelRequest(({"role": "user", "content": "q"},))
    assert dict(request.metadata) == {}
    assert (REQUEST_TASK, REQUEST_CALL) == ("task", "call")
    # rollout.py drives the loop; it makes no model call of its own
    source = (ROOT / "pytest_agentbench" / "runner" / "rollout.py").read_text()
    assert ".generate(" not in source and "LoopGuard" not in source


def test_a_real_provider_client_sends_none_of_the_metadata() -> None:
    """The task key and call number are the runner's context, not the provider's."""
    with ScriptedServer(default=["hi"]) as server:
        client = OpenAIChatClient(ModelSpec.parse("openai/m"), server.url, None, trust_env=False)
        try:
            metadata = {REQUEST_TASK: "bench_s.toml::secret-task", REQUEST_CALL: "3"}
            request = ModelRequest(({"role": "user", "content": "q"},), metadata=metadata)
            assert client.generate(request).text == "hi"
        finally:
            client.close()
        [record] = server.requests
    assert not any(name.startswith("x-agentbench") for name in record["headers"])
    assert "secret-task" not in json.dumps(record)


AGENT_SUITE = """
[suite]
name = "ag"
mode = "agent"
timeout_s = 60
repairs = 0

[[task]]
id = "refused"
input = "Do it."
verifier = { kind = "command", run = "true" }
scripted = [{ error = { status = 400 } }]
"""


def test_an_agent_attempt_whose_first_call_fails_has_no_loop_record(
    pytester: pytest.Pytester,
) -> None:
    """Like a plain answer whose call failed: no generation was watched, so no verdicts."""
    pytester.makefile(".toml", bench_ag=AGENT_SUITE)
    pytester.runpytest("--agentbench", "-p", "no:cacheprovider")
    task_dir = (pytester.path / "agentbench-results" / "latest").resolve() / "tasks" / "ag"
    result = json.loads((task_dir / "refused[scripted]" / "result.json").read_text())
    assert result["outcome"] == "harness_error"
    [attempt] = result["attempts"]
    assert attempt["loop"] is None
    assert attempt["turns"] == 1
