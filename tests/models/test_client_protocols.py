"""What every wire protocol's client does alike, tested once for each of the three (Chat
Completions, Responses, Anthropic Messages) against the real scripted server on 127.0.0.1:
failures and their errors, deadlines, cancelling a stream. What only one protocol does is in
its own file (test_openai_chat.py, test_openai_responses.py, test_anthropic.py)."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator

import pytest
from client_protocols_support import KEY, PROTOCOLS, Protocol, ask, generate

from pytest_agentbench.core.durations import seconds_text
from pytest_agentbench.errors import ModelTimeout, ProviderError, RateLimited, TransportError
from pytest_agentbench.models.base import Generation, StreamEvent, Usage
from pytest_agentbench.scripted import ScriptedServer

STREAMS = pytest.mark.parametrize("stream", [True, False], ids=["stream", "body"])


@pytest.fixture(params=list(PROTOCOLS))
def protocol_name(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def protocol(protocol_name: str) -> Protocol:
    return PROTOCOLS[protocol_name]


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as running:
        yield running


def test_the_key_is_sent_redacted_in_logs_and_kept_out_of_exchange_and_errors(protocol, server):
    server.add_scripts({"k": [{"text": "hi", "thinking": "t"}], "bad": [{"error": {}}]})
    generation, _ = generate(protocol, server, "k")
    with pytest.raises(ProviderError) as info:
        generate(protocol, server, "bad")
    assert server.requests[0]["headers"][protocol.key_header] == "[redacted]"
    exchange = json.loads(json.dumps(generation.exchange))
    assert exchange["request"]["url"] == protocol.endpoint(server)
    assert exchange["response"]["status"] == 200
    assert KEY not in json.dumps(exchange) and KEY not in str(info.value)
    client = protocol.client(server.url, "k")
    assert KEY not in repr(client)
    client.close()


def test_no_key_header_without_a_key(protocol, server):
    server.add_scripts({"k": ["x"]})
    client = protocol.client(server.url, "k", api_key=None)
    try:
        assert client.generate(ask()).text == "x"
    finally:
        client.close()
    assert protocol.key_header not in server.requests[0]["headers"]


def test_an_exception_from_on_event_cancels_the_stream_unchanged(protocol, server):
    server.add_scripts({"k": [{"text": "x" * 400, "chunk_size": 4}]})

    class Stop(Exception):
        pass

    def on_event(event: StreamEvent) -> None:
        if event.kind == "text":
            raise Stop

    client = protocol.client(server.url, "k")
    try:
        with pytest.raises(Stop):
            client.generate(ask(), on_event)
        assert client.generate(ask()).text == "x" * 400
    finally:
        client.close()


# --- usage -------------------------------------------------------------------------

#: Each protocol's declared usage with cached and reasoning tokens, and what it normalises to.
#: Mutation-checked: one protocol's arithmetic used for another's (OpenAI's cached tokens
#: are part of the input, Anthropic's cache reads and writes are not) fails here.
DECLARED = {
    "chat": (
        {
            "prompt_tokens": 50,
            "completion_tokens": 3,
            "prompt_tokens_details": {"cached_tokens": 44},
            "completion_tokens_details": {"reasoning_tokens": 2},
        },
        Usage(input=6, output=3, cache_read=44, reasoning=2, total=53),
    ),
    "responses": (
        {
            "input_tokens": 50,
            "input_tokens_details": {"cached_tokens": 44},
            "output_tokens": 3,
            "output_tokens_details": {"reasoning_tokens": 2},
            "total_tokens": 53,
        },
        Usage(input=6, output=3, cache_read=44, reasoning=2, total=53),
    ),
    "anthropic": (
        {
            "input_tokens": 12,
            "cache_creation_input_tokens": 300,
            "cache_read_input_tokens": 44000,
            "output_tokens": 9,
        },
        Usage(input=12, output=9, cache_read=44000, cache_write=300, total=12 + 44000 + 300 + 9),
    ),
}


@STREAMS
def test_declared_usage_is_kept_native_and_normalised(protocol_name, server, stream):
    protocol = PROTOCOLS[protocol_name]
    native, expected = DECLARED[protocol_name]
    server.add_scripts({"k": [{"text": "7", "usage": native}]})
    generation, events = generate(protocol, server, "k", stream=stream)
    assert generation.usage_native == native
    assert generation.usage == expected
    assert generation.exchange["response"]["usage"] == native
    usage_events = [e.data for e in events if e.kind == "usage"]
    # an Anthropic stream reports usage twice: message_start (a placeholder output), then
    # message_delta
    assert len(usage_events) == (2 if protocol_name == "anthropic" and stream else 1)
    assert usage_events[-1] == native


# --- failures ------------------------------------------------------------------------


@STREAMS
def test_server_error_is_a_provider_error_naming_status_endpoint_and_message(
    protocol, server, stream
):
    server.add_scripts({"k": [{"error": {"status": 500, "message": "the GPU caught fire"}}]})
    with pytest.raises(ProviderError) as info:
        generate(protocol, server, "k", stream=stream)
    error = info.value
    assert not isinstance(error, RateLimited)
    assert (error.status, error.endpoint) == (500, protocol.endpoint(server))
    assert str(error) == (
        f"{protocol.provider}/k: HTTP 500 from {protocol.endpoint(server)}: the GPU caught fire"
    )
    assert error.partial is None and error.retry_after is None


@STREAMS
@pytest.mark.parametrize("status", [429, 529])
def test_rate_limits_carry_retry_after_and_a_bounded_message(protocol, server, status, stream):
    error_reply = {"status": status, "message": "slow down " * 100, "retry_after": 1.5}
    server.add_scripts({"k": [{"error": error_reply}]})
    with pytest.raises(RateLimited) as info:
        generate(protocol, server, "k", stream=stream)
    error = info.value
    assert (error.status, error.retry_after, error.partial) == (status, 1.5, None)
    assert str(error).startswith(
        f"{protocol.provider}/k: HTTP {status} from {protocol.endpoint(server)}: slow down"
    )
    assert len(str(error)) < 400 and str(error).endswith("…")
    assert KEY not in str(error)


@pytest.mark.parametrize("status", [429, 529])
def test_a_rate_limit_without_retry_after(protocol, server, status):
    server.add_scripts({"k": [{"error": {"status": status, "message": "Overloaded"}}]})
    with pytest.raises(RateLimited) as info:
        generate(protocol, server, "k")
    assert (info.value.status, info.value.retry_after) == (status, None)
    assert str(info.value) == (
        f"{protocol.provider}/k: HTTP {status} from {protocol.endpoint(server)}: Overloaded"
    )


def test_unknown_script_is_a_404_provider_error(protocol, server):
    server.add_scripts({"known": ["x"]})
    with pytest.raises(ProviderError) as info:
        generate(protocol, server, "unknown")
    assert info.value.status == 404
    assert "no script for key 'unknown'; registered keys: 'known'" in str(info.value)


def test_connection_refused_is_a_transport_error(protocol):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    base = f"http://127.0.0.1:{port}/v1"
    client = protocol.client(base, "k")
    try:
        with pytest.raises(TransportError) as info:
            client.generate(ask())
    finally:
        client.close()
    assert f"cannot connect to {base}{protocol.path}" in str(info.value)
    assert info.value.partial is None


@STREAMS
def test_truncated_reply_is_a_transport_error_with_what_arrived(protocol, server, stream):
    text = "0123456789" * 8
    server.add_scripts({"k": [{"text": text, "truncate": True}]})
    with pytest.raises(TransportError) as info:
        generate(protocol, server, "k", stream=stream)
    partial = info.value.partial
    assert info.value.retry_after is None
    if not stream:
        assert partial is None
        return
    assert f"the connection to {protocol.endpoint(server)} broke" in str(info.value)
    assert isinstance(partial, Generation)
    assert partial.text and text.startswith(partial.text) and partial.text != text
    assert partial.finish_reason is None
    assert partial.usage.recovered and partial.usage.output == 1
    assert partial.exchange["response"]["error"] == str(info.value)


# --- deadlines -----------------------------------------------------------------------


@STREAMS
def test_hang_fails_at_the_deadline(protocol, server, stream):
    server.add_scripts({"k": [{"text": "never", "hang": True}]})
    with pytest.raises(ModelTimeout) as info:
        generate(protocol, server, "k", stream=stream, timeout_s=0.5)
    assert "within the 0.5 s deadline" in str(info.value)
    assert info.value.partial is None and info.value.retry_after is None


def test_a_deadline_reads_rounded(server):
    """The deadline a request is given is what is left of its task: a raw float such as
    0.685032 is printed as people read it."""
    server.add_scripts({"k": [{"text": "never", "hang": True}]})
    with pytest.raises(ModelTimeout) as info:
        generate(PROTOCOLS["chat"], server, "k", timeout_s=0.685032)
    assert "within the 0.69 s deadline" in str(info.value)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0.685032, "0.69"), (19.98, "20"), (2.04, "2"), (1.55, "1.6"), (0.5, "0.5"), (0.004, "0.004")],
)
def test_seconds_text(seconds: float, text: str) -> None:
    assert seconds_text(seconds) == text


def test_a_trickling_stream_still_ends_at_the_deadline(protocol, server):
    # Every chunk arrives well within any read timeout; only the total deadline stops it.
    # The stream lasts 10 s; the 2 s deadline leaves a loaded machine time for a first chunk.
    text = "abcd" * 200
    server.add_scripts({"k": [{"text": text, "chunk_size": 4, "chunk_delay_s": 0.05}]})
    with pytest.raises(ModelTimeout) as info:
        generate(protocol, server, "k", timeout_s=2)
    partial = info.value.partial
    assert isinstance(partial, Generation)
    assert partial.text and text.startswith(partial.text) and partial.text != text


def test_slow_first_byte_within_the_deadline_succeeds(protocol, server):
    server.add_scripts({"k": [{"text": "late but fine", "delay_s": 0.2}]})
    generation, _ = generate(protocol, server, "k", timeout_s=5)
    assert generation.text == "late but fine"
