"""Wire details of the scripted provider that a client can see: script keys in headers,
the shapes of streams, errors and usage per protocol, and request checks the real APIs
make. Driven over real loopback sockets."""

from __future__ import annotations

import json
from collections.abc import Iterator
from urllib.parse import quote

import httpx
import pytest

from pytest_agentbench.scripted import Reply, ScriptedServer


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as running:
        yield running


@pytest.fixture(scope="module")
def http() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=10, trust_env=False) as client:
        yield client


CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
MESSAGES = {"model": "m", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]}


# --- script keys: any Unicode, percent-encoded in the header -------------------------

UNICODE_SUITE = """
[suite]
verifier = { kind = "exact" }

[[task]]
id = "äpfel-日本"
input = "hi"
target = "ok"
scripted = ["wrong", "ok"]
repairs = 1
"""


def test_non_ascii_suite_path_and_task_id_run_end_to_end(pytester: pytest.Pytester) -> None:
    pytester.makefile(".toml", **{"bench_grüße": UNICODE_SUITE})
    result = pytester.runpytest_inprocess("--agentbench", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    latest = (pytester.path / "agentbench-results" / "latest").resolve()
    (record,) = latest.glob("tasks/*/*/result.json")
    data = json.loads(record.read_text(encoding="utf-8"))
    assert data["outcome"] == "passed" and len(data["attempts"]) == 2


def test_percent_encoded_script_header_picks_the_unicode_script(server, http):
    server.add_scripts({"bench_ü.toml::日本": ["unicode"], "plain%41": ["literal"]})
    for key, text in (("bench_ü.toml::日本", "unicode"), ("plain%41", "literal")):
        headers = {"x-agentbench-script": quote(key, safe=""), "x-agentbench-turn": "0"}
        response = http.post(f"{server.url}/chat/completions", json=CHAT, headers=headers)
        assert response.status_code == 200, response.text
        assert response.json()["choices"][0]["message"]["content"] == text
    assert server.requests[0]["key"] == "bench_ü.toml::日本"


def test_a_script_header_that_is_not_utf8_is_a_clear_400(server, http):
    server.add_scripts({"k": ["x"]})
    response = http.post(
        f"{server.url}/chat/completions", json=CHAT, headers={"x-agentbench-script": "%ff%fe"}
    )
    assert response.status_code == 400
    assert "percent-encoded" in response.json()["error"]["message"]


def test_a_raw_utf8_script_header_is_read_as_utf8(server, http):
    server.add_scripts({"äpfel": ["raw"]})
    headers = {"x-agentbench-script": "äpfel".encode(), "x-agentbench-turn": "0"}
    response = http.post(f"{server.url}/chat/completions", json=CHAT, headers=headers)
    assert response.json()["choices"][0]["message"]["content"] == "raw"


# --- Anthropic stream order ------------------------------------------------------------


def sse_names(raw: bytes) -> list[str]:
    events = raw.decode().split("\n\n")[:-1]
    return [event.split("\n", 1)[0].removeprefix("event: ") for event in events]


def test_anthropic_ping_follows_the_first_content_block_start(server, http):
    server.add_scripts({"k": [{"thinking": "hmm", "text": "hi"}]})
    response = http.post(f"{server.url}/messages", json={**MESSAGES, "model": "k", "stream": True})
    names = sse_names(response.content)
    assert names[:4] == ["message_start", "content_block_start", "ping", "content_block_delta"]
    assert names.count("ping") == 1
    assert names[-2:] == ["message_delta", "message_stop"]


# --- the agent loop sends thinking back with its tool results --------------------------


def bash(command: str, **extra: str) -> dict[str, object]:
    return {"name": "bash", "arguments": {"command": command}, **extra}


AGENT_SUITE = {
    "suite": {"name": "think", "mode": "agent", "timeout_s": 60},
    "task": [
        {
            "id": "round-trip",
            "input": "Say what echo prints.",
            "target": "done",
            "verifier": {"kind": "includes"},
            "scripted": [
                {
                    "thinking": "First I run echo.",
                    "text": "Running.",
                    "tool_calls": [bash("echo one")],
                },
                {
                    "redacted_thinking": "EuYBCkQYAiJA-opaque",
                    "tool_calls": [bash("echo two", id="toolu_second")],
                },
                "done",
            ],
        }
    ],
}


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "no-stream"])
def test_agent_loop_returns_thinking_blocks_unchanged_with_tool_results(
    pytester: pytest.Pytester, stream: bool
) -> None:
    pytester.makefile(".json", bench_think=json.dumps(AGENT_SUITE))
    args = ["--agentbench", "-p", "no:cacheprovider", "--agentbench-model", "scripted/anthropic"]
    if not stream:
        args.append("--agentbench-no-stream")
    result = pytester.runpytest(*args)
    result.assert_outcomes(passed=1)
    task = next((pytester.path / "agentbench-results" / "latest" / "tasks" / "think").iterdir())
    entries = json.loads((task / "trajectory.json").read_text())["requests"]
    bodies = [entry["request"]["body"] for entry in entries if "request" in entry]
    assert len(bodies) == 3
    second, third = bodies[1]["messages"], bodies[2]["messages"]
    thinking = second[1]["content"][0]
    assert thinking["type"] == "thinking"
    assert thinking["thinking"] == "First I run echo."
    assert thinking["signature"]  # the server checks it matches the text
    assert [block["type"] for block in second[1]["content"]] == ["thinking", "text", "tool_use"]
    redacted = third[3]["content"][0]
    assert redacted == {"type": "redacted_thinking", "data": "EuYBCkQYAiJA-opaque"}


# --- a turn's error sequence: bad input is one clear line ------------------------------


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        ([], "task 'x': scripted[0]: 'error' must not be an empty list"),
        ([{"status": 503}, {"status": 200}], "scripted[0]: 'error'[1]: 'status' must be an HTTP"),
        ([{"status": 503, "times": 0}], "scripted[0]: 'error'[0]: 'times' must be an integer >= 1"),
        ([{"status": 503, "colour": "red"}], "scripted[0]: 'error'[0]: unknown key(s) 'colour'"),
        ("boom", "scripted[0]: 'error' must be a table"),
    ],
)
def test_bad_error_sequences_name_the_place(error, expected):
    with pytest.raises(ValueError) as info:
        Reply.parse({"text": "ok", "error": error}, "task 'x': scripted[0]")
    assert expected in str(info.value)
    assert "\n" not in str(info.value)


def test_error_sequence_counts_each_entry_times_then_serves_the_reply():
    reply = Reply.parse(
        {"text": "ok", "error": [{"status": 529, "times": 2}, {"status": 500}]}, "w"
    )
    statuses = [getattr(reply.error_at(n), "status", None) for n in range(5)]
    assert statuses == [529, 529, 500, None, None]
    lasting = Reply.parse({"text": "ok", "error": {"status": 503}}, "w")
    assert [lasting.error_at(n).status for n in range(3)] == [503, 503, 503]
