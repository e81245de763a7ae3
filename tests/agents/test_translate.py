"""The gateway translating between protocols: an agent's request in a protocol the
task's model does not serve goes through the model's own client and comes back in the
agent's protocol. Real servers on 127.0.0.1 (the gateway, the scripted provider), real
model clients behind (an ``openai-compat`` Chat Completions client, an Anthropic
Messages client, neither with a sibling for the protocol under test), the official SDKs
in front."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest

from pytest_agentbench.agents.gateway import Gateway
from pytest_agentbench.agents.route import Route
from pytest_agentbench.core.jsontypes import JsonObject
from pytest_agentbench.models.anthropic import AnthropicClient
from pytest_agentbench.models.base import ModelClient, ModelSpec
from pytest_agentbench.models.openai_chat import OpenAIChatClient
from pytest_agentbench.models.scripted import register_scripts, scripted_client
from pytest_agentbench.models.siblings import sibling
from pytest_agentbench.scripted.server import ScriptedServer

anthropic = pytest.importorskip("anthropic")
openai = pytest.importorskip("openai")

READ = {"name": "read_file", "arguments": {"path": "notes.txt"}, "id": "call_7"}
TOOL = {
    "name": "read_file",
    "description": "Read a file",
    "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}},
}


@dataclass(frozen=True)
class _Task:
    key: str
    scripted: tuple[object, ...]
    id: str = "t"
    path: str = "bench_translate.toml"


@pytest.fixture(scope="module")
def provider() -> Iterator[ScriptedServer]:
    server = ScriptedServer()
    server.start()
    yield server
    server.stop()


@pytest.fixture
def gateway() -> Iterator[Gateway]:
    made = Gateway()
    yield made
    made.close()


def _route(
    gateway: Gateway, server: ScriptedServer, key: str, replies: list[object], speaks: str
) -> tuple[Route, ModelClient]:
    """A route whose model is a built-in client of ``speaks`` (``chat``: openai-compat,
    ``messages``: anthropic) named after the script ``key`` the server answers from."""
    register_scripts(
        scripted_client(ModelSpec("scripted", "scripted"), server.url), [_Task(key, tuple(replies))]
    )
    bare: OpenAIChatClient | AnthropicClient
    if speaks == "chat":
        bare = OpenAIChatClient(ModelSpec("openai-compat", key), server.url, "k", trust_env=False)
        assert sibling(bare, "messages") is None
    else:
        bare = AnthropicClient(ModelSpec("anthropic", key), server.url, "k", trust_env=False)
        assert sibling(bare, "responses") is None and sibling(bare, "chat") is None
    route = gateway.open_route(key, bare.spec.label, lambda protocol: sibling(bare, protocol))
    route.begin_attempt(0, time.monotonic() + 60, None)
    return route, bare


def _sent(server: ScriptedServer, key: str) -> list[JsonObject]:
    """The bodies the model received for script ``key``, in order."""
    return [
        r["body"] for r in server.requests if r.get("key") == key and isinstance(r["body"], dict)
    ]


def test_messages_agent_over_a_chat_only_model(gateway: Gateway, provider: ScriptedServer) -> None:
    """Claude Code's protocol against an OpenAI-compatible local server: plain text
    (usage and end_turn), a tool call (tool_use, its id, name and input), its result on
    the next turn reaching the model as a Chat tool message, streamed and not."""
    replies: list[object] = [
        {"text": "hello there", "usage": {"prompt_tokens": 12, "completion_tokens": 2}},
        {"thinking": "The notes are in a file.", "text": "Reading.", "tool_calls": [READ]},
        {"text": "The notes say hi.", "finish_reason": "length"},
    ]
    route, bare = _route(gateway, provider, "msgs-over-chat", replies, "chat")
    env = route.endpoint.environment()
    client = anthropic.Anthropic(
        base_url=env["ANTHROPIC_BASE_URL"], api_key=env["ANTHROPIC_API_KEY"]
    )
    ask = [{"role": "user", "content": "say hello"}]
    first = client.messages.create(model="m", max_tokens=100, system="Be brief.", messages=ask)
    assert [b.type for b in first.content] == ["text"]
    assert first.content[0].text == "hello there"
    assert first.stop_reason == "end_turn"
    assert (first.usage.input_tokens, first.usage.output_tokens) == (12, 2)
    history = [
        {"role": "user", "content": "what do the notes say?"},
    ]
    server_tool = {"type": "web_search_20250305", "name": "web_search"}
    with client.messages.stream(
        model="m", max_tokens=100, messages=history, tools=[TOOL, server_tool]
    ) as events:
        second = events.get_final_message()
    assert second.stop_reason == "tool_use"
    assert [b.type for b in second.content] == ["thinking", "text", "tool_use"]
    assert second.content[0].thinking == "The notes are in a file."
    use = second.content[2]
    assert (use.id, use.name, use.input) == ("call_7", "read_file", {"path": "notes.txt"})
    history += [
        {"role": "assistant", "content": [b.model_dump() for b in second.content]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "call_7", "content": "hi"}],
        },
    ]
    third = client.messages.create(model="m", max_tokens=5, messages=history, tools=[TOOL])
    assert third.content[0].text == "The notes say hi." and third.stop_reason == "max_tokens"
    client.close()
    bare.close()
    upstream = _sent(provider, "msgs-over-chat")
    assert len(upstream) == 3
    assert upstream[0]["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "say hello"},
    ]
    assert [t["function"]["name"] for t in upstream[1]["tools"]] == ["read_file"]
    assert upstream[2]["messages"][-2]["content"] == "Reading."  # the thinking left out
    assert upstream[2]["messages"][-1] == {
        "role": "tool",
        "tool_call_id": "call_7",
        "content": "hi",
    }
    assert upstream[2]["max_tokens"] == 5
    records = route.records_of(0)
    assert [r.entry["translated"] for r in records] == ["messages→chat"] * 3
    assert [r.tool_calls for r in records] == [0, 1, 0]
    assert records[1].entry["dropped_tools"] == ["web_search_20250305:web_search"]
    assert all(r.ok for r in records)
    assert records[0].usage is not None and records[0].usage["output"] == 2


def test_responses_agent_over_a_messages_only_model(
    gateway: Gateway, provider: ScriptedServer
) -> None:
    replies: list[object] = [
        {"text": "Reading.", "tool_calls": [READ]},
        {"text": "Reading.", "tool_calls": [READ]},
        {"text": "done reading"},
    ]
    route, bare = _route(gateway, provider, "resp-over-msgs", replies, "messages")
    env = route.endpoint.environment()
    client = openai.OpenAI(base_url=env["OPENAI_BASE_URL"], api_key=env["OPENAI_API_KEY"])
    tool = {
        "type": "function",
        "name": "read_file",
        "description": "Read a file",
        "parameters": TOOL["input_schema"],
    }
    first = client.responses.create(
        model="m", instructions="Be brief.", input="what is in notes?", tools=[tool]
    )
    calls = [item for item in first.output if item.type == "function_call"]
    assert [(c.call_id, c.name, c.arguments) for c in calls] == [
        ("call_7", "read_file", '{"path": "notes.txt"}')
    ]
    assert first.output_text == "Reading."
    assert first.usage is not None and first.usage.output_tokens > 0
    events = list(
        client.responses.create(
            model="m",
            instructions="Be brief.",
            input="what is in notes?",
            tools=[tool],
            stream=True,
        )
    )
    deltas = [e.delta for e in events if e.type == "response.function_call_arguments.delta"]
    assert json.loads("".join(deltas)) == {"path": "notes.txt"}
    followup = [
        {"role": "user", "content": "what is in notes?"},
        {
            "type": "function_call",
            "call_id": "call_7",
            "name": "read_file",
            "arguments": '{"path": "notes.txt"}',
        },
        {"type": "function_call_output", "call_id": "call_7", "output": "hi"},
    ]
    stream = client.responses.create(model="m", input=followup, tools=[tool], stream=True)
    kinds = []
    final = None
    for event in stream:
        kinds.append(event.type)
        if event.type == "response.completed":
            final = event.response
    assert final is not None and final.output_text == "done reading"
    assert "response.output_text.delta" in kinds
    client.close()
    bare.close()
    upstream = _sent(provider, "resp-over-msgs")
    assert upstream[0]["system"] == "Be brief." and len(upstream) == 3
    assert upstream[2]["messages"][-1]["content"][0]["tool_use_id"] == "call_7"
    assert [r.entry["translated"] for r in route.records_of(0)] == ["responses→messages"] * 3


def test_a_loop_in_the_models_stream_stops_the_route_through_translation(
    gateway: Gateway, provider: ScriptedServer
) -> None:
    """The agent streams: the model's text reaches it live, translated, until the loop
    watch kills the model's stream; the agent's stream is then cut and the route stops."""
    sentence = "I should double-check the total once more before answering. "
    replies: list[object] = [{"text": sentence, "repeat": 600, "chunk_size": 20}]
    route, bare = _route(gateway, provider, "loop-translated", replies, "chat")
    received: list[str] = []
    request = {
        "model": "m",
        "max_tokens": 9000,
        "stream": True,
        "messages": [{"role": "user", "content": "add"}],
    }
    with (
        httpx.Client(timeout=30) as http,
        http.stream(
            "POST", f"{route.base_url}/v1/messages", headers={"x-api-key": route.key}, json=request
        ) as answer,
    ):
        assert answer.status_code == 200
        with pytest.raises(httpx.RemoteProtocolError):
            for line in answer.iter_lines():
                received.append(line)
    bare.close()
    streamed = "".join(
        json.loads(line[6:])["delta"]["text"] for line in received if "text_delta" in line
    )
    assert streamed.startswith(sentence * 2) and len(streamed) < len(sentence * 600)
    assert not any("message_stop" in line for line in received)
    assert route.stop_info is not None and route.stop_info.reason == "loop_killed"
    (record,) = route.records_of(0)
    assert record.entry["translated"] == "messages→chat" and "killed" in record.entry


IMAGE = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": ""}}
PICTURE = {"type": "image_url", "image_url": {"url": "data:image/png;base64,"}}


@pytest.mark.parametrize(
    ("speaks", "path", "body", "named"),
    [
        (
            "chat",
            "messages",
            {"max_tokens": 9, "messages": [{"role": "user", "content": [IMAGE]}]},
            "messages[0]: a image block",
        ),
        (
            "messages",
            "chat/completions",
            {"messages": [{"role": "user", "content": [PICTURE]}]},
            "messages[0]: a image_url part",
        ),
        (
            "messages",
            "responses",
            {"input": "go on", "previous_response_id": "resp_1"},
            "previous_response_id",
        ),
    ],
)
def test_what_cannot_be_translated_is_refused_naming_it(
    gateway: Gateway,
    provider: ScriptedServer,
    speaks: str,
    path: str,
    body: JsonObject,
    named: str,
) -> None:
    """Refused before anything is sent, in the agent's protocol's error shape, naming
    the part that cannot be carried."""
    key = f"refused-{speaks}-{path.replace('/', '-')}"
    route, bare = _route(gateway, provider, key, ["never"], speaks)
    with httpx.Client(timeout=30) as http:
        refused = http.post(
            f"{route.base_url}/v1/{path}",
            headers={"x-api-key": route.key},
            json={"model": "m", **body},
        )
    bare.close()
    assert refused.status_code == 400
    message = refused.json()["error"]["message"]
    assert "cannot be translated" in message and named in message
    assert _sent(provider, key) == []
    (record,) = route.records_of(0)
    assert record.entry["status"] == 400 and not record.ok


def test_chat_agent_over_a_messages_only_model(gateway: Gateway, provider: ScriptedServer) -> None:
    """The openai SDK's Chat Completions, streamed with usage and not, over an Anthropic
    client: tool calls with their ids and JSON arguments, finish reasons, usage."""
    replies: list[object] = [
        {"text": "", "tool_calls": [READ]},
        {"text": "", "tool_calls": [READ]},
        {
            "thinking": "Done.",
            "text": "all read",
            "usage": {"input_tokens": 30, "output_tokens": 4},
        },
    ]
    route, bare = _route(gateway, provider, "chat-over-msgs", replies, "messages")
    env = route.endpoint.environment()
    client = openai.OpenAI(base_url=env["OPENAI_BASE_URL"], api_key=env["OPENAI_API_KEY"])
    tool = {"type": "function", "function": {**TOOL, "parameters": TOOL["input_schema"]}}
    del tool["function"]["input_schema"]
    ask = [{"role": "user", "content": "read notes"}]
    first = client.chat.completions.create(model="m", messages=ask, tools=[tool])
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content is None
    (call,) = choice.message.tool_calls or []
    assert (call.id, call.function.name) == ("call_7", "read_file")
    assert json.loads(call.function.arguments) == {"path": "notes.txt"}
    with client.chat.completions.stream(model="m", messages=ask, tools=[tool]) as events:
        again = events.get_final_completion().choices[0]  # the same call, streamed
    assert again.finish_reason == "tool_calls"
    (streamed_call,) = again.message.tool_calls or []
    assert (streamed_call.id, streamed_call.function.name) == ("call_7", "read_file")
    assert json.loads(streamed_call.function.arguments) == {"path": "notes.txt"}
    history = [
        *ask,
        choice.message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": "call_7", "content": "hi"},
    ]
    chunks = list(
        client.chat.completions.create(
            model="m",
            messages=history,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "all read"
    reasoning = [c.choices[0].delta.model_extra for c in chunks if c.choices]
    assert "".join(r.get("reasoning_content", "") for r in reasoning if r) == "Done."
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    usage = chunks[-1].usage
    assert usage is not None and (usage.prompt_tokens, usage.completion_tokens) == (30, 4)
    client.close()
    bare.close()
    (_, _, second) = _sent(provider, "chat-over-msgs")
    assert second["messages"][1]["content"][0]["type"] == "tool_use"
    assert second["messages"][2]["content"][0]["tool_use_id"] == "call_7"


def test_the_deadline_ends_a_translated_call_and_the_route(
    gateway: Gateway, provider: ScriptedServer
) -> None:
    """The model never answers: the task's deadline ends the call (a timeout in the
    agent's protocol's error shape) and stops the route, as for a relayed call."""
    route, bare = _route(gateway, provider, "deadline-translated", [{"hang": True}], "chat")
    route.begin_attempt(0, time.monotonic() + 1.0, None)
    with httpx.Client(timeout=30) as http:
        answer = http.post(
            f"{route.base_url}/v1/messages",
            headers={"x-api-key": route.key},
            json={"model": "m", "max_tokens": 9, "messages": [{"role": "user", "content": "x"}]},
        )
    bare.close()
    assert answer.status_code == 504 and answer.json()["type"] == "error"
    assert route.stop_info is not None and route.stop_info.reason == "timeout"
    (record,) = route.records_of(0)
    assert record.entry["translated"] == "messages→chat" and not record.ok


def test_an_endpoint_the_server_does_not_have_is_translated_from_then_on(
    gateway: Gateway,
) -> None:
    """An openai-compat model has a Responses sibling, but many local servers serve Chat
    alone: a 404 from /v1/responses before any byte is not the agent's failure: the call
    is translated to Chat, and so is every later call of the route (one 404 in all). The
    model here is bench/floor_server.py (independent, standard library only), which
    answers /v1/chat/completions and 404s anything else."""
    import subprocess
    import sys
    from pathlib import Path

    floor = Path(__file__).resolve().parents[2] / "bench" / "floor_server.py"
    proc = subprocess.Popen(
        [sys.executable, str(floor), "--reply", "hi", "--tokens", "3"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().split(" at ")[1].strip()
        bare = OpenAIChatClient(ModelSpec("openai-compat", "local"), url, "k", trust_env=False)
        assert sibling(bare, "responses") is not None  # a Responses client is offered
        route = gateway.open_route("t", "local", lambda protocol: sibling(bare, protocol))
        route.begin_attempt(0, time.monotonic() + 60, None)
        client = openai.OpenAI(base_url=f"{route.base_url}/v1", api_key=route.endpoint.key)
        first = client.responses.create(model="local", input="say hi")
        assert first.output_text == "hihihi"
        with client.responses.stream(model="local", input="again") as stream:
            done = stream.get_final_response()
        assert done.output_text == "hihihi"
        records = route.records_of(0)
        assert [r.entry.get("translated") for r in records] == ["responses→chat"] * 2
        assert records[0].entry["relay_refused"] == (
            "HTTP 404 from the model's OpenAI Responses endpoint"
        )
        assert "relay_refused" not in records[1].entry  # not asked again
        assert all(r.ok and r.text == "hihihi" for r in records)
        assert route.stop_info is None
    finally:
        proc.terminate()
        proc.wait(timeout=10)
