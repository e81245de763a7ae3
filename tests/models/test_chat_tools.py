"""Chat Completions tool calls and inline <think> blocks: the scripted wire, our client,
and the official ``openai`` SDK, all against the real scripted server on 127.0.0.1."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from pytest_agentbench.errors import TransportError
from pytest_agentbench.models.base import (
    Generation,
    ModelRequest,
    ModelSpec,
    StreamEvent,
    ToolCall,
    ToolSpec,
)
from pytest_agentbench.models.openai_chat import OpenAIChatClient
from pytest_agentbench.models.think import ThinkSplitter, split_think
from pytest_agentbench.scripted import ScriptedServer

WEATHER = {"name": "get_weather", "arguments": {"city": "Paris", "unit": "C"}, "id": "call_w1"}
WEATHER_RAW = '{"city": "Paris", "unit": "C"}'
CLOCK = {"name": "get_time", "arguments": "{}", "id": "call_t2"}
CALL_CLOCK = ToolCall("call_t2", "get_time", {}, "{}").as_message_part()
TOOLS = (
    ToolSpec(
        "get_weather",
        "Current weather in a city.",
        {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    ),
    ToolSpec("get_time"),
)


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as running:
        yield running


def generate(
    server: ScriptedServer, key: str, *, stream: bool = True, **kwargs: Any
) -> tuple[Generation, list[StreamEvent]]:
    events: list[StreamEvent] = []
    split = kwargs.pop("split_think", True)
    client = OpenAIChatClient(
        ModelSpec("openai", key), server.url, "sk-x", trust_env=False, split_think=split
    )
    request = ModelRequest(
        kwargs.pop("messages", ({"role": "user", "content": "weather?"},)),
        stream=stream,
        timeout_s=10,
        **kwargs,
    )
    try:
        return client.generate(request, events.append), events
    finally:
        client.close()


# --- the wire ------------------------------------------------------------------------


def test_wire_non_streamed_tool_calls_have_the_real_shape(server):
    server.add_scripts({"k": [{"tool_calls": [WEATHER, CLOCK]}]})
    with httpx.Client(trust_env=False) as http:
        body = {"model": "k", "messages": [{"role": "user", "content": "hi"}]}
        choice = http.post(f"{server.url}/chat/completions", json=body).json()["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"]["content"] is None
    assert choice["message"]["tool_calls"] == [
        {
            "id": "call_w1",
            "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city": "Paris", "unit": "C"}'},
        },
        {"id": "call_t2", "type": "function", "function": {"name": "get_time", "arguments": "{}"}},
    ]


def test_wire_streamed_tool_calls_come_in_fragments(server):
    server.add_scripts({"k": [{"text": "Sure.", "tool_calls": [WEATHER, CLOCK], "chunk_size": 5}]})
    with httpx.Client(trust_env=False) as http:
        body = {"model": "k", "messages": [], "stream": True}
        text = http.post(f"{server.url}/chat/completions", json=body).text
    chunks = [json.loads(e[6:]) for e in text.split("\n\n") if e.startswith("data: {")]
    fragments = [f for c in chunks for f in c["choices"][0]["delta"].get("tool_calls", [])]
    assert fragments[0] == {
        "index": 0,
        "id": "call_w1",
        "type": "function",
        "function": {"name": "get_weather", "arguments": ""},
    }
    later = [f for f in fragments if f["index"] == 0][1:]
    assert all(
        set(f) == {"index", "function"} and set(f["function"]) == {"arguments"} for f in later
    )
    assert "".join(f["function"]["arguments"] for f in later) == '{"city": "Paris", "unit": "C"}'
    assert max(len(f["function"]["arguments"]) for f in later) == 5
    assert [f["id"] for f in fragments if "id" in f] == ["call_w1", "call_t2"]
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"


@pytest.mark.parametrize("stream", [True, False])
def test_an_explicit_finish_reason_wins_over_tool_calls(server, stream):
    server.add_scripts({"k": [{"tool_calls": [CLOCK], "finish_reason": "length"}]})
    generation, _ = generate(server, "k", stream=stream)
    assert generation.finish_reason == "length"
    assert generation.tool_calls[0].name == "get_time"


# --- the client ------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [True, False])
def test_tool_calls_are_parsed_and_streamed_as_events(server, stream):
    server.add_scripts(
        {"k": [{"text": "Let me check.", "tool_calls": [WEATHER, CLOCK], "chunk_size": 4}]}
    )
    generation, events = generate(server, "k", stream=stream, tools=TOOLS)
    assert generation.text == "Let me check."
    assert generation.finish_reason == "tool_calls"
    assert generation.tool_calls == (
        ToolCall("call_w1", "get_weather", {"city": "Paris", "unit": "C"}, WEATHER_RAW),
        ToolCall("call_t2", "get_time", {}, "{}"),
    )
    calls = [e.data for e in events if e.kind == "tool_call"]
    for index, call in enumerate(generation.tool_calls):
        mine = [data for data in calls if data["index"] == index]
        assert all((d["id"], d["name"]) == (call.id, call.name) for d in mine)
        assert "".join(d["arguments_delta"] for d in mine) == call.raw_arguments
    if stream:
        assert len([d for d in calls if d["index"] == 0]) == 1 + -(-len(WEATHER_RAW) // 4)
    kinds = [e.kind for e in events]
    assert kinds.index("text") < kinds.index("tool_call") < kinds.index("finish")
    assert generation.exchange["response"]["tool_calls"] == [
        {"id": "call_w1", "name": "get_weather", "arguments": WEATHER_RAW},
        {"id": "call_t2", "name": "get_time", "arguments": "{}"},
    ]


@pytest.mark.parametrize("stream", [True, False])
@pytest.mark.parametrize(
    ("raw", "parsed"),
    [('{"city": "Par', None), ("[1, 2]", None), ("not json", None), ("", {}), ("  ", {})],
)
def test_malformed_arguments_keep_the_raw_text(server, stream, raw, parsed):
    server.add_scripts({"k": [{"tool_calls": [{"name": "get_weather", "arguments": raw}]}]})
    generation, _ = generate(server, "k", stream=stream)
    [call] = generation.tool_calls
    assert (call.id, call.name, call.arguments, call.raw_arguments) == (
        "call_0",
        "get_weather",
        parsed,
        raw,
    )


def test_a_stream_broken_mid_call_keeps_the_partial_call(server):
    reply = {"tool_calls": [WEATHER], "chunk_size": 3, "truncate": True}
    server.add_scripts({"k": [reply]})
    with pytest.raises(TransportError) as info:
        generate(server, "k")
    [call] = info.value.partial.tool_calls
    assert call.name == "get_weather" and call.arguments is None
    assert WEATHER_RAW.startswith(call.raw_arguments) and call.raw_arguments != WEATHER_RAW


def test_tools_and_tool_turns_are_sent_exactly(server):
    server.add_scripts({"k": ["It is 18 C in Paris."]})
    messages = (
        {"role": "user", "content": "weather?"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": "call_w1", "name": "get_weather", "arguments": {"city": "Paris"}},
                {"id": "call_x", "name": "get_weather", "arguments": '{"city": "Pa'},
            ],
        },
        {"role": "tool", "tool_call_id": "call_w1", "name": "get_weather", "content": "18 C"},
        {
            "role": "tool",
            "tool_call_id": "call_x",
            "name": "get_weather",
            "content": "bad arguments",
            "is_error": True,
        },
        {"role": "assistant", "content": "Checking.", "tool_calls": [CALL_CLOCK]},
        {"role": "tool", "tool_call_id": "call_t2", "name": "get_time", "content": "noon"},
    )
    generate(server, "k", stream=False, system="Use tools.", tools=TOOLS, messages=messages)
    [record] = server.requests
    assert record["body"] == {
        "model": "k",
        "messages": [
            {"role": "system", "content": "Use tools."},
            {"role": "user", "content": "weather?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_w1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                    },
                    {
                        "id": "call_x",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city": "Pa'},
                    },
                ],
            },
            {"role": "tool", "tool_call_id": "call_w1", "content": "18 C"},
            {"role": "tool", "tool_call_id": "call_x", "content": "bad arguments"},
            {
                "role": "assistant",
                "content": "Checking.",
                "tool_calls": [
                    {
                        "id": "call_t2",
                        "type": "function",
                        "function": {"name": "get_time", "arguments": "{}"},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_t2", "content": "noon"},
        ],
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "get_weather",
                    "description": "Current weather in a city.",
                    "parameters": {
                        "type": "object",
                        "properties": {"city": {"type": "string"}},
                        "required": ["city"],
                    },
                },
            },
            {
                "type": "function",
                "function": {
                    "name": "get_time",
                    "parameters": {"type": "object", "properties": {}},
                },
            },
        ],
        "stream": False,
    }


def test_a_generation_round_trips_into_the_next_request(server):
    """What the client parsed is what it sends back: the agent loop's path."""
    server.add_scripts({"k": [{"tool_calls": [WEATHER]}, "done"]})
    first, _ = generate(server, "k")
    assistant = {
        "role": "assistant",
        "content": first.text,
        "tool_calls": [call.as_message_part() for call in first.tool_calls],
    }
    result = {"role": "tool", "tool_call_id": "call_w1", "name": "get_weather", "content": "18"}
    messages = ({"role": "user", "content": "weather?"}, assistant, result)
    second, _ = generate(server, "k", messages=messages)
    assert second.text == "done"
    sent = server.requests[1]["body"]["messages"][1]["tool_calls"][0]
    assert json.loads(sent["function"]["arguments"]) == WEATHER["arguments"]
    assert sent["id"] == "call_w1"


# --- <think> splitting -------------------------------------------------------------------

SAMPLES = [
    (
        "  \n<think>\nplan: a < b, </thin k> and <think> stay\n</think>\n\n"
        "The answer <think>7</think>",
        "\nplan: a < b, </thin k> and <think> stay\n",
        "The answer <think>7</think>",
    ),
    ("<thinking>x</think>y</thinking> z", "x</think>y", "z"),
    ("Hi <think>not leading</think>", "", "Hi <think>not leading</think>"),
    ("<think>never closed </thi", "never closed </thi", ""),
    ("  <thin", "", "  <thin"),
    ("<think></think>", "", ""),
    (" \n ", "", " \n "),
    ("<thinker>no</thinker>", "", "<thinker>no</thinker>"),
]


def feed_all(pieces: list[str]) -> tuple[str, str]:
    splitter = ThinkSplitter()
    out = [p for piece in pieces for p in splitter.feed(piece)] + splitter.flush()
    assert all(text for _, text in out)
    return (
        "".join(t for channel, t in out if channel == "thinking"),
        "".join(t for channel, t in out if channel == "text"),
    )


@pytest.mark.parametrize(("sample", "thinking", "text"), SAMPLES)
def test_think_split_is_the_same_at_every_split_position(sample, thinking, text):
    assert split_think(sample) == (thinking, text)
    for cut in range(len(sample) + 1):
        assert feed_all([sample[:cut], sample[cut:]]) == (thinking, text), f"cut at {cut}"
    for first in range(len(sample) + 1):
        for second in range(first, len(sample) + 1, 3):
            pieces = [sample[:first], sample[first:second], sample[second:]]
            assert feed_all(pieces) == (thinking, text), pieces
    assert feed_all(list(sample)) == (thinking, text)


def test_think_splitter_emits_thinking_before_the_block_closes():
    splitter = ThinkSplitter()
    assert splitter.feed("<think>step one, ") == [("thinking", "step one, ")]
    assert splitter.feed("step two</th") == [("thinking", "step two")]
    assert splitter.feed("ink>\n\n4") == [("text", "4")]
    assert splitter.feed("2") == [("text", "2")]
    assert splitter.flush() == []


@pytest.mark.parametrize("stream", [True, False])
def test_the_client_splits_inline_think_into_the_thinking_channel(server, stream):
    reply = {"text": "<think>\n2 + 2 is 4\n</think>\n\nThe answer is 4.", "chunk_size": 3}
    server.add_scripts({"k": [reply]})
    generation, events = generate(server, "k", stream=stream)
    assert generation.thinking == "\n2 + 2 is 4\n"
    assert generation.text == "The answer is 4."
    assert "".join(e.text for e in events if e.kind == "thinking") == generation.thinking
    assert "".join(e.text for e in events if e.kind == "text") == generation.text
    kinds = [e.kind for e in events]
    assert max(i for i, k in enumerate(kinds) if k == "thinking") < kinds.index("text")
    assert kinds.index("finish") > max(i for i, k in enumerate(kinds) if k == "text")
    assert generation.exchange["response"]["text"] == "The answer is 4."


def test_a_broken_stream_keeps_the_held_back_part_of_a_think_block(server):
    # Cut after "<think>ab</think": the splitter still holds "</think" (it could become
    # the closing tag); what arrived is kept in the partial all the same.
    reply = {"text": "<think>ab</think>the answer", "chunk_size": 4, "truncate": True}
    server.add_scripts({"k": [reply]})
    with pytest.raises(TransportError) as info:
        generate(server, "k")
    assert (info.value.partial.thinking, info.value.partial.text) == ("ab</think", "")


def test_split_think_off_keeps_the_text(server):
    server.add_scripts({"k": [{"text": "<think>x</think>y"}]})
    generation, _ = generate(server, "k", split_think=False)
    assert (generation.thinking, generation.text) == ("", "<think>x</think>y")


def test_an_unfinished_tag_held_at_the_end_of_a_stream_is_text(server):
    server.add_scripts({"k": [{"text": "  <thi", "chunk_size": 2}]})
    generation, events = generate(server, "k")
    assert generation.text == "  <thi" and generation.thinking == ""
    assert [e.kind for e in events][-3:] == ["text", "finish", "usage"]


# --- the official openai SDK -------------------------------------------------------------


@pytest.fixture
def sdk(server: ScriptedServer) -> Iterator[openai.OpenAI]:
    http = httpx.Client(trust_env=False)
    client = openai.OpenAI(base_url=server.url, api_key="sk-x", max_retries=0, http_client=http)
    yield client
    client.close()


SDK_TOOLS: list[Any] = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather in a city.",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]


def test_sdk_non_streamed_tool_calls(server, sdk):
    server.add_scripts({"k": [{"tool_calls": [WEATHER, CLOCK]}]})
    completion = sdk.chat.completions.create(
        model="k", messages=[{"role": "user", "content": "weather?"}], tools=SDK_TOOLS
    )
    choice = completion.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content is None
    calls = choice.message.tool_calls
    assert [(c.id, c.type, c.function.name) for c in calls] == [
        ("call_w1", "function", "get_weather"),
        ("call_t2", "function", "get_time"),
    ]
    assert json.loads(calls[0].function.arguments) == {"city": "Paris", "unit": "C"}
    assert server.requests[0]["body"]["tools"] == SDK_TOOLS


def test_sdk_streamed_tool_calls_and_usage(server, sdk):
    server.add_scripts({"k": [{"text": "On it.", "tool_calls": [WEATHER, CLOCK], "chunk_size": 4}]})
    stream = sdk.chat.completions.create(
        model="k",
        messages=[{"role": "user", "content": "weather?"}],
        tools=SDK_TOOLS,
        stream=True,
        stream_options={"include_usage": True},
    )
    text, calls, finish, usage = "", {}, None, None
    for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage
        if not chunk.choices:
            continue
        choice = chunk.choices[0]
        text += choice.delta.content or ""
        for fragment in choice.delta.tool_calls or []:
            call = calls.setdefault(fragment.index, {"id": None, "name": None, "arguments": ""})
            call["id"] = call["id"] or fragment.id
            if fragment.function is not None:
                call["name"] = call["name"] or fragment.function.name
                call["arguments"] += fragment.function.arguments or ""
        finish = choice.finish_reason or finish
    assert text == "On it."
    assert calls == {
        0: {"id": "call_w1", "name": "get_weather", "arguments": WEATHER_RAW},
        1: {"id": "call_t2", "name": "get_time", "arguments": "{}"},
    }
    assert finish == "tool_calls"
    assert usage is not None and usage.completion_tokens == 2 + 4 + 1


def test_sdk_sends_tool_turns_the_server_records(server, sdk):
    server.add_scripts({"k": ["18 C"]})
    messages: list[Any] = [
        {"role": "user", "content": "weather?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_w1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_w1", "content": "18 C"},
    ]
    completion = sdk.chat.completions.create(model="k", messages=messages, tools=SDK_TOOLS)
    assert completion.choices[0].message.content == "18 C"
    assert completion.choices[0].finish_reason == "stop"
    assert server.requests[0]["body"]["messages"] == messages
