"""The Anthropic Messages wire of the scripted server, the AnthropicClient against it (and
against a canned server for shapes the scripted server never sends), and the official
``anthropic`` SDK against it, all over real sockets on 127.0.0.1."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from anthropic_support import CACHED, KEY, TOOL_REPLY

from pytest_agentbench.errors import ProviderError, RateLimited, TransportError
from pytest_agentbench.models.anthropic import AnthropicClient
from pytest_agentbench.models.base import (
    Generation,
    ModelRequest,
    ModelSpec,
    StreamEvent,
    ToolCall,
    ToolSpec,
    Usage,
)
from pytest_agentbench.scripted import ScriptedServer


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as running:
        yield running


def ask(*, stream: bool = True, timeout_s: float | None = 10, **kwargs: Any) -> ModelRequest:
    return ModelRequest(
        messages=({"role": "user", "content": "what now"},),
        stream=stream,
        timeout_s=timeout_s,
        **kwargs,
    )


def client_for(server: ScriptedServer, key: str, **kwargs: Any) -> AnthropicClient:
    """The model name carries the script key to the server."""
    return AnthropicClient(ModelSpec("anthropic", key), server.url, KEY, trust_env=False, **kwargs)


def generate(
    server: ScriptedServer, key: str, request: ModelRequest | None = None, **kwargs: Any
) -> tuple[Generation, list[StreamEvent]]:
    events: list[StreamEvent] = []
    client = client_for(server, key)
    try:
        return client.generate(request or ask(**kwargs), events.append), events
    finally:
        client.close()


# --- the client: successful generations ----------------------------------------------


@pytest.mark.parametrize("stream", [True, False])
def test_text_thinking_and_events(server, stream):
    server.add_scripts({"k": [{"text": "the answer is 7", "thinking": "add them up"}]})
    generation, events = generate(server, "k", stream=stream)
    assert generation.text == "the answer is 7"
    assert generation.thinking == "add them up"
    assert generation.finish_reason == "stop"
    assert generation.tool_calls == ()
    kinds = [e.kind for e in events]
    assert "".join(e.text for e in events if e.kind == "text") == "the answer is 7"
    assert "".join(e.text for e in events if e.kind == "thinking") == "add them up"
    assert kinds.index("thinking") < kinds.index("text") < kinds.index("finish")
    assert [e.data for e in events if e.kind == "finish"] == [{"finish_reason": "stop"}]
    # Usage events carry the merged usage so far; the last is the final one.
    assert [e.data for e in events if e.kind == "usage"][-1] == generation.usage_native


@pytest.mark.parametrize("stream", [True, False])
def test_tool_calls_including_malformed_arguments(server, stream):
    server.add_scripts({"k": [TOOL_REPLY]})
    generation, events = generate(server, "k", stream=stream)
    assert generation.finish_reason == "tool_calls"
    assert generation.text == "let me check"
    weather, clock = generation.tool_calls
    assert weather.id == "toolu_scripted_0" and weather.name == "weather"
    assert weather.arguments == {"city": "Paris", "unit": "celsius"}
    assert json.loads(weather.raw_arguments) == weather.arguments
    assert clock == ToolCall("toolu_given", "clock", None, "{not json")
    fragments: dict[int, str] = {}
    for event in events:
        if event.kind == "tool_call":
            fragments[event.data["index"]] = (
                fragments.get(event.data["index"], "") + event.data["arguments_delta"]
            )
            expected = (weather, clock)[event.data["index"]]
            assert (event.data["id"], event.data["name"]) == (expected.id, expected.name)
    assert fragments == {0: weather.raw_arguments, 1: "{not json"}
    response = generation.exchange["response"]
    assert response["stop_reason"] == "tool_use"
    assert response["tool_calls"][1] == {
        "id": "toolu_given",
        "name": "clock",
        "arguments": "{not json",
    }


@pytest.mark.parametrize("stream", [True, False])
def test_default_usage_counts_system_and_every_message(server, stream):
    server.add_scripts({"k": [{"text": "one two three", "thinking": "four five"}]})
    request = ask(stream=stream, system="Be very brief.")
    generation, _ = generate(server, "k", request)
    # "Be very brief." (3 words) + "what now" (2); 3 text words + 2 thinking words.
    assert generation.usage == Usage(input=5, output=5, cache_read=0, cache_write=0, total=10)
    assert generation.usage_native == {
        "input_tokens": 5,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "output_tokens": 5,
    }


CONVERSATION = (
    {"role": "user", "content": "weather in Paris and the time?"},
    {
        "role": "assistant",
        "content": "checking",
        "tool_calls": [
            {"id": "toolu_a", "name": "weather", "arguments": {"city": "Paris"}},
            {"id": "toolu_b", "name": "clock", "arguments": {}},
        ],
    },
    {"role": "tool", "tool_call_id": "toolu_a", "name": "weather", "content": "sunny"},
    {
        "role": "tool",
        "tool_call_id": "toolu_b",
        "name": "clock",
        "content": "no clock here",
        "is_error": True,
    },
    {"role": "assistant", "content": "", "tool_calls": [{"id": "toolu_c", "name": "clock"}]},
    {"role": "tool", "tool_call_id": "toolu_c", "name": "clock", "content": "12:00"},
    {"role": "user", "content": "thanks, so?"},
)
TOOLS = (
    ToolSpec(
        "weather",
        "Current weather for a city.",
        {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    ),
    ToolSpec("clock"),
)


def test_prompt_fidelity_of_the_translated_request(server):
    server.add_scripts({"k": ["fine"]})
    request = ModelRequest(
        messages=CONVERSATION, system="You are terse.", tools=TOOLS, max_tokens=321
    )
    generation, _ = generate(server, "k", request)
    (record,) = server.requests
    expected = {
        "model": "k",
        "max_tokens": 321,
        "system": "You are terse.",
        "messages": [
            {"role": "user", "content": "weather in Paris and the time?"},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "checking"},
                    {
                        "type": "tool_use",
                        "id": "toolu_a",
                        "name": "weather",
                        "input": {"city": "Paris"},
                    },
                    {"type": "tool_use", "id": "toolu_b", "name": "clock", "input": {}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_a",
                        "content": "sunny",
                        "is_error": False,
                    },
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_b",
                        "content": "no clock here",
                        "is_error": True,
                    },
                ],
            },
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "toolu_c", "name": "clock", "input": {}}],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_c",
                        "content": "12:00",
                        "is_error": False,
                    }
                ],
            },
            {"role": "user", "content": "thanks, so?"},
        ],
        "tools": [
            {
                "name": "weather",
                "description": "Current weather for a city.",
                "input_schema": {
                    "type": "object",
                    "properties": {"city": {"type": "string"}},
                    "required": ["city"],
                },
            },
            {"name": "clock", "input_schema": {"type": "object", "properties": {}}},
        ],
        "stream": True,
    }
    assert record["body"] == expected
    assert generation.exchange["request"]["body"] == expected
    # Default usage counts text and tool results: 6 + 1 + 1 + 3 + 1 + 2 words, system 3.
    assert generation.usage.input == 17


def test_default_max_tokens_and_no_system(server):
    server.add_scripts({"k": ["x"]})
    generate(server, "k", stream=False)
    assert server.requests[0]["body"] == {
        "model": "k",
        "max_tokens": 4096,
        "messages": [{"role": "user", "content": "what now"}],
        "stream": False,
    }


def test_headers_key_redacted_and_absent_from_the_exchange(server):
    server.add_scripts({"k": [{"text": "hi", "thinking": "t"}]})
    client = client_for(server, "k", extra_headers={"x-team": "evals"})
    try:
        generation = client.generate(ask())
    finally:
        client.close()
    headers = server.requests[0]["headers"]
    assert headers["x-api-key"] == "[redacted]"
    assert headers["anthropic-version"] == "2023-06-01"
    assert headers["x-team"] == "evals"
    assert "authorization" not in headers
    exchange = json.loads(json.dumps(generation.exchange))
    assert exchange["request"]["url"] == f"{server.url}/messages"
    assert exchange["response"]["status"] == 200
    assert exchange["elapsed_s"] >= 0
    assert KEY not in json.dumps(exchange)
    assert KEY not in repr(client)


def test_the_key_is_really_sent_as_x_api_key(canned):
    canned["body"] = events_body(MESSAGE_START, STOP, ("message_stop", {}))
    client = canned_client(canned, api_key=KEY)
    try:
        client.generate(ask())
    finally:
        client.close()
    assert canned["headers"]["x-api-key"] == KEY


@pytest.mark.parametrize("suffix", ["", "/", "/v1", "/v1/"])
def test_base_url_with_or_without_v1(server, suffix):
    server.add_scripts({"k": ["ok"]})
    base = server.url.removesuffix("/v1") + suffix
    client = AnthropicClient(ModelSpec("anthropic", "k"), base, trust_env=False)
    try:
        assert client.generate(ask()).text == "ok"
    finally:
        client.close()
    assert server.requests[0]["path"] == "/v1/messages"
    assert "x-api-key" not in server.requests[0]["headers"]


# --- the client: failures (shared ones: test_client_protocols.py) --------------------


def test_a_truncated_stream_keeps_the_reported_input_and_cache_usage(server):
    # The failure itself, as for every protocol: test_client_protocols.py.
    text = "0123456789" * 8
    server.add_scripts({"k": [{"text": text, "truncate": True, "usage": CACHED}]})
    with pytest.raises(TransportError) as info:
        generate(server, "k")
    partial = info.value.partial
    # message_start's input and cache fields were reported; its output_tokens is only a
    # placeholder, so the output is counted from the text and flagged as recovered.
    assert partial.usage_native == {**CACHED, "output_tokens": 1}
    assert partial.usage == Usage(
        input=12,
        output=1,
        cache_read=44000,
        cache_write=300,
        total=12 + 44000 + 300 + 1,
        recovered=True,
    )


# --- canned servers: shapes the scripted server never sends --------------------------


@pytest.fixture
def canned() -> Iterator[dict[str, Any]]:
    """A server answering every POST with ``canned["body"]`` as an SSE response; the
    headers of the last request land in ``canned["headers"]``."""
    content: dict[str, Any] = {}

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["content-length"]))
            content["headers"] = {k.lower(): v for k, v in self.headers.items()}
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
    content["url"] = f"http://127.0.0.1:{httpd.server_address[1]}"
    yield content
    httpd.shutdown()
    httpd.server_close()
    thread.join()


def canned_client(canned: dict[str, Any], api_key: str | None = None) -> AnthropicClient:
    return AnthropicClient(ModelSpec("anthropic", "m"), canned["url"], api_key, trust_env=False)


def events_body(*events: tuple[str, dict[str, Any]]) -> bytes:
    return b"".join(
        f"event: {name}\r\ndata: {json.dumps({'type': name, **data})}\r\n\r\n".encode()
        for name, data in events
    )


MESSAGE_START = (
    "message_start",
    {"message": {"id": "msg_1", "content": [], "usage": {"input_tokens": 4, "output_tokens": 1}}},
)
TEXT_START = ("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}})
STOP = ("message_delta", {"delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 2}})


def text_delta(text: str) -> tuple[str, dict[str, Any]]:
    return ("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": text}})


def canned_generate(canned: dict[str, Any], *events: tuple[str, dict[str, Any]]) -> Generation:
    canned["body"] = events_body(*events)
    client = canned_client(canned)
    try:
        return client.generate(ask())
    finally:
        client.close()


@pytest.mark.parametrize(
    ("error_type", "kind", "status"),
    [("overloaded_error", RateLimited, 529), ("api_error", ProviderError, 500)],
)
def test_error_event_inside_a_stream_keeps_what_arrived(canned, error_type, kind, status):
    error = ("error", {"error": {"type": error_type, "message": "engine trouble"}})
    with pytest.raises(kind) as info:
        canned_generate(canned, MESSAGE_START, TEXT_START, text_delta("par"), error)
    assert type(info.value) is kind
    assert info.value.status == status
    assert f"{error_type} in the error event from {canned['url']}/v1/messages" in str(info.value)
    assert "engine trouble" in str(info.value)
    assert info.value.partial.text == "par"
    assert info.value.retry_after is None


def test_message_delta_without_message_stop_still_completes(canned):
    generation = canned_generate(canned, MESSAGE_START, TEXT_START, text_delta("hi"), STOP)
    assert (generation.text, generation.finish_reason) == ("hi", "stop")
    assert generation.usage == Usage(input=4, output=2)


@pytest.mark.parametrize(
    ("native", "mapped"),
    [
        ("stop_sequence", "stop"),
        ("refusal", "content_filter"),
        ("model_context_window_exceeded", "other"),
    ],
)
def test_other_stop_reasons(canned, native, mapped):
    stop = ("message_delta", {"delta": {"stop_reason": native}, "usage": {"output_tokens": 0}})
    generation = canned_generate(canned, MESSAGE_START, stop, ("message_stop", {}))
    assert generation.finish_reason == mapped


def test_malformed_event_data_is_a_transport_error(canned):
    canned["body"] = events_body(MESSAGE_START) + b"event: content_block_delta\ndata: {oops\n\n"
    client = canned_client(canned)
    try:
        with pytest.raises(TransportError) as info:
            client.generate(ask())
    finally:
        client.close()
    assert "malformed content_block_delta event" in str(info.value)
    assert info.value.partial.usage_native == {"input_tokens": 4, "output_tokens": 1}
