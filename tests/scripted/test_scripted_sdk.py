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
from sdk_support import anthropic_sdk, openai_sdk

from pytest_agentbench.scripted import ScriptedServer

#: Short enough that the SDKs' own backoff (which honours Retry-After) stays quick.
RETRY_AFTER = 0.01


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as running:
        yield running


@pytest.fixture
def oai(server: ScriptedServer) -> Iterator[openai.OpenAI]:
    client = openai_sdk(server)
    yield client
    client.close()


@pytest.fixture
def claude(server: ScriptedServer) -> Iterator[anthropic.Anthropic]:
    client = anthropic_sdk(server)
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


# --- wire shapes the SDKs expose ------------------------------------------------------


def test_openai_429_body_is_the_rate_limit_shape(server, oai):
    server.add_scripts({"k": [{"error": {"status": 429, "message": "slow down"}}]})
    with pytest.raises(openai.RateLimitError) as info:
        oai.with_options(max_retries=0).chat.completions.create(**CHAT)
    assert (info.value.code, info.value.type, info.value.param) == (
        "rate_limit_exceeded",
        "requests",
        None,
    )
    assert info.value.body == {
        "message": "slow down",
        "type": "requests",
        "param": None,
        "code": "rate_limit_exceeded",
    }


@pytest.mark.parametrize(("status", "kind"), [(429, "rate_limit_error"), (529, "overloaded_error")])
def test_anthropic_fault_bodies_name_their_error_type(server, claude, status, kind):
    server.add_scripts({"k": [{"error": {"status": status, "message": "later"}}]})
    with pytest.raises(anthropic.APIStatusError) as info:
        claude.with_options(max_retries=0).messages.create(**MESSAGES)
    assert info.value.status_code == status
    assert info.value.body == {"type": "error", "error": {"type": kind, "message": "later"}}


TOOL_ONLY = {"tool_calls": [{"name": "weather", "arguments": {"city": "Oslo"}}]}


def test_a_tool_only_chat_stream_starts_with_null_content(server, oai):
    server.add_scripts({"k": [TOOL_ONLY]})
    chunks = list(oai.chat.completions.create(**CHAT, stream=True))
    first = chunks[0].choices[0].delta
    assert first.role == "assistant"
    assert first.content is None
    assert first.model_dump(exclude_unset=True)["content"] is None  # sent as null, not ""


def test_a_text_chat_stream_starts_with_empty_content(server, oai):
    server.add_scripts({"k": ["hello"]})
    first = next(iter(oai.chat.completions.create(**CHAT, stream=True))).choices[0].delta
    assert (first.role, first.content, first.refusal) == ("assistant", "", None)


@pytest.mark.parametrize("n", [2, 0, "3"])
def test_chat_n_other_than_one_is_refused_with_the_api_400(server, oai, n):
    server.add_scripts({"k": ["one", "two"]})
    with pytest.raises(openai.BadRequestError) as info:
        oai.chat.completions.create(**CHAT, n=n)
    assert info.value.status_code == 400
    assert (info.value.type, info.value.param) == ("invalid_request_error", "n")
    assert "n" in info.value.message
    # a refused request uses no turn of the script
    assert oai.chat.completions.create(**CHAT, n=1).choices[0].message.content == "one"


CHAT_USAGE = {
    "prompt_tokens": 50,
    "completion_tokens": 3,
    "total_tokens": 53,
    "prompt_tokens_details": {"cached_tokens": 44},
    "completion_tokens_details": {"reasoning_tokens": 1},
}
ANTHROPIC_USAGE = {
    "input_tokens": 12,
    "cache_creation_input_tokens": 300,
    "cache_read_input_tokens": 44000,
    "output_tokens": 9,
}


@pytest.mark.parametrize("stream", [False, True])
def test_chat_shaped_usage_is_served_over_anthropic_with_its_arithmetic(server, claude, stream):
    server.add_scripts({"k": [{"text": "x", "usage": CHAT_USAGE}]})
    if stream:
        with claude.messages.stream(**MESSAGES) as events:
            usage = events.get_final_message().usage
    else:
        usage = claude.messages.create(**MESSAGES).usage
    # Anthropic's input_tokens excludes the cache reads that OpenAI's prompt_tokens includes
    assert (usage.input_tokens, usage.cache_read_input_tokens, usage.output_tokens) == (6, 44, 3)


def test_anthropic_shaped_usage_is_served_over_chat_with_its_arithmetic(server, oai):
    server.add_scripts({"k": [{"text": "x", "usage": ANTHROPIC_USAGE}]})
    usage = oai.chat.completions.create(**CHAT).usage
    assert usage.prompt_tokens == 12 + 300 + 44000
    assert usage.prompt_tokens_details.cached_tokens == 44000
    assert (usage.completion_tokens, usage.total_tokens) == (9, 44312 + 9)


def test_chat_shaped_usage_is_served_over_responses(server, oai):
    server.add_scripts({"k": [{"text": "x", "usage": CHAT_USAGE}]})
    usage = oai.responses.create(model="k", input="hi").usage
    assert (usage.input_tokens, usage.input_tokens_details.cached_tokens) == (50, 44)
    assert (usage.output_tokens, usage.output_tokens_details.reasoning_tokens) == (3, 1)
    assert usage.total_tokens == 53


def test_native_usage_is_still_served_verbatim(server, claude):
    server.add_scripts({"k": [{"text": "x", "usage": ANTHROPIC_USAGE}]})
    usage = claude.messages.create(**MESSAGES).usage
    assert usage.model_dump(exclude_none=True) == ANTHROPIC_USAGE


@pytest.mark.parametrize("stream", [False, True])
def test_a_matching_stop_sequence_ends_the_message_and_is_reported(server, claude, stream):
    server.add_scripts({"k": [{"text": "Answer: 42</answer> and more END", **TOOL_ONLY}]})
    args = {**MESSAGES, "stop_sequences": ["END", "</answer>"]}
    if stream:
        with claude.messages.stream(**args) as events:
            message = events.get_final_message()
    else:
        message = claude.messages.create(**args)
    assert [block.text for block in message.content] == ["Answer: 42"]  # no tool_use after
    assert (message.stop_reason, message.stop_sequence) == ("stop_sequence", "</answer>")


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("stop", ["</answer>", ["END", "</answer>"]])
def test_a_matching_chat_stop_ends_the_content(server, oai, stream, stop):
    server.add_scripts({"k": [{"text": "Answer: 42</answer> and more END", **TOOL_ONLY}]})
    if stream:
        chunks = list(oai.chat.completions.create(**CHAT, stop=stop, stream=True))
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        calls = [c for c in chunks if c.choices and c.choices[0].delta.tool_calls]
        finish = chunks[-1].choices[0].finish_reason
    else:
        choice = oai.chat.completions.create(**CHAT, stop=stop).choices[0]
        text, calls, finish = (
            choice.message.content,
            choice.message.tool_calls,
            choice.finish_reason,
        )
    assert (text, finish) == ("Answer: 42", "stop")
    assert not calls


def test_without_a_match_stop_sequence_stays_null(server, claude):
    server.add_scripts({"k": ["plain answer"]})
    message = claude.messages.create(**MESSAGES, stop_sequences=["END"])
    assert (message.stop_reason, message.stop_sequence) == ("end_turn", None)


# --- thinking sent back with tool results, as the API requires ------------------------

THINK_AND_CALL = {
    "thinking": "I need the weather first.",
    "text": "Let me look.",
    "tool_calls": [{"name": "weather", "arguments": {"city": "Oslo"}}],
}
TOOLS = [{"name": "weather", "input_schema": {"type": "object"}}]


def tool_round(content: list[Any]) -> dict[str, Any]:
    """The conversation after the first reply: its assistant turn (``content``) answered
    by the tool result."""
    result = {"type": "tool_result", "tool_use_id": "toolu_scripted_0", "content": "sunny"}
    return {
        **MESSAGES,
        "tools": TOOLS,
        "messages": [
            *MESSAGES["messages"],
            {"role": "assistant", "content": content},
            {"role": "user", "content": [result]},
        ],
    }


def dump(blocks: list[Any]) -> list[dict[str, Any]]:
    return [block.model_dump(exclude_none=True) for block in blocks]


@pytest.mark.parametrize(
    "reasoning",
    [{"thinking": "I need the weather first."}, {"redacted_thinking": "EuYBCkQYAiJA-opaque"}],
    ids=["thinking", "redacted_thinking"],
)
def test_reasoning_sent_back_unchanged_is_accepted_and_dropped_is_a_400(server, claude, reasoning):
    reply = {**THINK_AND_CALL, "thinking": "", **reasoning}
    server.add_scripts({"k": [reply, "It is sunny."]})
    client = claude.with_options(max_retries=0)
    first = client.messages.create(**MESSAGES, tools=TOOLS)
    assert first.content[0].type == next(iter(reasoning))
    dropped = [b for b in dump(first.content) if "thinking" not in b["type"]]
    with pytest.raises(anthropic.BadRequestError) as info:
        client.messages.create(**tool_round(dropped))
    assert info.value.body["error"]["type"] == "invalid_request_error"
    assert "thinking" in info.value.body["error"]["message"]
    answer = client.messages.create(**tool_round(dump(first.content)))
    assert answer.content[0].text == "It is sunny."


def test_an_edited_thinking_block_fails_its_signature(server, claude):
    server.add_scripts({"k": [THINK_AND_CALL, "It is sunny."]})
    client = claude.with_options(max_retries=0)
    content = dump(client.messages.create(**MESSAGES, tools=TOOLS).content)
    content[0]["thinking"] += " (edited)"
    with pytest.raises(anthropic.BadRequestError) as info:
        client.messages.create(**tool_round(content))
    assert "signature" in info.value.body["error"]["message"]


def test_a_turn_without_thinking_needs_none_back(server, claude):
    server.add_scripts({"k": [{**THINK_AND_CALL, "thinking": ""}, "It is sunny."]})
    client = claude.with_options(max_retries=0)
    content = dump(client.messages.create(**MESSAGES, tools=TOOLS).content)
    assert client.messages.create(**tool_round(content)).content[0].text == "It is sunny."


def test_a_turn_error_sequence_answers_the_sdk_retries_in_order(server, claude):
    errors = [{"status": 529, "retry_after": RETRY_AFTER}, {"status": 429, "retry_after": 0}]
    server.add_scripts({"k": [{"text": "third time", "error": errors}, "next turn"]})
    message = claude.messages.create(**MESSAGES)
    assert message.content[0].text == "third time"
    assert turns(server) == [0, 0, 0]
