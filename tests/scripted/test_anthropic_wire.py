"""The Anthropic Messages wire of the scripted server, read raw and through the official
``anthropic`` SDK, over real sockets on 127.0.0.1 (the AnthropicClient: test_anthropic.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import pytest
from anthropic_support import CACHED, KEY, TOOL_REPLY

from pytest_agentbench.models.sse import SSEParser
from pytest_agentbench.scripted import ScriptedServer


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as running:
        yield running


def raw_post(server: ScriptedServer, key: str, *, stream: bool) -> httpx.Response:
    body = {"model": key, "max_tokens": 64, "stream": stream}
    body["messages"] = [{"role": "user", "content": "hi"}]
    return httpx.post(f"{server.url}/messages", json=body, trust_env=False, timeout=10)


def sse_payloads(raw: bytes) -> list[tuple[str, dict[str, Any]]]:
    return [(e.event, json.loads(e.data)) for e in SSEParser().feed(raw)]


# --- the wire ------------------------------------------------------------------------


def test_wire_message_has_the_api_shape(server):
    server.add_scripts({"k": [TOOL_REPLY]})
    message = raw_post(server, "k", stream=False).json()
    assert message["id"].startswith("msg_")
    assert (message["type"], message["role"], message["model"]) == ("message", "assistant", "k")
    thinking, text, weather, clock = message["content"]
    assert thinking["type"] == "thinking" and thinking["thinking"] == "the user wants weather"
    assert isinstance(thinking["signature"], str) and thinking["signature"]
    assert text == {"type": "text", "text": "let me check"}
    assert weather == {
        "type": "tool_use",
        "id": "toolu_scripted_0",
        "name": "weather",
        "input": {"city": "Paris", "unit": "celsius"},
    }
    # Malformed arguments go out as they are written: a string where an object belongs.
    assert clock == {"type": "tool_use", "id": "toolu_given", "name": "clock", "input": "{not json"}
    assert message["stop_reason"] == "tool_use"
    assert message["stop_sequence"] is None
    assert message["usage"] == {
        "input_tokens": 1,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "output_tokens": 3 + 4,
    }


def test_wire_stream_events_in_order_with_usage_split(server):
    server.add_scripts({"k": [{**TOOL_REPLY, "usage": CACHED}]})
    events = sse_payloads(raw_post(server, "k", stream=True).content)
    assert all(name == data["type"] for name, data in events)
    names = [name for name, _ in events]
    assert names[:3] == ["message_start", "content_block_start", "ping"]
    assert names[-2:] == ["message_delta", "message_stop"]
    start = events[0][1]["message"]
    assert start["content"] == [] and start["stop_reason"] is None
    assert start["usage"] == {**CACHED, "output_tokens": 1}
    message_delta = events[-2][1]
    assert message_delta["delta"] == {"stop_reason": "tool_use", "stop_sequence": None}
    assert message_delta["usage"] == {"output_tokens": 9}
    starts = [d for n, d in events if n == "content_block_start"]
    assert [(s["index"], s["content_block"]["type"]) for s in starts] == [
        (0, "thinking"),
        (1, "text"),
        (2, "tool_use"),
        (3, "tool_use"),
    ]
    assert starts[2]["content_block"] == {
        "type": "tool_use",
        "id": "toolu_scripted_0",
        "name": "weather",
        "input": {},
    }
    deltas = [d for n, d in events if n == "content_block_delta"]
    by_block: dict[int, list[dict[str, Any]]] = {}
    for d in deltas:
        by_block.setdefault(d["index"], []).append(d["delta"])
    assert "".join(d["thinking"] for d in by_block[0][:-1]) == "the user wants weather"
    assert by_block[0][-1]["type"] == "signature_delta"
    assert "".join(d["text"] for d in by_block[1]) == "let me check"
    pieces = [d["partial_json"] for d in by_block[2]]
    assert len(pieces) > 1 and all(d["type"] == "input_json_delta" for d in by_block[2])
    assert json.loads("".join(pieces)) == {"city": "Paris", "unit": "celsius"}
    assert "".join(d["partial_json"] for d in by_block[3]) == "{not json"
    assert sum(n == "content_block_stop" for n in names) == 4


@pytest.mark.parametrize(
    ("finish", "tools", "stop"),
    [
        ("stop", False, "end_turn"),
        ("length", False, "max_tokens"),
        ("tool_calls", False, "tool_use"),
        ("stop", True, "tool_use"),
        ("length", True, "max_tokens"),
        ("pause_turn", False, "pause_turn"),
    ],
)
def test_wire_stop_reason_mapping(server, finish, tools, stop):
    reply: dict[str, Any] = {"text": "x", "finish_reason": finish}
    if tools:
        reply["tool_calls"] = [{"name": "t"}]
    server.add_scripts({"k": [reply]})
    assert raw_post(server, "k", stream=False).json()["stop_reason"] == stop


@pytest.mark.parametrize(
    ("error", "status", "error_type"),
    [
        ({"status": 529, "message": "Overloaded"}, 529, "overloaded_error"),
        ({"status": 429, "message": "slow"}, 429, "rate_limit_error"),
        ({"status": 500, "message": "boom"}, 500, "api_error"),
        ({"status": 401, "message": "bad key"}, 401, "authentication_error"),
        ({"status": 400, "message": "bad", "type": "my_own_error"}, 400, "my_own_error"),
    ],
)
def test_wire_error_bodies(server, error, status, error_type):
    server.add_scripts({"k": [{"error": error}]})
    response = raw_post(server, "k", stream=True)
    assert response.status_code == status
    assert response.json() == {
        "type": "error",
        "error": {"type": error_type, "message": error["message"]},
    }


def test_wire_unknown_script_is_not_found_error(server):
    response = raw_post(server, "nobody", stream=False)
    assert response.status_code == 404
    assert response.json()["error"]["type"] == "not_found_error"


# --- the official SDK against the scripted server ------------------------------------


@pytest.fixture
def sdk(server) -> Iterator[anthropic.Anthropic]:
    http = anthropic.DefaultHttpxClient(trust_env=False)
    client = anthropic.Anthropic(
        base_url=server.url.removesuffix("/v1"), api_key=KEY, max_retries=0, http_client=http
    )
    yield client
    client.close()


SDK_REPLY = {
    "text": "It is sunny in Paris.",
    "thinking": "I should call the weather tool.",
    "tool_calls": [{"name": "weather", "arguments": {"city": "Paris", "days": [1, 2]}}],
    "usage": CACHED,
}
SDK_ARGS: dict[str, Any] = {
    "model": "k",
    "max_tokens": 256,
    "messages": [{"role": "user", "content": "weather?"}],
}


def assert_sdk_message(message: Any) -> None:
    thinking, text, tool = message.content
    assert (thinking.type, thinking.thinking) == ("thinking", SDK_REPLY["thinking"])
    assert thinking.signature
    assert (text.type, text.text) == ("text", SDK_REPLY["text"])
    assert (tool.type, tool.id, tool.name) == ("tool_use", "toolu_scripted_0", "weather")
    assert tool.input == {"city": "Paris", "days": [1, 2]}
    assert message.stop_reason == "tool_use"
    assert message.usage.input_tokens == 12
    assert message.usage.cache_read_input_tokens == 44000
    assert message.usage.cache_creation_input_tokens == 300
    assert message.usage.output_tokens == 9


def test_sdk_create(server, sdk):
    server.add_scripts({"k": [SDK_REPLY]})
    message = sdk.messages.create(**SDK_ARGS)
    assert message.id.startswith("msg_") and message.model == "k"
    assert_sdk_message(message)
    # This SDK version sends the key as a bearer token; either way the record redacts it.
    assert KEY not in json.dumps(server.requests)


def test_sdk_stream_helper(server, sdk):
    server.add_scripts({"k": [SDK_REPLY]})
    with sdk.messages.stream(**SDK_ARGS) as stream:
        text = "".join(stream.text_stream)
        message = stream.get_final_message()
    assert text == SDK_REPLY["text"]
    assert_sdk_message(message)


def test_sdk_create_stream_parses_every_event(server, sdk):
    server.add_scripts({"k": [SDK_REPLY]})
    events = list(sdk.messages.create(**SDK_ARGS, stream=True))
    assert events[0].type == "message_start"
    assert events[-1].type == "message_stop"
    delta = events[-2]
    assert (delta.type, delta.delta.stop_reason, delta.usage.output_tokens) == (
        "message_delta",
        "tool_use",
        9,
    )
    assert {e.delta.type for e in events if e.type == "content_block_delta"} == {
        "thinking_delta",
        "signature_delta",
        "text_delta",
        "input_json_delta",
    }


def test_sdk_sees_scripted_errors(server, sdk):
    server.add_scripts({"k": [{"error": {"status": 429, "message": "slow down"}}]})
    with pytest.raises(anthropic.RateLimitError) as info:
        sdk.messages.create(**SDK_ARGS)
    assert info.value.status_code == 429
    assert info.value.body == {
        "type": "error",
        "error": {"type": "rate_limit_error", "message": "slow down"},
    }
