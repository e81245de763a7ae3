"""The official OpenAI and Anthropic SDKs against the scripted provider, as they ship:
their own retries (default ``max_retries``), their own parsing. The scripted provider is
a contract test double, so what these SDKs see must be what the real APIs send."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import openai
import pytest

from pytest_agentbench.scripted import ScriptedServer

KEY = "sk-test-not-a-real-key"
#: Short enough that the SDKs' own backoff (which honours Retry-After) stays quick.
RETRY_AFTER = 0.01


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as running:
        yield running


@pytest.fixture
def oai(server: ScriptedServer) -> Iterator[openai.OpenAI]:
    client = openai.OpenAI(
        base_url=server.url, api_key=KEY, http_client=openai.DefaultHttpxClient(trust_env=False)
    )
    yield client
    client.close()


@pytest.fixture
def claude(server: ScriptedServer) -> Iterator[anthropic.Anthropic]:
    client = anthropic.Anthropic(
        base_url=server.url.removesuffix("/v1"),
        api_key=KEY,
        http_client=anthropic.DefaultHttpxClient(trust_env=False),
    )
    yield client
    client.close()


def fault(status: int, times: int | None = 1, text: str = "recovered") -> dict[str, Any]:
    error: dict[str, Any] = {"status": status, "retry_after": RETRY_AFTER}
    if times is not None:
        error["times"] = times
    return {"text": text, "error": error}


def turns(server: ScriptedServer) -> list[int]:
    return [entry["turn"] for entry in server.requests]


CHAT = {"model": "k", "messages": [{"role": "user", "content": "hi"}]}
MESSAGES = {"model": "k", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]}


# --- retries: the script position follows the conversation, not the HTTP requests ----


@pytest.mark.parametrize("stream", [False, True])
def test_openai_sdk_retry_clears_a_scripted_429(server, oai, stream):
    assert oai.max_retries >= 1  # the SDK's default, untouched
    server.add_scripts({"k": [fault(429)]})
    if stream:
        text = "".join(
            chunk.choices[0].delta.content or ""
            for chunk in oai.chat.completions.create(**CHAT, stream=True)
            if chunk.choices
        )
    else:
        text = oai.chat.completions.create(**CHAT).choices[0].message.content
    assert text == "recovered"
    assert turns(server) == [0, 0]  # the SDK's retry is the same turn


def test_openai_sdk_responses_retry_clears_a_scripted_500(server, oai):
    server.add_scripts({"k": [fault(500, times=2)]})
    response = oai.responses.create(model="k", input="hi")
    assert response.output_text == "recovered"
    assert turns(server) == [0, 0, 0]


@pytest.mark.parametrize("status", [429, 529])
@pytest.mark.parametrize("stream", [False, True])
def test_anthropic_sdk_retry_clears_a_scripted_fault(server, claude, status, stream):
    assert claude.max_retries >= 1
    server.add_scripts({"k": [fault(status)]})
    if stream:
        with claude.messages.stream(**MESSAGES) as events:
            message = events.get_final_message()
    else:
        message = claude.messages.create(**MESSAGES)
    assert [block.text for block in message.content] == ["recovered"]
    assert turns(server) == [0, 0]


def test_a_lasting_fault_stays_on_its_turn_through_every_sdk_retry(server, oai):
    server.add_scripts({"k": [fault(503, times=None), "next turn"]})
    with pytest.raises(openai.InternalServerError):
        oai.chat.completions.create(**CHAT)
    assert turns(server) == [0] * (1 + oai.max_retries)
    # a new conversation state is a new turn
    other = {**CHAT, "messages": [{"role": "user", "content": "something else"}]}
    assert oai.chat.completions.create(**other).choices[0].message.content == "next turn"


def test_identical_requests_after_a_success_still_advance_the_script(server, oai):
    server.add_scripts({"k": ["Hello!", "Hello again."]})
    first = oai.chat.completions.create(**CHAT).choices[0].message.content
    second = oai.chat.completions.create(**CHAT).choices[0].message.content
    assert (first, second) == ("Hello!", "Hello again.")


def test_a_retried_turn_header_request_keeps_counting_that_turn(server):
    """With ``x-agentbench-turn`` (the plugin's own client) the turn is explicit and
    ``times`` counts the requests of that turn, whoever sent them."""
    server.add_scripts({"k": [fault(429, times=2)]})
    headers = {"x-agentbench-script": "k", "x-agentbench-turn": "0"}
    with httpx.Client(trust_env=False, timeout=10) as http:
        statuses = [
            http.post(f"{server.url}/chat/completions", json=CHAT, headers=headers).status_code
            for _ in range(3)
        ]
    assert statuses == [429, 429, 200]
