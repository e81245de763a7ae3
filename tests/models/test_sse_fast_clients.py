"""The streaming clients' short cuts over real sockets give what the general paths give: the
three clients against the scripted server and against a server writing one HTTP chunk per
event in shapes the scripted server never sends; the request body as httpx's ``json=``
would send it; and the deadline clock (the parser short cuts: test_sse_fast.py)."""

import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from sse_support import responses_text

from pytest_agentbench.errors import ModelTimeout, ProviderError, RateLimited, TransportError
from pytest_agentbench.models import deadline as model_deadline
from pytest_agentbench.models.anthropic import AnthropicClient
from pytest_agentbench.models.base import ModelRequest, ModelSpec, StreamEvent
from pytest_agentbench.models.openai_chat import OpenAIChatClient
from pytest_agentbench.models.openai_responses import OpenAIResponsesClient
from pytest_agentbench.scripted import ScriptedServer

# --- the clients over real sockets ---------------------------------------------------

KEY = "sk-test-fast-paths"
LONG_TEXT = ('Ünïcødé "quotes" \\ back\tslash\nnew line 😀 ' * 30) + "the end"
LONG_THINKING = 'Let me think step by step: é "x" \\ ' * 20


def ask(stream: bool = True) -> ModelRequest:
    return ModelRequest(messages=({"role": "user", "content": "go"},), stream=stream, timeout_s=30)


CLIENTS: dict[str, Callable[[str, str], Any]] = {
    "chat": lambda url, key: OpenAIChatClient(ModelSpec("openai", key), url, KEY, trust_env=False),
    "responses": lambda url, key: OpenAIResponsesClient(
        ModelSpec("openai-responses", key), url, KEY, trust_env=False
    ),
    "anthropic": lambda url, key: AnthropicClient(
        ModelSpec("anthropic", key), url, KEY, trust_env=False
    ),
}


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as running:
        yield running


def run(client: Any, request: ModelRequest, listen: bool = True) -> tuple[Any, list[StreamEvent]]:
    events: list[StreamEvent] = []
    try:
        return client.generate(request, events.append if listen else None), events
    finally:
        client.close()


@pytest.mark.parametrize("protocol", list(CLIENTS))
def test_a_long_stream_arrives_whole_delta_by_delta(server, protocol):
    key = f"long-{protocol}"
    size = 7
    server.add_scripts({key: [{"text": LONG_TEXT, "thinking": LONG_THINKING, "chunk_size": size}]})
    generation, events = run(CLIENTS[protocol](server.url, key), ask())
    assert generation.text == LONG_TEXT
    assert generation.thinking == LONG_THINKING
    texts = [e.text for e in events if e.kind == "text"]
    thoughts = [e.text for e in events if e.kind == "thinking"]
    assert texts == [LONG_TEXT[i : i + size] for i in range(0, len(LONG_TEXT), size)]
    assert thoughts == [LONG_THINKING[i : i + size] for i in range(0, len(LONG_THINKING), size)]
    assert generation.finish_reason == "stop"
    assert generation.usage.output is not None and not generation.usage.recovered
    quiet, none = run(CLIENTS[protocol](server.url, key), ask(), listen=False)
    assert none == []
    assert (quiet.text, quiet.thinking, quiet.usage) == (
        generation.text,
        generation.thinking,
        generation.usage,
    )


@pytest.mark.parametrize("protocol", list(CLIENTS))
def test_tool_calls_after_a_long_text_still_arrive(server, protocol):
    key = f"tools-{protocol}"
    calls = [{"name": "lookup", "arguments": {"q": "x" * 40, "n": 3}}]
    server.add_scripts({key: [{"text": LONG_TEXT, "tool_calls": calls, "chunk_size": 5}]})
    generation, _ = run(CLIENTS[protocol](server.url, key), ask())
    assert generation.text == LONG_TEXT
    assert [(c.name, c.arguments) for c in generation.tool_calls] == [
        ("lookup", {"q": "x" * 40, "n": 3})
    ]
    assert generation.finish_reason == "tool_calls"


@pytest.fixture
def chunked() -> Iterator[dict[str, Any]]:
    """A server answering every POST with ``chunked["events"]``, one HTTP chunk each
    (as real providers send them); the last request's body and headers are kept."""
    state: dict[str, Any] = {}

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            state["body"] = self.rfile.read(int(self.headers["content-length"]))
            state.setdefault("bodies", []).append(state["body"])
            state.setdefault("all_headers", []).append(
                {k.lower(): v for k, v in self.headers.items()}
            )
            state["headers"] = {k.lower(): v for k, v in self.headers.items()}
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for event in state["events"]:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")

        def log_message(self, format: str, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    state["url"] = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    yield state
    httpd.shutdown()
    httpd.server_close()
    thread.join()


def chat_chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> bytes:
    choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
    body = {"id": "chatcmpl-9", "object": "chat.completion.chunk", "choices": [choice], **extra}
    return b"data: " + json.dumps(body, separators=(",", ":")).encode() + b"\n\n"


PIECES = [f"piece {i} é " for i in range(8)]


def test_a_malformed_event_after_the_slot_fails_as_before(chunked):
    bad = chat_chunk({"content": "PLACE"}).replace(b'"PLACE"', b'"bad \\q escape"')
    chunked["events"] = [chat_chunk({"content": p}) for p in PIECES] + [bad]
    client = CLIENTS["chat"](chunked["url"], "m")
    with pytest.raises(TransportError) as info:
        run(client, ask())
    data = bad.decode()[6:].strip()
    assert str(info.value) == (
        f"openai/m: malformed stream event from {chunked['url']}/chat/completions: {data}"
    )
    assert info.value.partial.text == "".join(PIECES)


def test_chunks_the_slot_must_not_swallow_are_handled(chunked):
    reasoning = [chat_chunk({"reasoning_content": f"think {i} "}) for i in range(4)]
    both = [chat_chunk({"reasoning_content": "and ", "content": f"both {i} "}) for i in range(3)]
    texts = [chat_chunk({"content": p}, obfuscation="x" * i) for i, p in enumerate(PIECES)]
    chunked["events"] = [
        *reasoning,
        *both,
        *texts,
        chat_chunk({"content": None}),
        chat_chunk({"content": 7}),
        chat_chunk({"content": "with finish"}, "length"),
        chat_chunk({}, None, usage={"prompt_tokens": 2, "completion_tokens": 9}),
        b"data: [DONE]\n\n",
        chat_chunk({"content": "after done, ignored"}),
    ]
    generation, events = run(CLIENTS["chat"](chunked["url"], "m"), ask())
    both_texts = [f"both {i} " for i in range(3)]
    assert generation.thinking == "".join(f"think {i} " for i in range(4)) + "and " * 3
    assert generation.text == "".join(both_texts + PIECES) + "with finish"
    assert generation.finish_reason == "length"
    assert generation.usage_native == {"prompt_tokens": 2, "completion_tokens": 9}
    assert [e.text for e in events if e.kind == "text"] == [*both_texts, *PIECES, "with finish"]


def responses_event(delta: str, sequence: int) -> bytes:
    data = responses_text(delta, sequence, "p" * (sequence % 5))
    return b"event: response.output_text.delta\ndata: " + data.encode() + b"\n\n"


def test_responses_with_openai_sequence_numbers_and_padding(chunked):
    done = {"type": "response.completed", "response": {"status": "completed", "output": []}}
    chunked["events"] = [
        *(responses_event(p, i) for i, p in enumerate(PIECES)),
        b"event: error\ndata: "
        + json.dumps({"type": "error", "code": "rate_limit_exceeded", "message": "slow"}).encode()
        + b"\n\n",
        b"event: response.completed\ndata: " + json.dumps(done).encode() + b"\n\n",
    ]
    client = CLIENTS["responses"](chunked["url"], "m")
    with pytest.raises(RateLimited) as info:
        run(client, ask())
    assert "(rate_limit_exceeded): slow" in str(info.value)
    assert info.value.partial.text == "".join(PIECES)


def test_anthropic_error_event_after_the_slot(chunked):
    def delta(text: str) -> bytes:
        data = {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "text_delta", "text": text},
        }
        return b"event: content_block_delta\ndata: " + json.dumps(data).encode() + b"\n\n"

    start = {
        "type": "content_block_start",
        "index": 0,
        "content_block": {"type": "text", "text": ""},
    }
    error = {"type": "error", "error": {"type": "overloaded_error", "message": "busy"}}
    chunked["events"] = [
        b"event: content_block_start\ndata: " + json.dumps(start).encode() + b"\n\n",
        *(delta(p) for p in PIECES),
        b"event: error\ndata: " + json.dumps(error).encode() + b"\n\n",
    ]
    with pytest.raises(ProviderError) as info:
        run(CLIENTS["anthropic"](chunked["url"], "m"), ask())
    assert isinstance(info.value, RateLimited) and info.value.status == 529
    assert info.value.partial.text == "".join(PIECES)


@pytest.mark.parametrize("protocol", list(CLIENTS))
def test_the_body_is_sent_as_json_would_send_it(chunked, protocol):
    chunked["events"] = []
    client = CLIENTS[protocol](chunked["url"], "m")
    request = ModelRequest(
        messages=({"role": "user", "content": 'ünïcødé ✓ "q"'},), system="S", max_tokens=9
    )
    expected = json.dumps(
        client.build_body(request), ensure_ascii=False, separators=(",", ":"), allow_nan=False
    ).encode()
    with pytest.raises(TransportError):  # the stream ends with no events
        run(client, request)
    # (after the empty stream, the same request went once more unstreamed)
    assert chunked["bodies"][0] == expected
    headers = chunked["all_headers"][0]
    assert headers["content-type"] == "application/json"
    assert headers["content-length"] == str(len(expected))


# --- the deadline clock --------------------------------------------------------------


def test_an_earlier_deadline_wakes_the_clock():
    """A request with a late deadline is in flight; one with an early deadline, still
    streaming (a byte often enough that no read times out), is cut at its deadline."""
    slow = [{"text": "z" * 400, "chunk_size": 1, "chunk_delay_s": 0.05}]  # 20 s in all
    with ScriptedServer({"slow": slow}) as own:
        late = CLIENTS["chat"](own.url, "slow")
        request = ModelRequest(messages=({"role": "user", "content": "go"},), timeout_s=120)
        ended: list[BaseException] = []
        streaming = threading.Event()

        def late_request() -> None:
            try:
                late.generate(request, lambda event: streaming.set())
            except TransportError as exc:  # the server stops under it
                ended.append(exc)
            finally:
                late.close()

        thread = threading.Thread(target=late_request, daemon=True)
        thread.start()
        # its first event comes after its watchdog is armed: the clock now waits for it
        assert streaming.wait(30)
        early = CLIENTS["chat"](own.url, "slow")
        # uncut, the early stream would end after 20 s with no error
        with pytest.raises(ModelTimeout):
            run(early, ModelRequest(messages=({"role": "user", "content": "go"},), timeout_s=1))
    thread.join(timeout=30)  # the server stopped: the late request ends too
    assert not thread.is_alive() and len(ended) == 1


def test_finished_watchdogs_do_not_pile_up(server):
    server.add_scripts({"tiny": ["a"]})
    client = CLIENTS["chat"](server.url, "tiny")
    request = ModelRequest(messages=({"role": "user", "content": "go"},), timeout_s=600)
    try:
        for _ in range(300):
            assert client.generate(request).text == "a"
    finally:
        client.close()
    # 300 deadlines ten minutes away, all finished: dropped, not kept until due.
    assert len(model_deadline._CLOCK) <= 2 * model_deadline._DeadlineClock.PRUNE_MIN
