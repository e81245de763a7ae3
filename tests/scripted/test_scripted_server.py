"""The scripted provider on real loopback sockets: wire shapes, reply selection, the
admin endpoints, stopping, the reply format and the standalone tool."""

from __future__ import annotations

import datetime
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from pytest_agentbench.scripted import (
    REPLY_KEYS,
    Reply,
    ScriptedServer,
    is_loopback,
    load_script_file,
)
from pytest_agentbench.scripted.wire_chat import CHAT_WIRE

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as running:
        yield running


@pytest.fixture(scope="module")
def http() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=10, trust_env=False) as client:
        yield client


def chat(
    http: httpx.Client,
    server: ScriptedServer,
    *,
    stream: bool = False,
    headers: dict[str, str] | None = None,
    **body: object,
) -> httpx.Response:
    payload = {"model": "m", "messages": [{"role": "user", "content": "two words"}], **body}
    payload["stream"] = stream
    return http.post(f"{server.url}/chat/completions", json=payload, headers=headers or {})


def sse_payloads(response: httpx.Response) -> list[str]:
    """The data of each SSE event, asserting the framing is exactly `data: ...\\n\\n`."""
    assert response.text.endswith("\n\n")
    events = response.text.split("\n\n")[:-1]
    assert all(event.startswith("data: ") for event in events)
    return [event.removeprefix("data: ") for event in events]


# --- non-streaming -------------------------------------------------------------------


def test_completion_has_the_real_api_shape_and_default_usage(server, http):
    server.add_scripts({"k": ["the answer is 7"]})
    response = chat(http, server, headers={"x-agentbench-script": "k"})
    assert response.status_code == 200
    body = response.json()
    assert body["object"] == "chat.completion"
    assert body["id"].startswith("chatcmpl-")
    assert isinstance(body["created"], int)
    assert body["model"] == "m"
    [choice] = body["choices"]
    assert choice["index"] == 0
    assert choice["finish_reason"] == "stop"
    assert choice["message"]["role"] == "assistant"
    assert choice["message"]["content"] == "the answer is 7"
    assert "reasoning_content" not in choice["message"]
    assert body["usage"] == {"prompt_tokens": 2, "completion_tokens": 4, "total_tokens": 6}


def test_completion_with_thinking_declared_usage_and_finish_reason(server, http):
    declared = {"prompt_tokens": 50, "completion_tokens": 3, "prompt_tokens_details": {"x": 1}}
    server.add_scripts(
        {
            "k": [
                {
                    "text": "ok",
                    "thinking": "let me see",
                    "usage": declared,
                    "finish_reason": "length",
                }
            ]
        }
    )
    body = chat(http, server, headers={"x-agentbench-script": "k"}).json()
    assert body["choices"][0]["message"]["reasoning_content"] == "let me see"
    assert body["choices"][0]["finish_reason"] == "length"
    assert body["usage"] == declared


def test_default_usage_counts_words_of_all_messages_and_reports_reasoning():
    reply = Reply.parse({"text": "a b c", "thinking": "x y", "repeat": 2}, "test")
    messages = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": [{"type": "text", "text": "one two three"}]},
    ]
    # "a b c" * 2 == "a b ca b c": the repetition joins two words into one.
    assert CHAT_WIRE.default_usage(reply, {"messages": messages}) == {
        "prompt_tokens": 5,
        "completion_tokens": 7,
        "total_tokens": 12,
        "completion_tokens_details": {"reasoning_tokens": 2},
    }


# --- streaming -----------------------------------------------------------------------


def test_stream_has_chunks_finish_usage_and_done(server, http):
    server.add_scripts({"k": [{"text": "abcdefghij", "thinking": "hmm", "chunk_size": 4}]})
    response = chat(
        http,
        server,
        stream=True,
        headers={"x-agentbench-script": "k"},
        stream_options={"include_usage": True},
    )
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    payloads = sse_payloads(response)
    assert payloads[-1] == "[DONE]"
    chunks = [json.loads(p) for p in payloads[:-1]]
    assert {c["object"] for c in chunks} == {"chat.completion.chunk"}
    assert len({c["id"] for c in chunks}) == 1
    deltas = [c["choices"][0]["delta"] for c in chunks if c["choices"]]
    assert deltas[0] == {"role": "assistant", "content": "", "refusal": None}
    assert [d["content"] for d in deltas if d.get("content")] == ["abcd", "efgh", "ij"]
    assert [d["reasoning_content"] for d in deltas if "reasoning_content" in d] == ["hmm"]
    finish = chunks[-2]["choices"][0]
    assert finish["finish_reason"] == "stop" and finish["delta"] == {}
    assert chunks[-1]["choices"] == []
    assert chunks[-1]["usage"]["completion_tokens"] == 2
    assert all(c["usage"] is None for c in chunks[:-1])


def test_stream_without_include_usage_sends_no_usage_chunk(server, http):
    server.add_scripts({"k": [{"text": "hi", "repeat": 3}]})
    response = chat(http, server, stream=True, headers={"x-agentbench-script": "k"})
    chunks = [json.loads(p) for p in sse_payloads(response)[:-1]]
    assert all(c["choices"] for c in chunks)
    assert all("usage" not in c for c in chunks)
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks)
    assert text == "hihihi"


def test_truncated_stream_breaks_the_connection_mid_way(server, http):
    server.add_scripts({"k": [{"text": "x" * 80, "truncate": True}]})
    received = b""
    payload = {"model": "k", "messages": [], "stream": True}
    with (
        pytest.raises(httpx.RemoteProtocolError),
        http.stream("POST", f"{server.url}/chat/completions", json=payload) as response,
    ):
        for chunk in response.iter_raw():
            received += chunk
    assert b'"content": "xxxxxxxx"' in received
    assert b'finish_reason": "stop' not in received
    assert b"[DONE]" not in received


def test_many_concurrent_slow_streams_all_complete(server):
    server.add_scripts({"k": [{"text": "0123456789" * 3, "chunk_size": 5, "chunk_delay_s": 0.02}]})
    results: list[str] = []
    lock = threading.Lock()
    limits = httpx.Limits(max_connections=64)
    with httpx.Client(timeout=20, trust_env=False, limits=limits) as client:

        def one() -> None:
            response = chat(client, server, stream=True, headers={"x-agentbench-script": "k"})
            chunks = [json.loads(p) for p in sse_payloads(response)[:-1]]
            text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks)
            with lock:
                results.append(text)

        threads = [threading.Thread(target=one) for _ in range(48)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert results == ["0123456789" * 3] * 48


# --- errors, selection, turns --------------------------------------------------------


def test_error_reply_has_status_retry_after_and_openai_error_body(server, http):
    server.add_scripts(
        {"k": [{"error": {"status": 429, "message": "slow down", "retry_after": 2}}]}
    )
    response = chat(http, server, stream=True, headers={"x-agentbench-script": "k"})
    assert response.status_code == 429
    assert response.headers["retry-after"] == "2"
    error = {"message": "slow down", "type": "requests", "param": None}
    assert response.json() == {"error": {**error, "code": "rate_limit_exceeded"}}


def test_unknown_key_without_default_is_404_naming_the_registered_keys(server, http):
    server.add_scripts({"alpha": ["a"], "beta": ["b"]})
    response = chat(http, server, headers={"x-agentbench-script": "gamma"})
    assert response.status_code == 404
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert error["message"] == "no script for key 'gamma'; registered keys: 'alpha', 'beta'"


def test_key_from_header_then_model_then_default(http):
    with ScriptedServer({"alpha": ["from alpha"], "beta": ["from beta"]}, ["from default"]) as s:

        def answer(**kwargs: object) -> str:
            return chat(http, s, **kwargs).json()["choices"][0]["message"]["content"]

        assert answer(model="beta", headers={"x-agentbench-script": "alpha"}) == "from alpha"
        assert answer(model="beta") == "from beta"
        assert answer(model="gpt-x") == "from default"
        assert answer(model="beta", headers={"x-agentbench-script": "nope"}) == "from default"
        assert [r["key"] for r in s.requests] == ["alpha", "beta", None, None]


def test_turn_header_picks_the_reply_and_the_last_reply_repeats(server, http):
    server.add_scripts({"k": ["first", "second"]})

    def answer(turn: int) -> str:
        headers = {"x-agentbench-script": "k", "x-agentbench-turn": str(turn)}
        return chat(http, server, headers=headers).json()["choices"][0]["message"]["content"]

    assert [answer(1), answer(0), answer(5), answer(0)] == ["second", "first", "second", "first"]


def test_without_turn_header_a_counter_per_key_advances(server, http):
    server.add_scripts({"a": ["a0", "a1", "a2"], "b": ["b0", "b1"]})

    def answer(key: str) -> str:
        headers = {"x-agentbench-script": key}
        return chat(http, server, headers=headers).json()["choices"][0]["message"]["content"]

    got = [answer("a"), answer("b"), answer("a"), answer("b"), answer("b"), answer("a")]
    assert got == ["a0", "b0", "a1", "b1", "b1", "a2"]
    assert [r["turn"] for r in server.requests] == [0, 0, 1, 1, 2, 2]


def test_bad_turn_header_is_a_400(server, http):
    server.add_scripts({"k": ["x"]})
    response = chat(http, server, headers={"x-agentbench-script": "k", "x-agentbench-turn": "-1"})
    assert response.status_code == 400
    assert "x-agentbench-turn" in response.json()["error"]["message"]


# --- admin endpoints -----------------------------------------------------------------


def test_health_and_registration_over_http_is_idempotent(server, http):
    admin = server.url.removesuffix("/v1")
    assert http.get(f"{admin}/_agentbench/health").json() == {"ok": True}
    scripts = {"scripts": {"k": ["one", {"text": "two"}]}}
    assert http.post(f"{admin}/_agentbench/scripts", json=scripts).status_code == 200
    first = chat(http, server, headers={"x-agentbench-script": "k"}).json()
    # A second worker posting the same scripts must not restart the counter.
    assert http.post(f"{admin}/_agentbench/scripts", json=scripts).status_code == 200
    second = chat(http, server, headers={"x-agentbench-script": "k"}).json()
    assert first["choices"][0]["message"]["content"] == "one"
    assert second["choices"][0]["message"]["content"] == "two"


def test_registering_a_bad_reply_is_a_400_naming_key_and_index(server, http):
    admin = server.url.removesuffix("/v1")
    bad = {"scripts": {"k": ["fine", {"text": "x", "speed": 3}]}}
    response = http.post(f"{admin}/_agentbench/scripts", json=bad)
    assert response.status_code == 400
    message = response.json()["error"]["message"]
    assert message.startswith("scripts.k[1]: unknown reply key(s) 'speed'")


def test_recorded_requests_redact_credentials(server, http):
    server.add_scripts({"k": ["x"]})
    headers = {
        "x-agentbench-script": "k",
        "authorization": "Bearer sk-very-secret",
        "x-api-key": "sk-other-secret",
        "x-custom": "kept",
    }
    chat(http, server, headers=headers, max_tokens=5)
    listed = http.get(f"{server.url.removesuffix('/v1')}/_agentbench/requests").json()
    assert listed == server.requests
    [record] = listed
    assert record["path"] == "/v1/chat/completions"
    assert (record["key"], record["turn"]) == ("k", 0)
    assert record["body"]["max_tokens"] == 5
    assert record["headers"]["authorization"] == "[redacted]"
    assert record["headers"]["x-api-key"] == "[redacted]"
    assert record["headers"]["x-custom"] == "kept"
    assert "secret" not in json.dumps(listed)


def test_path_without_v1_prefix_is_accepted(server, http):
    server.add_scripts({"k": ["x"]})
    base = server.url.removesuffix("/v1")
    response = http.post(
        f"{base}/chat/completions",
        json={"model": "k", "messages": []},
    )
    assert response.json()["choices"][0]["message"]["content"] == "x"


# --- hanging and stopping ------------------------------------------------------------


@pytest.mark.parametrize("stream", [True, False])
def test_hang_sends_headers_then_nothing(server, stream):
    server.add_scripts({"k": [{"text": "never", "hang": True}]})
    timeout = httpx.Timeout(10, read=0.3)
    with httpx.Client(timeout=timeout, trust_env=False) as client:
        payload = {"model": "k", "messages": [], "stream": stream}
        with client.stream("POST", f"{server.url}/chat/completions", json=payload) as response:
            assert response.status_code == 200
            with pytest.raises(httpx.ReadTimeout):
                response.read()


def test_stop_returns_with_a_hanging_request_and_an_idle_connection_open():
    server = ScriptedServer({"k": [{"hang": True}], "ok": ["fine"]})
    url = server.start()
    idle = httpx.Client(trust_env=False)
    assert chat(idle, server, headers={"x-agentbench-script": "ok"}).status_code == 200
    outcome: list[BaseException | None] = []

    def hang() -> None:
        try:
            with httpx.Client(timeout=None, trust_env=False) as client:
                chat(client, server, stream=True, headers={"x-agentbench-script": "k"})
            outcome.append(None)
        except httpx.HTTPError as exc:
            outcome.append(exc)

    thread = threading.Thread(target=hang, daemon=True)
    thread.start()
    while not any(r["key"] == "k" for r in server.requests):
        threading.Event().wait(0.01)
    server.stop()
    thread.join(timeout=10)
    idle.close()
    assert not thread.is_alive()
    assert isinstance(outcome[0], httpx.RemoteProtocolError)
    with pytest.raises(RuntimeError, match="not running"):
        _ = server.url
    with pytest.raises(httpx.ConnectError), httpx.Client(trust_env=False) as client:
        client.get(f"{url}/_agentbench/health")


# --- reply format and script files ---------------------------------------------------


def test_reply_parse_accepts_strings_and_tables():
    assert Reply.parse("hi", "w") == Reply(text="hi")
    reply = Reply.parse(
        {"text": "ab", "repeat": 3, "error": {"status": 529}, "tool_calls": []}, "w"
    )
    assert reply.full_text == "ababab"
    assert reply.error is not None
    assert (reply.error.status, reply.error.type) == (529, "")  # the protocol's own type
    assert set(REPLY_KEYS) >= {"text", "thinking", "usage", "error", "hang", "truncate"}


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        ({"txt": "x"}, "unknown reply key(s) 'txt'"),
        ({"repeat": 0}, "'repeat' must be an integer >= 1"),
        ({"chunk_size": True}, "'chunk_size' must be an integer >= 1"),
        ({"delay_s": -1}, "'delay_s' must be a number of seconds >= 0"),
        ({"hang": "yes"}, "'hang' must be true or false"),
        ({"error": {"status": 200}}, "'status' must be an HTTP error status 400-599"),
        ({"error": {"status": 500, "why": "x"}}, "unknown key(s) 'why'"),
        ({"usage": 5}, "'usage' must be a table"),
        # served as JSON: a TOML date in it was taken, then broke the reply when served
        ({"usage": {"input_tokens": datetime.date(2026, 1, 1)}}, "'usage' must be a table"),
        (7, "a reply must be a string or a table, got int"),
    ],
)
def test_reply_parse_errors_name_where(obj, expected):
    with pytest.raises(ValueError) as info:
        Reply.parse(obj, "bench_x.toml: task 'apples': scripted[2]")
    assert str(info.value).startswith("bench_x.toml: task 'apples': scripted[2]")
    assert expected in str(info.value)


def test_load_script_file_toml_and_json(tmp_path):
    toml = tmp_path / "replies.toml"
    toml.write_text('default = ["fallback"]\n[scripts]\nk = ["a", { text = "b", repeat = 2 }]\n')
    loaded = load_script_file(toml)
    assert loaded.scripts["k"][1].full_text == "bb"
    assert loaded.default == (Reply(text="fallback"),)
    as_json = tmp_path / "replies.json"
    as_json.write_text(json.dumps({"scripts": {"k": ["a"]}}))
    assert load_script_file(as_json).scripts == {"k": (Reply(text="a"),)}


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ('[scripts]\nk = ["a", { text = 3 }]\n', "scripts.k[1]: 'text' must be a string"),
        ("[scripts]\nk = []\n", "scripts.k: expected at least one reply"),
        ('defaults = ["a"]\n', "unknown top-level key(s) 'defaults'"),
        ("[scripts\n", "not valid TOML"),
    ],
)
def test_load_script_file_errors_are_one_line_naming_the_file(tmp_path, content, expected):
    path = tmp_path / "replies.toml"
    path.write_text(content)
    with pytest.raises(ValueError) as info:
        load_script_file(path)
    message = str(info.value)
    assert message.startswith(f"{path}: ")
    assert expected in message
    assert "\n" not in message


# --- loopback only and the standalone tool -------------------------------------------


def test_only_loopback_hosts_are_allowed():
    assert all(map(is_loopback, ["127.0.0.1", "127.8.9.1", "::1", "localhost", "[::1]"]))
    assert not any(map(is_loopback, ["0.0.0.0", "10.0.0.1", "::", "example.com"]))
    with pytest.raises(ValueError, match=r"refusing host '0\.0\.0\.0'"):
        ScriptedServer(host="0.0.0.0")


def run_cli(*args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, "-m", "pytest_agentbench.scripted", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def test_cli_serves_a_script_file_until_terminated(tmp_path, http):
    script = tmp_path / "replies.toml"
    script.write_text('[scripts]\ngreet = ["hello from the file"]\n')
    process = run_cli("--script", str(script), "--port", "0")
    try:
        line = process.stdout.readline()
        assert line.startswith("scripted provider listening on http://127.0.0.1:")
        url = line.rsplit(" ", 1)[1].strip()
        response = http.post(f"{url}/chat/completions", json={"model": "greet", "messages": []})
        assert response.json()["choices"][0]["message"]["content"] == "hello from the file"
    finally:
        process.terminate()
        returncode = process.wait(timeout=10)
        process.stdout.close()
        process.stderr.close()
    assert returncode == 0


def test_cli_refuses_a_non_loopback_host(tmp_path):
    script = tmp_path / "replies.toml"
    script.write_text('default = ["x"]\n')
    process = run_cli("--script", str(script), "--host", "0.0.0.0")
    _, stderr = process.communicate(timeout=30)
    assert process.returncode == 2
    assert "'0.0.0.0' is not a loopback address" in stderr


def test_cli_reports_a_bad_script_file_in_one_line(tmp_path):
    script = tmp_path / "replies.toml"
    script.write_text('[scripts]\nk = ["ok", { text = "x", hang = 1 }]\n')
    process = run_cli("--script", str(script))
    _, stderr = process.communicate(timeout=30)
    assert process.returncode == 2
    assert stderr == f"error: {script}: scripts.k[1]: 'hang' must be true or false, got 1\n"
