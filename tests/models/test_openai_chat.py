"""The SSE parser, and the Chat Completions client and scripted client driven against the
real scripted server (or a canned HTTP server) on 127.0.0.1."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from pytest_agentbench.errors import (
    ModelTimeout,
    ProviderError,
    SuiteError,
    TransportError,
)
from pytest_agentbench.models.base import (
    REQUEST_CALL,
    REQUEST_TASK,
    Generation,
    ModelRequest,
    ModelSpec,
    StreamEvent,
    ToolCall,
    Usage,
)
from pytest_agentbench.models.openai_chat import OpenAIChatClient, normalise_chat_usage
from pytest_agentbench.models.scripted import ScriptedClient
from pytest_agentbench.models.sse import SSEEvent, SSEParser
from pytest_agentbench.scripted import ScriptedServer
from pytest_agentbench.suites.task import Task

KEY = "sk-test-do-not-leak-1234"

# --- the SSE parser ------------------------------------------------------------------

SAMPLE = (
    "\ufeff: a comment, ignored\r\n"
    "data: first\r\n"
    "\r\n"
    "event: delta\n"
    "id: 7\n"
    "data:  two spaces keep one\n"
    "data: second line\n"
    "\n"
    ":keep-alive\r"
    "\r"
    "retry: 1500\r"
    "data: ünïcødé ✓\r"
    "\r"
    "data\n"
    "\n"
    "event: ignored-without-data\n"
    "\n"
    "id\n"
    "data:x:y\r\n"
    "\r\n"
    "data: trailing event never dispatched"
).encode()

EXPECTED = [
    SSEEvent(data="first"),
    SSEEvent(data=" two spaces keep one\nsecond line", event="delta", id="7"),
    SSEEvent(data="ünïcødé ✓", id="7"),
    SSEEvent(data="", id="7"),
    SSEEvent(data="x:y", id=""),
]


def test_sse_whole_stream():
    parser = SSEParser()
    assert parser.feed(SAMPLE) == EXPECTED
    assert parser.retry == 1500


def test_sse_every_split_position_gives_the_same_events():
    for cut in range(len(SAMPLE) + 1):
        parser = SSEParser()
        events = parser.feed(SAMPLE[:cut]) + parser.feed(SAMPLE[cut:])
        assert events == EXPECTED, f"split at byte {cut}"


def test_sse_byte_by_byte():
    parser = SSEParser()
    events = [event for i in range(len(SAMPLE)) for event in parser.feed(SAMPLE[i : i + 1])]
    assert events == EXPECTED


def test_sse_cr_then_lf_in_separate_feeds_is_one_line_end():
    parser = SSEParser()
    assert parser.feed(b"data: a\r") == []
    assert parser.feed(b"\n") == []
    # Had the LF counted as a second line end, the event would already be out.
    assert parser.feed(b"data: b\r\n\r\n") == [SSEEvent(data="a\nb")]


# --- helpers for the client ----------------------------------------------------------


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


def spec_for(key: str) -> ModelSpec:
    """The model name carries the script key to the server (no script header is sent)."""
    return ModelSpec("openai", key)


def client_for(server: ScriptedServer, key: str, **kwargs: Any) -> OpenAIChatClient:
    return OpenAIChatClient(spec_for(key), server.url, KEY, trust_env=False, **kwargs)


def generate(server: ScriptedServer, key: str, **kwargs: Any) -> tuple[Generation, list]:
    events: list[StreamEvent] = []
    with_client = client_for(server, key)
    try:
        return with_client.generate(ask(**kwargs), events.append), events
    finally:
        with_client.close()


# --- successful generations ----------------------------------------------------------


@pytest.mark.parametrize("stream", [True, False])
def test_text_thinking_and_events(server, stream):
    server.add_scripts({"k": [{"text": "the answer is 7", "thinking": "add them up"}]})
    generation, events = generate(server, "k", stream=stream)
    assert generation.text == "the answer is 7"
    assert generation.thinking == "add them up"
    assert generation.finish_reason == "stop"
    kinds = [e.kind for e in events]
    assert "".join(e.text for e in events if e.kind == "text") == "the answer is 7"
    assert "".join(e.text for e in events if e.kind == "thinking") == "add them up"
    assert kinds.index("thinking") < kinds.index("text") < kinds.index("finish")
    assert [e.data for e in events if e.kind == "finish"] == [{"finish_reason": "stop"}]


def test_default_usage_reaches_the_client(server):
    server.add_scripts({"k": ["one two three"]})
    generation, _ = generate(server, "k")
    # "what now" is the only message: 2 prompt words; 3 answer words.
    assert generation.usage == Usage(input=2, output=3, total=5)
    assert generation.usage.cache_read is None and generation.usage.reasoning is None


def test_usage_normalisation_keeps_unknown_fields_none():
    assert normalise_chat_usage(None) == Usage()
    assert normalise_chat_usage({"completion_tokens": 4}) == Usage(output=4)
    assert normalise_chat_usage({"prompt_tokens": 10, "completion_tokens": 4}) == Usage(
        input=10, output=4, total=14
    )
    assert normalise_chat_usage(
        {"prompt_tokens": 10, "prompt_tokens_details": {"cached_tokens": 0}}
    ) == Usage(input=10, cache_read=0)


def test_repeat_and_length_finish(server):
    server.add_scripts({"k": [{"text": "loop ", "repeat": 40, "finish_reason": "length"}]})
    generation, events = generate(server, "k")
    assert generation.text == "loop " * 40
    assert generation.finish_reason == "length"
    assert len([e for e in events if e.kind == "text"]) == 25  # 200 chars / chunk_size 8


def test_request_body_and_headers_as_sent(server):
    server.add_scripts({"k": ["x"]})
    chat = client_for(server, "k", extra_headers={"x-team": "evals"})
    try:
        chat.generate(ask(system="Be brief.", max_tokens=64))
        chat.generate(ask(stream=False))
    finally:
        chat.close()
    streamed, plain = server.requests
    assert streamed["body"] == {
        "model": "k",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "what now"},
        ],
        "max_tokens": 64,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    assert plain["body"] == {
        "model": "k",
        "messages": [{"role": "user", "content": "what now"}],
        "stream": False,
    }
    assert streamed["headers"]["authorization"] == "[redacted]"
    assert streamed["headers"]["x-team"] == "evals"


def test_exchange_is_json_and_never_holds_the_key(server):
    server.add_scripts({"k": [{"text": "hi", "thinking": "t"}]})
    generation, _ = generate(server, "k")
    exchange = json.loads(json.dumps(generation.exchange))
    assert exchange["request"]["url"] == f"{server.url}/chat/completions"
    assert exchange["request"]["body"]["model"] == "k"
    assert exchange["response"]["status"] == 200
    assert exchange["response"]["text"] == "hi"
    assert exchange["response"]["thinking"] == "t"
    assert exchange["response"]["finish_reason"] == "stop"
    assert exchange["response"]["usage"]["completion_tokens"] == 2
    assert exchange["elapsed_s"] >= 0
    assert KEY not in json.dumps(exchange)


# --- the idle timeout (the failures every protocol shares: test_client_protocols.py) --


@pytest.mark.parametrize(("reply", "stream"), [({"hang": True}, True), ({"delay_s": 5}, False)])
def test_idle_timeout_fails_a_silent_stream_long_before_the_deadline(server, reply, stream):
    server.add_scripts({"k": [{"text": "never", **reply}]})
    chat = client_for(server, "k", idle_timeout_s=0.3)
    try:
        with pytest.raises(ModelTimeout) as info:
            chat.generate(ask(stream=stream, timeout_s=30))
    finally:
        chat.close()
    assert str(info.value) == (
        f"openai/k: no byte from {server.url}/chat/completions for 0.3 s (the idle timeout)"
    )


def test_idle_timeout_lets_a_steady_trickle_finish(server):
    text = "abcd" * 10
    server.add_scripts({"k": [{"text": text, "chunk_size": 4, "chunk_delay_s": 0.05}]})
    chat = client_for(server, "k", idle_timeout_s=1)
    try:
        assert chat.generate(ask(timeout_s=30)).text == text
    finally:
        chat.close()


# --- canned servers: shapes the scripted server never sends --------------------------


@pytest.fixture
def canned() -> Iterator[dict[str, bytes]]:
    """A server answering every POST with ``canned["body"]`` as an SSE response."""
    content: dict[str, bytes] = {}

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
    content["url"] = f"http://127.0.0.1:{httpd.server_address[1]}/v1".encode()
    yield content
    httpd.shutdown()
    httpd.server_close()
    thread.join()


def sse(*chunks: dict[str, Any]) -> bytes:
    return b"".join(b"data: " + json.dumps(c).encode() + b"\r\n\r\n" for c in chunks)


def delta(**fields: Any) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": fields, "finish_reason": None}]}


def finish(reason: str) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": {}, "finish_reason": reason}]}


def canned_generate(canned: dict[str, bytes], body: bytes) -> Generation:
    canned["body"] = body
    chat = OpenAIChatClient(spec_for("m"), canned["url"].decode(), trust_env=False)
    try:
        return chat.generate(ask())
    finally:
        chat.close()


def test_reasoning_field_other_finish_and_recovered_usage(canned):
    body = sse(delta(reasoning="think a bit"), delta(content="done now"), finish("eos_token"))
    generation = canned_generate(canned, body + b"data: [DONE]\n\n")
    assert (generation.thinking, generation.text) == ("think a bit", "done now")
    assert generation.finish_reason == "other"
    assert generation.usage == Usage(output=5, recovered=True)
    assert generation.usage_native is None


def test_stream_ending_cleanly_without_finish_or_done_is_a_transport_error(canned):
    with pytest.raises(TransportError) as info:
        canned_generate(canned, sse(delta(content="half an ans")))
    assert "ended before its finish" in str(info.value)
    assert info.value.partial.text == "half an ans"


def test_error_event_inside_a_stream_is_a_provider_error(canned):
    body = sse(delta(content="par"), {"error": {"message": "engine died", "code": 500}})
    with pytest.raises(ProviderError) as info:
        canned_generate(canned, body)
    assert "engine died" in str(info.value)
    assert info.value.status == 500
    assert info.value.partial.text == "par"


def test_tool_call_fragments_from_compatible_servers(canned):
    # Later fragments repeating an empty id and a null name (seen from some local
    # servers) must not erase what the first fragment said.
    first = {"index": 0, "id": "call_a", "type": "function"}
    body = sse(
        delta(tool_calls=[{**first, "function": {"name": "look", "arguments": ""}}]),
        delta(
            tool_calls=[{"index": 0, "id": "", "function": {"name": None, "arguments": '{"q": '}}]
        ),
        delta(tool_calls=[{"index": 0, "id": "", "function": {"arguments": "1}"}}]),
        finish("tool_calls"),
    )
    generation = canned_generate(canned, body + b"data: [DONE]\n\n")
    assert generation.tool_calls == (ToolCall("call_a", "look", {"q": 1}, '{"q": 1}'),)
    assert generation.finish_reason == "tool_calls"


def test_whole_tool_calls_without_index_or_with_object_arguments(canned):
    calls = [
        {"id": "c1", "type": "function", "function": {"name": "a", "arguments": {"x": 1}}},
        {"type": "function", "function": {"name": "b", "arguments": "{}"}},
    ]
    body = sse(delta(tool_calls=calls), finish("tool_calls"))
    generation = canned_generate(canned, body + b"data: [DONE]\n\n")
    assert generation.tool_calls == (
        ToolCall("c1", "a", {"x": 1}, '{"x": 1}'),
        ToolCall("call_1", "b", {}, "{}"),
    )


# --- the scripted client -------------------------------------------------------------


def make_task(path: Path, task_id: str, scripted: tuple[Any, ...]) -> Task:
    return Task(
        suite="s",
        id=task_id,
        index=0,
        path=path,
        input="q",
        prompt="q",
        scripted=scripted,
    )


def test_scripted_client_registers_tasks_and_sends_script_and_turn(server, tmp_path):
    first = make_task(tmp_path / "bench_a.toml", "apples", ("8", {"text": "7", "thinking": "t"}))
    second = make_task(tmp_path / "bench_a.toml", "pears", ("pear",))
    chat = ScriptedClient(ModelSpec.parse("scripted"), server.url)
    try:
        chat.register([first, second])
        # Changed on the server after registering: a second register must not overwrite it.
        server.add_scripts({second.key: ["changed"]})
        chat.register([first, second])

        def answer(task: Task, turn: int) -> Generation:
            messages = ({"role": "user", "content": "q"},)
            metadata = {REQUEST_TASK: task.key, REQUEST_CALL: str(turn)}
            return chat.generate(ModelRequest(messages, metadata=metadata))

        assert answer(first, 1).thinking == "t"
        assert answer(first, 0).text == "8"
        assert answer(second, 0).text == "changed"
    finally:
        chat.close()
    records = server.requests
    assert [(r["key"], r["turn"]) for r in records] == [
        (first.key, 1),
        (first.key, 0),
        (second.key, 0),
    ]
    assert records[0]["headers"]["x-agentbench-script"] == first.key
    assert records[0]["headers"]["x-agentbench-turn"] == "1"
    assert all("authorization" not in r["headers"] for r in records)


def test_scripted_client_rejects_a_bad_reply_naming_suite_task_and_index(server, tmp_path):
    task = make_task(tmp_path / "bench_b.toml", "apples", ("ok", {"texte": "typo"}))
    chat = ScriptedClient(ModelSpec.parse("scripted"), server.url)
    try:
        with pytest.raises(SuiteError) as info:
            chat.register([task])
    finally:
        chat.close()
    assert info.value.path == str(tmp_path / "bench_b.toml")
    assert info.value.problems[0].startswith("task 'apples': scripted[1]: unknown reply key(s)")


# --- one connection pool per thread ----------------------------------------------------


def test_threads_use_their_own_clients_and_close_closes_them_all(
    server: ScriptedServer,
) -> None:
    """Each thread's requests go their own way (its own connections: one pool per thread
    keeps the pool's per-request work from growing with the threads); close() closes
    every thread's, so no thread can send after it."""
    server.add_scripts({"fine": ["hello"]})
    client = client_for(server, "fine")
    used: list[int] = []
    refused: list[BaseException] = []
    closed = threading.Event()

    def run() -> None:
        assert client.generate(ask()).text == "hello"
        used.append(id(client._way))
        assert closed.wait(30)
        try:
            client.generate(ask())
        except RuntimeError as exc:
            refused.append(exc)

    threads = [threading.Thread(target=run) for _ in range(3)]
    for thread in threads:
        thread.start()
    while len(used) < 3 and all(thread.is_alive() for thread in threads):
        threading.Event().wait(0.05)
    assert len(set(used)) == 3
    assert id(client._way) not in used  # nor the caller's
    client.close()
    closed.set()
    for thread in threads:
        thread.join(30)
    assert len(refused) == 3 and all("closed" in str(exc) for exc in refused)
    with pytest.raises(RuntimeError, match="closed"):
        client.generate(ask())  # a thread that never sent before is refused too
