"""The OpenAI Responses client and the scripted server's Responses wire, driven against
each other (and the official ``openai`` SDK against the server) on 127.0.0.1."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest
from openai import OpenAI
from openai.types.responses import Response, ResponseStreamEvent
from pydantic import TypeAdapter

from pytest_agentbench.errors import ProviderError, RateLimited, TransportError
from pytest_agentbench.models.base import (
    Generation,
    ModelRequest,
    ModelSpec,
    StreamEvent,
    ToolCall,
    ToolSpec,
    Usage,
)
from pytest_agentbench.models.openai_responses import OpenAIResponsesClient
from pytest_agentbench.scripted import ScriptedServer

KEY = "sk-test-responses-do-not-leak-5678"

WEATHER = ToolSpec(
    name="get_weather",
    description="Current weather for a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}},
)
CALLS = [
    {"name": "get_weather", "arguments": {"city": "Oslo"}, "id": "call_a1"},
    {"name": "get_weather", "arguments": '{"city": "Ber', "id": "call_b2"},
]


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as running:
        yield running


def ask(*, stream: bool = True, timeout_s: float | None = 10, **kwargs: Any) -> ModelRequest:
    kwargs.setdefault("messages", ({"role": "user", "content": "what now"},))
    return ModelRequest(stream=stream, timeout_s=timeout_s, **kwargs)


def client_for(
    server: ScriptedServer, key: str, api_key: str | None = KEY
) -> OpenAIResponsesClient:
    """The model name carries the script key to the server (no script header is sent)."""
    spec = ModelSpec("openai-responses", key)
    return OpenAIResponsesClient(spec, server.url, api_key, trust_env=False)


def generate(
    server: ScriptedServer, key: str, **kwargs: Any
) -> tuple[Generation, list[StreamEvent]]:
    events: list[StreamEvent] = []
    client = client_for(server, key)
    try:
        return client.generate(ask(**kwargs), events.append), events
    finally:
        client.close()


# --- successful generations ----------------------------------------------------------


@pytest.mark.parametrize("stream", [True, False])
def test_text_and_reasoning_summary(server, stream):
    server.add_scripts({"k": [{"text": "the answer is 7", "thinking": "add three and four"}]})
    generation, events = generate(server, "k", stream=stream)
    assert generation.text == "the answer is 7"
    assert generation.thinking == "add three and four"
    assert generation.tool_calls == ()
    assert generation.finish_reason == "stop"
    kinds = [e.kind for e in events]
    assert "".join(e.text for e in events if e.kind == "text") == "the answer is 7"
    assert "".join(e.text for e in events if e.kind == "thinking") == "add three and four"
    assert kinds.index("thinking") < kinds.index("text") < kinds.index("finish")
    assert [e.data for e in events if e.kind == "finish"] == [{"finish_reason": "stop"}]
    if stream:
        assert kinds.count("text") == 2  # 15 characters in deltas of 8
    assert generation.exchange["response"]["response_status"] == "completed"


@pytest.mark.parametrize("stream", [True, False])
def test_function_calls_including_malformed_arguments(server, stream):
    server.add_scripts({"k": [{"text": "Checking.", "tool_calls": CALLS, "chunk_size": 5}]})
    generation, events = generate(server, "k", stream=stream, tools=(WEATHER,))
    assert generation.text == "Checking."
    assert generation.tool_calls == (
        ToolCall("call_a1", "get_weather", {"city": "Oslo"}, '{"city": "Oslo"}'),
        ToolCall("call_b2", "get_weather", None, '{"city": "Ber'),
    )
    assert generation.finish_reason == "tool_calls"
    fragments = [e.data for e in events if e.kind == "tool_call"]
    for index, call in enumerate(generation.tool_calls):
        mine = [f for f in fragments if f["index"] == index]
        assert {(f["id"], f["name"]) for f in mine} == {(call.id, call.name)}
        assert "".join(f["arguments_delta"] for f in mine) == call.raw_arguments
    if stream:
        assert len(fragments) > 4  # arguments arrive in pieces, not whole
    assert generation.exchange["response"]["tool_calls"][1] == {
        "id": "call_b2",
        "name": "get_weather",
        "arguments": '{"city": "Ber',
    }


def test_tool_calls_only_reply_has_no_message(server):
    server.add_scripts({"k": [{"tool_calls": CALLS[:1]}]})
    generation, _ = generate(server, "k", stream=False)
    assert generation.text == ""
    assert [c.name for c in generation.tool_calls] == ["get_weather"]
    assert generation.finish_reason == "tool_calls"


def test_default_usage_counts_words(server):
    server.add_scripts({"k": [{"text": "one two three", "thinking": "hmm"}]})
    generation, _ = generate(server, "k", system="Be brief please.")
    # instructions 3 words + "what now" 2 words; text 3 words + thinking 1 word.
    assert generation.usage_native == {
        "input_tokens": 5,
        "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
        "output_tokens": 4,
        "output_tokens_details": {"reasoning_tokens": 1},
        "total_tokens": 9,
    }
    assert generation.usage == Usage(input=5, output=4, cache_read=0, reasoning=1, total=9)


@pytest.mark.parametrize("stream", [True, False])
def test_length_is_an_incomplete_response(server, stream):
    server.add_scripts({"k": [{"text": "loop " * 10, "finish_reason": "length"}]})
    generation, events = generate(server, "k", stream=stream)
    assert generation.text == "loop " * 10
    assert generation.finish_reason == "length"
    response = generation.exchange["response"]
    assert (response["response_status"], response["incomplete_reason"]) == (
        "incomplete",
        "max_output_tokens",
    )
    assert events[-1] == StreamEvent("finish", data={"finish_reason": "length"})


def test_prompt_fidelity(server):
    server.add_scripts({"k": ["done"]})
    messages = (
        {"role": "user", "content": "Weather in Oslo?"},
        {
            "role": "assistant",
            "content": "Let me look.",
            "tool_calls": [{"id": "call_1", "name": "get_weather", "arguments": {"city": "Oslo"}}],
        },
        {
            "role": "tool",
            "tool_call_id": "call_1",
            "name": "get_weather",
            "content": "sunny, 21 C",
            "is_error": False,
        },
        {"role": "assistant", "content": "", "tool_calls": [{"id": "c2", "name": "noop"}]},
        {"role": "tool", "tool_call_id": "c2", "name": "noop", "content": "ok"},
        {"role": "user", "content": "And tomorrow?"},
    )
    request = ask(messages=messages, system="Be brief.", tools=(WEATHER,), max_tokens=64)
    client = client_for(server, "k")
    try:
        generation = client.generate(request)
        client.generate(ask(stream=False))
    finally:
        client.close()
    full, plain = server.requests
    assert full["path"] == "/v1/responses"
    assert full["body"] == {
        "model": "k",
        "instructions": "Be brief.",
        "input": [
            {"role": "user", "content": "Weather in Oslo?"},
            {"role": "assistant", "content": "Let me look."},
            {
                "type": "function_call",
                "call_id": "call_1",
                "name": "get_weather",
                "arguments": '{"city": "Oslo"}',
            },
            {"type": "function_call_output", "call_id": "call_1", "output": "sunny, 21 C"},
            {"type": "function_call", "call_id": "c2", "name": "noop", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c2", "output": "ok"},
            {"role": "user", "content": "And tomorrow?"},
        ],
        "tools": [
            {
                "type": "function",
                "name": "get_weather",
                "description": "Current weather for a city.",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
                "strict": False,
            }
        ],
        "max_output_tokens": 64,
        "stream": True,
        "store": False,
    }
    assert plain["body"] == {
        "model": "k",
        "input": [{"role": "user", "content": "what now"}],
        "stream": False,
        "store": False,
    }
    assert generation.exchange["request"]["body"] == full["body"]
    # instructions 2 + user 3 + assistant 3 + tool outputs 3 + 1 + user 2 (arguments are not text)
    assert generation.usage_native["input_tokens"] == 14


# --- shapes the scripted server never sends ------------------------------------------


@pytest.fixture
def canned() -> Iterator[dict[str, Any]]:
    """A server answering every POST with ``canned["body"]`` (SSE unless ``json``)."""
    content: dict[str, Any] = {}

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["content-length"]))
            body = content["body"]
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    content["url"] = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    yield content
    httpd.shutdown()
    httpd.server_close()
    thread.join()


def sse(*payloads: dict[str, Any]) -> bytes:
    return b"".join(
        f"event: {p['type']}\ndata: {json.dumps({**p, 'sequence_number': n})}\n\n".encode()
        for n, p in enumerate(payloads)
    )


def canned_generate(canned: dict[str, Any], body: bytes, *, stream: bool = True) -> Generation:
    canned["body"] = body
    client = OpenAIResponsesClient(ModelSpec("openai-responses", "m"), canned["url"], KEY)
    try:
        return client.generate(ask(stream=stream))
    finally:
        client.close()


TEXT_DELTA = {"type": "response.output_text.delta", "output_index": 0, "delta": "half an"}


@pytest.mark.parametrize(
    ("failure", "kind", "detail"),
    [
        (
            {
                "type": "response.failed",
                "response": {
                    "status": "failed",
                    "error": {"code": "server_error", "message": "boom"},
                },
            },
            ProviderError,
            "response.failed from {url}/responses (server_error): boom",
        ),
        (
            {"type": "error", "code": "rate_limit_exceeded", "message": "too fast", "param": None},
            RateLimited,
            "error event from {url}/responses (rate_limit_exceeded): too fast",
        ),
    ],
)
def test_errors_inside_the_stream_keep_what_arrived(canned, failure, kind, detail):
    with pytest.raises(ProviderError) as info:
        canned_generate(canned, sse(TEXT_DELTA, failure))
    assert type(info.value) is kind
    assert str(info.value) == "openai-responses/m: " + detail.format(url=canned["url"])
    assert info.value.partial.text == "half an"
    assert info.value.retry_after is None


def test_a_stream_ending_cleanly_without_its_final_event_is_a_transport_error(canned):
    with pytest.raises(TransportError) as info:
        canned_generate(canned, sse(TEXT_DELTA))
    assert str(info.value) == (
        f"openai-responses/m: the stream from {canned['url']}/responses ended before its "
        "finish (no response.completed or response.incomplete)"
    )
    assert info.value.partial.text == "half an"


def test_final_output_fills_channels_the_stream_left_out(canned):
    final = {
        "status": "completed",
        "output": [
            {"type": "reasoning", "summary": [{"type": "summary_text", "text": t} for t in "ab"]},
            {"type": "message", "content": [{"type": "output_text", "text": "hi"}]},
        ],
        "usage": {"input_tokens": 1, "output_tokens": 2},
    }
    generation = canned_generate(canned, sse({"type": "response.completed", "response": final}))
    assert (generation.text, generation.thinking) == ("hi", "a\n\nb")
    assert generation.usage == Usage(input=1, output=2, total=3)


def test_a_failed_non_streamed_response_is_a_provider_error(canned):
    body = {"object": "response", "status": "failed", "error": {"code": "x", "message": "no"}}
    with pytest.raises(ProviderError, match=r"response from .* \(x\): no$"):
        canned_generate(canned, json.dumps(body).encode(), stream=False)


# --- the official openai SDK against the scripted server -----------------------------

SDK_REPLY = {
    "text": "It is sunny.",
    "thinking": "The user wants weather.",
    "tool_calls": CALLS[:1],
    "usage": {
        "input_tokens": 120,
        "input_tokens_details": {"cached_tokens": 100, "cache_write_tokens": 0},
        "output_tokens": 9,
        "output_tokens_details": {"reasoning_tokens": 5},
        "total_tokens": 129,
    },
}
SDK_TOOL = {
    "type": "function",
    "name": "get_weather",
    "parameters": dict(WEATHER.parameters),
    "strict": False,
}


@pytest.fixture
def sdk(server) -> Iterator[OpenAI]:
    server.add_scripts({"sdk": [SDK_REPLY]})
    client = OpenAI(api_key=KEY, base_url=server.url, max_retries=0)
    yield client
    client.close()


def test_sdk_non_streaming(server, sdk):
    raw = sdk.responses.with_raw_response.create(model="sdk", input="Weather?", tools=[SDK_TOOL])
    Response.model_validate(raw.http_response.json())  # strict: every required field
    response = raw.parse()
    assert response.output_text == "It is sunny."
    reasoning, message, call = response.output
    assert reasoning.summary[0].text == "The user wants weather."
    assert message.content[0].text == "It is sunny."
    assert (call.call_id, call.name, json.loads(call.arguments)) == (
        "call_a1",
        "get_weather",
        {"city": "Oslo"},
    )
    assert response.usage.input_tokens_details.cached_tokens == 100
    assert response.usage.output_tokens_details.reasoning_tokens == 5


def test_sdk_streaming_events(server, sdk):
    events = list(sdk.responses.create(model="sdk", input="Weather?", stream=True))
    assert [e.sequence_number for e in events] == list(range(len(events)))
    kinds = [e.type for e in events]
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds[-1] == "response.completed"
    for kind in (
        "response.reasoning_summary_part.added",
        "response.reasoning_summary_text.done",
        "response.content_part.done",
        "response.output_text.done",
        "response.function_call_arguments.done",
    ):
        assert kind in kinds
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    thinking = "".join(e.delta for e in events if e.type == "response.reasoning_summary_text.delta")
    arguments = "".join(
        e.delta for e in events if e.type == "response.function_call_arguments.delta"
    )
    assert (text, thinking, json.loads(arguments)) == (
        "It is sunny.",
        "The user wants weather.",
        {"city": "Oslo"},
    )
    final = events[-1].response
    assert final.output_text == "It is sunny."
    assert final.usage.total_tokens == 129


def test_sdk_stream_helper_accumulates_the_same_response(server, sdk):
    with sdk.responses.stream(model="sdk", input="Weather?") as stream:
        final = stream.get_final_response()
    assert final.output_text == "It is sunny."
    assert [item.type for item in final.output] == ["reasoning", "message", "function_call"]


def test_every_streamed_event_validates_strictly(server):
    server.add_scripts({"k": [SDK_REPLY, {"text": "cut", "finish_reason": "length"}]})
    adapter = TypeAdapter(ResponseStreamEvent)
    for _ in range(2):
        body = {"model": "k", "input": "x", "stream": True}
        response = httpx.post(f"{server.url}/responses", json=body, trust_env=False)
        blocks = [b for b in response.text.split("\n\n") if b]
        for block in blocks:
            name, data = block.split("\n")
            event = adapter.validate_python(json.loads(data.removeprefix("data: ")))
            assert name == f"event: {event.type}"
    assert event.type == "response.incomplete"
    assert event.response.incomplete_details.reason == "max_output_tokens"
