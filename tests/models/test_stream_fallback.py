"""A server that ignores ``stream: true`` and answers one JSON body (some builds, proxies
and gateways do) has answered: its reply is read as the non-streamed body it is, for all
three protocols, once, and the trajectory says what arrived. The other way round too: an
SSE stream answering a non-streamed request is read as a stream."""

from __future__ import annotations

import json
import random
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from pytest_agentbench.models.anthropic import AnthropicClient
from pytest_agentbench.models.base import ModelRequest, ModelSpec, StreamEvent
from pytest_agentbench.models.openai_chat import OpenAIChatClient
from pytest_agentbench.models.openai_responses import OpenAIResponsesClient
from pytest_agentbench.models.retry import RetryingClient, RetryPolicy

BODIES: dict[str, dict[str, Any]] = {
    "/v1/chat/completions": {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "42"},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
    },
    "/v1/responses": {
        "id": "resp_1",
        "object": "response",
        "status": "completed",
        "output": [
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "42"}],
            }
        ],
        "usage": {"input_tokens": 3, "output_tokens": 1, "total_tokens": 4},
    },
    "/v1/messages": {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "content": [{"type": "text", "text": "42"}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 3, "output_tokens": 1},
    },
}


CHAT_SSE = (
    'data: {"choices":[{"index":0,"delta":{"role":"assistant","content":"4"},'
    '"finish_reason":null}]}\n\n'
    'data: {"choices":[{"index":0,"delta":{"content":"2"},"finish_reason":null}]}\n\n'
    'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n'
    "data: [DONE]\n\n"
)


class _IgnoresStream(BaseHTTPRequestHandler):
    """Answers every POST with one JSON body (or, with ``server.sse``, an SSE stream),
    whatever ``stream`` says; keeps each request."""

    def do_POST(self) -> None:
        sent = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)))
        server: Any = self.server
        server.requests.append(sent)
        if server.sse:
            body, media = CHAT_SSE.encode(), "text/event-stream"
        else:
            body, media = json.dumps(BODIES[self.path]).encode(), "application/json"
        self.send_response(200)
        self.send_header("content-type", f"{media}; charset=utf-8")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def server() -> Iterator[Any]:
    running: Any = ThreadingHTTPServer(("127.0.0.1", 0), _IgnoresStream)
    running.requests, running.sse = [], False
    thread = threading.Thread(target=running.serve_forever, daemon=True)
    thread.start()
    try:
        yield running
    finally:
        running.shutdown()
        running.server_close()


CLIENTS = {
    "chat": lambda url: OpenAIChatClient(ModelSpec("openai-compat", "m"), url, trust_env=False),
    "responses": lambda url: OpenAIResponsesClient(
        ModelSpec("openai-responses", "m"), url, "sk-test", trust_env=False
    ),
    "anthropic": lambda url: AnthropicClient(
        ModelSpec("anthropic", "m"), url, "sk-ant-test", trust_env=False
    ),
}


@pytest.mark.parametrize("protocol", list(CLIENTS))
def test_a_json_answer_to_a_streamed_request_is_accepted(server: Any, protocol: str) -> None:
    url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    client = RetryingClient(
        CLIENTS[protocol](url), RetryPolicy(base_delay_s=0.001), rng=random.Random(3)
    )
    events: list[StreamEvent] = []
    request = ModelRequest(({"role": "user", "content": "6 x 7?"},), timeout_s=30, stream=True)
    try:
        generation = client.generate(request, events.append)
    finally:
        client.close()
    assert [sent["stream"] for sent in server.requests] == [True], "asked once, streamed"
    assert generation.text == "42"
    assert generation.finish_reason == "stop"
    assert generation.usage.output == 1
    assert "".join(e.text for e in events if e.kind == "text") == "42"
    assert generation.exchange["response"]["streamed"] is False
    assert generation.exchange["retries"] == []


def test_a_stream_answering_a_plain_request_is_read_as_a_stream(server: Any) -> None:
    server.sse = True
    url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    client = RetryingClient(
        CLIENTS["chat"](url), RetryPolicy(base_delay_s=0.001), rng=random.Random(3)
    )
    request = ModelRequest(({"role": "user", "content": "6 x 7?"},), timeout_s=30, stream=False)
    try:
        generation = client.generate(request)
    finally:
        client.close()
    assert [sent["stream"] for sent in server.requests] == [False], "asked once"
    assert (generation.text, generation.finish_reason) == ("42", "stop")
    assert generation.exchange["response"]["streamed"] is True
