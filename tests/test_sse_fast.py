"""The short cuts of the streaming clients give exactly what the general paths give.

- the SSE parser's one-event-per-chunk short cut against its general path (a stream fed
  one byte at a time never takes it), however the stream is split;
- StringSlot matches against ``json.loads`` of the same text, on valid and mutated text;
- ``feed_slot`` against ``feed_fields``, chunk by chunk;
- the three clients over real sockets (scripted server, and a server writing one HTTP
  chunk per event in shapes the scripted server never sends);
- the request body as httpx's ``json=`` would send it, and the deadline clock.
"""

from __future__ import annotations

import json
import random
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from pytest_agentbench.errors import ModelTimeout, ProviderError, RateLimited, TransportError
from pytest_agentbench.models import deadline as model_deadline
from pytest_agentbench.models.anthropic import AnthropicClient
from pytest_agentbench.models.base import ModelRequest, ModelSpec, StreamEvent
from pytest_agentbench.models.openai_chat import OpenAIChatClient
from pytest_agentbench.models.openai_responses import OpenAIResponsesClient
from pytest_agentbench.models.sse import SSEParser, StringSlot, parse_json
from pytest_agentbench.scripted import ScriptedServer

# --- the SSE short cut against the general path --------------------------------------


def chat_event(content: str, **extra: Any) -> bytes:
    chunk = {"id": "c1", "choices": [{"index": 0, "delta": {"content": content}}], **extra}
    return b"data: " + json.dumps(chunk, ensure_ascii=False).encode() + b"\n\n"


#: Streams as lists of events; the short cut takes a chunk that is exactly one event.
STREAMS: dict[str, list[bytes]] = {
    "chat": [
        chat_event(piece)
        for piece in ["Hé", "llo 😀", ' "quoted" \\ ', "\n\t", "ünïcødé ✓", "", "end"]
    ]
    + [b"data: [DONE]\n\n"],
    "named": [
        b"event: content_block_delta\ndata: "
        + json.dumps(
            {"type": "content_block_delta", "delta": {"text": piece}}, ensure_ascii=False
        ).encode()
        + b"\n\n"
        for piece in ["a", "ß", "日本", "z"]
    ],
    "oddities": [
        b"\xef\xbb\xbfdata: bom first\n\n",
        b"event: pending\n",
        b"data: typed by the line before\n\n",
        b"data:no space\n\n",
        b"data: two\ndata: lines\n\n",
        b": a comment\n\n",
        b"id: 7\nretry: 150\n\n",
        b"event:\ndata: empty type\n\n",
        b"data: \n\n",
        b"data: crlf\r\n\r\n",
        b"data: lone cr\r\r",
        b"data: bad \xff byte\n\n",
        b"data: caf\xc3\xa9 \xf0\x9f\x98\x80\n\n",
        b"event: x\ndata: a\ndata: b\n\n",
        b"data: after all\n\n",
        b"data: never dispatched",
    ],
}


def general(stream: bytes) -> tuple[list[tuple[str, str, str]], int | None]:
    """The general path alone: a chunk of one byte never takes the short cut."""
    parser = SSEParser()
    events = [e for i in range(len(stream)) for e in parser.feed_fields(stream[i : i + 1])]
    return events, parser.retry


def fed(chunks: list[bytes]) -> tuple[list[tuple[str, str, str]], int | None]:
    parser = SSEParser()
    return [e for chunk in chunks for e in parser.feed_fields(chunk)], parser.retry


@pytest.mark.parametrize("name", list(STREAMS))
def test_the_short_cut_gives_the_general_events_however_the_stream_is_split(name):
    events = STREAMS[name]
    stream = b"".join(events)
    expected = general(stream)
    assert expected[0], "the reference produced nothing"
    assert fed([stream]) == expected
    assert fed(events) == expected  # one chunk per event: the short cut's case
    for cut in range(len(stream) + 1):
        assert fed([stream[:cut], stream[cut:]]) == expected, f"split at byte {cut}"
    for index, event in enumerate(events):
        for cut in range(len(event) + 1):
            chunks = [*events[:index], event[:cut], event[cut:], *events[index + 1 :]]
            assert fed(chunks) == expected, f"event {index} split at byte {cut}"


def test_the_short_cut_keeps_the_spec_details():
    parser = SSEParser()
    fields = [e for chunk in STREAMS["oddities"] for e in parser.feed_fields(chunk)]
    assert fields[:3] == [
        ("message", "bom first", ""),
        ("pending", "typed by the line before", ""),
        ("message", "no space", ""),
    ]
    assert ("message", "empty type", "7") in fields
    assert ("message", "bad \ufffd byte", "7") in fields
    assert ("x", "a\nb", "7") in fields
    assert parser.retry == 150
    assert [e.data for e in SSEParser().feed(b"".join(STREAMS["chat"]))][-1] == "[DONE]"


# --- StringSlot against json.loads ---------------------------------------------------

CHAT_PATH = ("choices", 0, "delta")


def chat_text(content: Any, **extra: Any) -> str:
    return json.dumps(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": {"content": content}, "finish_reason": None}],
            **extra,
        }
    )


def responses_text(delta: Any, sequence: Any, padding: Any) -> str:
    """OpenAI's shape: a sequence number before the delta, random padding after it."""
    return json.dumps(
        {
            "type": "response.output_text.delta",
            "sequence_number": sequence,
            "item_id": "msg_1",
            "output_index": 0,
            "content_index": 0,
            "delta": delta,
            "logprobs": [],
            "obfuscation": padding,
        },
        separators=(",", ":"),
    )


def learned(previous: str, text: str, path: tuple[Any, ...], key: str, reads: Any) -> StringSlot:
    slot = StringSlot.learn(text, json.loads(text), path, key, json.loads(previous), reads)
    assert slot is not None
    return slot


def agrees(
    slot: StringSlot, learned_text: str, text: str, path: tuple[Any, ...], key: str
) -> str | None:
    """The slot's answer for ``text`` is None or exactly what decoding gives: the same
    object as the learned one but for the slot's string and the holes."""
    found = slot.match(text)
    if found is None:
        return None
    decoded = json.loads(text)  # a match on text json.loads rejects fails here
    assert found == _at(decoded, path)[key] and type(found) is str
    reference = json.loads(learned_text)
    _at(reference, path)[key] = found
    for name in ("sequence_number", "obfuscation"):
        if name in reference:
            assert type(decoded[name]) is type(reference[name])
            reference[name] = decoded[name]
    assert decoded == reference
    return found


def _at(obj: Any, path: tuple[Any, ...]) -> Any:
    for step in path:
        obj = obj[step]
    return obj


VALUES = ["", "plain", 'a "quote"', "back\\slash", "new\nline", "ünï 😀", '"}]}', "\u2028"]


def test_a_chat_slot_reads_any_string_and_nothing_else():
    slot = learned(chat_text("one"), chat_text("two"), CHAT_PATH, "content", ("choices",))
    for value in VALUES:
        for ascii_only in (True, False):
            text = json.dumps(json.loads(chat_text(value)), ensure_ascii=ascii_only)
            assert agrees(slot, chat_text("two"), text, CHAT_PATH, "content") == value
    for other in [
        chat_text(None),
        chat_text(5),
        chat_text(["x"]),
        chat_text("x", usage={"total_tokens": 1}),
        chat_text("x").replace('"finish_reason": null', '"finish_reason": "length"'),
        chat_text("x") + " ",
        chat_text("x")[:-1],
        chat_text("x").replace('"x"', '"x'),
        chat_text("x").replace('"x"', '"\\q"'),
        chat_text("x").replace('"x"', '"a\tb"'),  # a raw control character
        chat_text("x").replace('"x"', '"a", "content": "b"'),
    ]:
        assert agrees(slot, chat_text("two"), other, CHAT_PATH, "content") is None, other


def test_holes_follow_openai_sequence_numbers_and_padding():
    slot = learned(
        responses_text("a", 4, "xyz"),
        responses_text("b", 5, "pq"),
        (),
        "delta",
        ("type", "error", "delta", "item_id", "summary_index", "content_index"),
    )
    base = responses_text("b", 5, "pq")
    assert agrees(slot, base, responses_text("ok", 6, "r"), (), "delta") == "ok"
    assert agrees(slot, base, responses_text("", 1234567, ""), (), "delta") == ""
    for other in [
        responses_text("x", 6.5, "r"),
        responses_text("x", "6", "r"),
        responses_text("x", True, "r"),
        responses_text("x", 6, 7),
        responses_text("x", 6, "r").replace('"sequence_number":6', '"sequence_number":06'),
        responses_text("x", 6, "r").replace("msg_1", "msg_2"),
        responses_text(None, 6, "r"),
    ]:
        assert agrees(slot, base, other, (), "delta") is None, other


def test_mutated_text_never_matches_wrongly():
    """Random edits of the learned text, half of them in or next to a hole: every match is
    exactly what json.loads says."""
    rng = random.Random(3)
    cases = [
        (chat_text("one"), chat_text("two"), CHAT_PATH, "content", ("choices",), ['"two"']),
        (
            responses_text("a", 4, "xyz"),
            responses_text("b", 5, "pq"),
            (),
            "delta",
            ("type", "error", "delta", "item_id"),
            ['"b"', ":5,", '"pq"'],
        ),
    ]
    alphabet = ['"', "\\", "}", "]", ",", ":", " ", "0", "1", ".", "e", "-", "u", "x", "\n"]
    for previous, text, path, key, reads, holes in cases:
        slot = learned(previous, text, path, key, reads)
        near = [text.index(hole) + offset for hole in holes for offset in range(len(hole) + 1)]
        matched = 0
        for _ in range(3000):
            edited = list(text)
            for _ in range(rng.randint(1, 3)):
                spot = rng.choice(near) if rng.random() < 0.5 else rng.randrange(len(edited))
                spot = min(spot, len(edited))
                action = rng.random()
                if action < 0.4 and spot < len(edited):
                    edited[spot] = rng.choice(alphabet)
                elif action < 0.7:
                    edited.insert(spot, rng.choice(alphabet))
                elif spot < len(edited):
                    del edited[spot]
            candidate = "".join(edited)
            try:
                json.loads(candidate)
            except ValueError:
                assert slot.match(candidate) is None, candidate
                continue
            if agrees(slot, text, candidate, path, key) is not None:
                matched += 1
        assert matched > 100  # edits inside the holes keep matching


def test_a_slot_is_only_learned_where_it_can_be_proven():
    misleading = json.dumps(
        {"meta": {"content": "hi"}, "choices": [{"index": 0, "delta": {"content": "hi"}}]}
    )
    previous = json.loads(misleading)
    slot = StringSlot.learn(misleading, json.loads(misleading), CHAT_PATH, "content", previous)
    if slot is not None:  # whatever it learned must still agree with json.loads
        other = misleading.replace('"hi"', '"yo"', 1)
        assert agrees(slot, misleading, other, CHAT_PATH, "content") in (None, "hi")
    no_string = chat_text(None)
    assert StringSlot.learn(no_string, json.loads(no_string), CHAT_PATH, "content", {}) is None
    assert StringSlot.learn("{}", {}, CHAT_PATH, "content", {}) is None


def test_parse_json_is_json_loads():
    texts = ['{"a": [1, 2.5, "é"]}', "{}", ' {"a": 1} ', '{"a": 1} x', '{"a": 1} {}', "[1]", "{"]
    for text in texts:
        try:
            expected: Any = json.loads(text)
        except ValueError as exc:
            with pytest.raises(ValueError) as info:
                parse_json(text)
            assert str(info.value) == str(exc)
        else:
            assert parse_json(text) == expected


# --- feed_slot against feed_fields ---------------------------------------------------


def test_feed_slot_consumes_a_chunk_exactly_as_feed_fields_would():
    first, second = chat_event("one"), chat_event("two")
    parser = SSEParser()
    parser.feed_fields(first)
    ((_, data, _),) = parser.feed_fields(second)
    slot = StringSlot.learn(data, json.loads(data), CHAT_PATH, "content", json.loads(first[6:]))
    assert slot is not None
    framed = parser.framed(slot)
    assert framed is not None
    chunks = [
        chat_event("three"),
        chat_event('esc "\\ ü'),
        b"event: pending\n",
        chat_event("typed by the pending line"),
        chat_event("four") + chat_event("five"),
        chat_event("six")[:9],
        chat_event("six")[9:],
        chat_event("x", usage={"total_tokens": 1}),
        chat_event("seven").replace(b"data: ", b"data:  "),
        b": comment\n" + chat_event("eight"),
        chat_event("nine").replace(b"\n\n", b"\r\n\r\n"),
        chat_event("ten"),
        b"data: [DONE]\n\n",
    ]
    fast, plain = SSEParser(), SSEParser()
    for parser_ in (fast, plain):
        parser_.feed_fields(first)
        parser_.feed_fields(second)
    slotted = 0
    for chunk in chunks:
        expected = plain.feed_fields(chunk)
        found = fast.feed_slot(chunk, framed)
        if found is None:
            assert fast.feed_fields(chunk) == expected, chunk
            continue
        slotted += 1
        ((event_type, data, _),) = expected
        assert event_type == "message"
        assert json.loads(data) == json.loads(chat_event(found)[6:])
    assert slotted == 3  # three, esc, ten; never the rest
    assert fast.feed_fields(b"data: end\n\n") == plain.feed_fields(b"data: end\n\n")


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
    assert chunked["body"] == expected
    assert chunked["headers"]["content-type"] == "application/json"
    assert chunked["headers"]["content-length"] == str(len(expected))


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
