"""What docs/agents-external.md promises of the gateway, each pinned by a test that fails
when the rule is broken: a request is attributed only where its route's path and key
both match; the model's server gets the real key, never the agent's stand-in; a
translated reply that carries tool calls is marked as a tool call in the agent's
protocol whatever the model's server said beside them; an input count the model did not
report reaches a Messages agent as unknown, not 0; an agent's containment record says
what it gets. Real servers on 127.0.0.1: the gateway, an independent standard-library
model server (tests/upstream_support.py, which records headers unredacted) and the
scripted provider; the official SDKs in front."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from upstream_support import CALL_ARGS, CALL_ID, CALL_NAME, Upstream, upstream_server

from pytest_agentbench.agents.external import AgentWorkspace
from pytest_agentbench.agents.gateway import Gateway
from pytest_agentbench.agents.route import Route
from pytest_agentbench.models.anthropic import AnthropicClient
from pytest_agentbench.models.base import ModelClient, ModelSpec
from pytest_agentbench.models.openai_chat import OpenAIChatClient
from pytest_agentbench.models.scripted import register_scripts, scripted_client
from pytest_agentbench.models.siblings import sibling
from pytest_agentbench.sandbox.isolation import containment
from pytest_agentbench.scripted.server import ScriptedServer

anthropic = pytest.importorskip("anthropic")
openai = pytest.importorskip("openai")

#: The real credential the gateway's clients hold (the agent never does).
REAL = "sk-real-upstream-5f2c81d0e9"
TOOL = {
    "name": CALL_NAME,
    "description": "Read a file",
    "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}},
}
ASK = [{"role": "user", "content": "what do the notes say?"}]


@pytest.fixture(scope="module")
def upstream() -> Iterator[Upstream]:
    with upstream_server() as server:
        yield server


@pytest.fixture
def gateway() -> Iterator[Gateway]:
    made = Gateway()
    yield made
    made.close()


def _route(gateway: Gateway, url: str, speaks: str, key: str = REAL) -> Route:
    """A route whose model is a built-in client of ``speaks`` (``chat``: openai-compat,
    ``messages``: anthropic) at ``url``, holding the real ``key``."""
    bare: ModelClient
    if speaks == "chat":
        bare = OpenAIChatClient(ModelSpec("openai-compat", "m"), f"{url}/v1", key, trust_env=False)
    else:
        bare = AnthropicClient(ModelSpec("anthropic", "m"), url, key, trust_env=False)
    route = gateway.open_route(
        f"{speaks}-{time.monotonic()}", bare.spec.label, lambda p: sibling(bare, p)
    )
    route.begin_attempt(0, time.monotonic() + 60, None)
    return route


def _chat_body() -> dict[str, object]:
    return {"model": "m", "messages": ASK}


# --- attribution ---------------------------------------------------------------------------


def test_a_request_is_attributed_only_where_its_route_path_and_key_both_match(
    gateway: Gateway, upstream: Upstream
) -> None:
    """A valid key on another route's path, on a route that was never opened, or on no
    route at all is refused, reaches no model and lands on no task."""
    mine = _route(gateway, upstream.url, "chat")
    other = _route(gateway, upstream.url, "chat")
    before = len(upstream.requests)
    auth = {"authorization": f"Bearer {mine.key}"}
    root = gateway.url
    with httpx.Client(timeout=30) as http:
        elsewhere = http.post(
            f"{other.base_url}/v1/chat/completions", headers=auth, json=_chat_body()
        )
        assert elsewhere.status_code == 401, elsewhere.text
        unknown = http.post(
            f"{root}/agent/never-opened/v1/chat/completions", headers=auth, json=_chat_body()
        )
        assert unknown.status_code == 401, unknown.text
        bare = http.post(f"{root}/v1/chat/completions", headers=auth, json=_chat_body())
        assert bare.status_code in (401, 404), bare.text
        assert len(upstream.requests) == before  # nothing reached the model
        own = http.post(f"{mine.base_url}/v1/chat/completions", headers=auth, json=_chat_body())
        assert own.status_code == 200, own.text
    assert (mine.calls, other.calls) == (1, 0)
    assert len(upstream.requests) == before + 1


# --- the real key upstream -----------------------------------------------------------------


def test_the_model_receives_the_real_key_never_the_agents_stand_in(
    gateway: Gateway, upstream: Upstream
) -> None:
    """Relayed Chat and Messages calls and a translated one: the independent server saw
    the real key in the protocol's own header on every request, and the stand-in in none
    of its headers."""
    chat = _route(gateway, upstream.url, "chat")
    messages = _route(gateway, upstream.url, "messages")
    before = len(upstream.requests)
    with httpx.Client(timeout=30) as http:
        relayed = http.post(
            f"{chat.base_url}/v1/chat/completions",
            headers={"authorization": f"Bearer {chat.key}"},
            json=_chat_body(),
        )
        assert relayed.status_code == 200, relayed.text
        native = http.post(
            f"{messages.base_url}/v1/messages",
            headers={"x-api-key": messages.key, "anthropic-version": "2023-06-01"},
            json={"model": "m", "max_tokens": 50, "messages": ASK},
        )
        assert native.status_code == 200, native.text
        translated = http.post(  # a Messages agent over the chat-only model
            f"{chat.base_url}/v1/messages",
            headers={"x-api-key": chat.key, "authorization": f"Bearer {chat.key}"},
            json={"model": "m", "max_tokens": 50, "messages": ASK},
        )
        assert translated.status_code == 200, translated.text
    seen = upstream.requests[before:]
    assert [r["path"] for r in seen] == [
        "/v1/chat/completions",
        "/v1/messages",
        "/v1/chat/completions",
    ]
    assert seen[0]["headers"]["authorization"] == f"Bearer {REAL}"
    assert seen[1]["headers"]["x-api-key"] == REAL
    assert seen[2]["headers"]["authorization"] == f"Bearer {REAL}"
    for request in seen:
        for value in request["headers"].values():
            assert chat.key not in value and messages.key not in value, request["headers"]


# --- tool calls marked as tool calls -------------------------------------------------------


def test_a_translated_tool_call_is_marked_one_though_the_server_said_stop(
    gateway: Gateway, upstream: Upstream
) -> None:
    """The model's server says ``stop`` (Chat) or ``end_turn`` (Messages) beside its tool
    call, as some local servers do; translated, the agent's protocol marks a tool call:
    Messages ``tool_use``, Chat ``tool_calls``, Responses a ``function_call`` item in a
    completed response — streamed and not."""
    assert (upstream.chat_finish, upstream.messages_stop) == ("stop", "end_turn")
    over_chat = _route(gateway, upstream.url, "chat")
    env = over_chat.endpoint.environment()
    claude = anthropic.Anthropic(
        base_url=env["ANTHROPIC_BASE_URL"], api_key=env["ANTHROPIC_API_KEY"], max_retries=0
    )
    whole = claude.messages.create(model="m", max_tokens=50, messages=ASK, tools=[TOOL])
    assert [b.type for b in whole.content] == ["text", "tool_use"]
    assert whole.stop_reason == "tool_use"
    with claude.messages.stream(model="m", max_tokens=50, messages=ASK, tools=[TOOL]) as events:
        streamed = events.get_final_message()
    assert [b.type for b in streamed.content] == ["text", "tool_use"]
    assert streamed.stop_reason == "tool_use"
    use = streamed.content[1]
    assert (use.id, use.name, use.input) == (CALL_ID, CALL_NAME, CALL_ARGS)
    claude.close()

    over_messages = _route(gateway, upstream.url, "messages")
    env = over_messages.endpoint.environment()
    client = openai.OpenAI(
        base_url=env["OPENAI_BASE_URL"], api_key=env["OPENAI_API_KEY"], max_retries=0
    )
    function = {"name": CALL_NAME, "parameters": TOOL["input_schema"]}
    tools = [{"type": "function", "function": function}]
    reply = client.chat.completions.create(model="m", messages=ASK, tools=tools)
    assert reply.choices[0].finish_reason == "tool_calls"
    assert reply.choices[0].message.tool_calls[0].id == CALL_ID
    chunks = list(client.chat.completions.create(model="m", messages=ASK, tools=tools, stream=True))
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert [f for f in finishes if f] == ["tool_calls"]

    response = client.responses.create(
        model="m", input="what do the notes say?", tools=[{"type": "function", **function}]
    )
    assert response.status == "completed"
    assert [(i.type, getattr(i, "call_id", None)) for i in response.output] == [
        ("message", None),
        ("function_call", CALL_ID),
    ]
    client.close()
    records = over_chat.records_of(0) + over_messages.records_of(0)
    assert [r.entry["translated"] for r in records] == ["messages→chat"] * 2 + [
        "chat→messages"
    ] * 2 + ["responses→messages"]
    assert all(r.tool_calls == 1 for r in records)


# --- unknown usage -------------------------------------------------------------------------


@dataclass(frozen=True)
class _Task:
    key: str
    scripted: tuple[object, ...]
    id: str = "t"
    path: str = "bench_promises.toml"


def test_an_input_count_the_model_did_not_report_is_unknown_to_a_messages_agent(
    gateway: Gateway,
) -> None:
    """A chat-only model whose server reports output tokens alone: the translated reply
    says the input count is unknown (null), streamed and not, never 0; a reported count
    is handed on."""
    key = "unknown-input"
    replies: list[object] = [
        {"text": "one", "usage": {"completion_tokens": 2}},
        {"text": "two", "usage": {"completion_tokens": 2}},
        {"text": "three", "usage": {"prompt_tokens": 12, "completion_tokens": 1}},
    ]
    with ScriptedServer() as server:
        register_scripts(
            scripted_client(ModelSpec("scripted", "scripted"), server.url),
            [_Task(key, tuple(replies))],
        )
        bare = OpenAIChatClient(ModelSpec("openai-compat", key), server.url, "k", trust_env=False)
        route = gateway.open_route(key, bare.spec.label, lambda p: sibling(bare, p))
        route.begin_attempt(0, time.monotonic() + 60, None)
        env = route.endpoint.environment()
        with httpx.Client(timeout=30) as http:
            headers = {"x-api-key": env["ANTHROPIC_API_KEY"]}
            url = f"{route.base_url}/v1/messages"
            ask = {"model": "m", "max_tokens": 50, "messages": ASK}
            whole = http.post(url, headers=headers, json=ask).json()
            assert whole["usage"]["input_tokens"] is None, whole["usage"]
            assert whole["usage"]["output_tokens"] == 2
            stream = http.post(url, headers=headers, json={**ask, "stream": True}).text
            assert '"input_tokens": 0' not in stream, stream
            assert '"input_tokens": null' in stream
        claude = anthropic.Anthropic(
            base_url=env["ANTHROPIC_BASE_URL"], api_key=env["ANTHROPIC_API_KEY"], max_retries=0
        )
        with claude.messages.stream(model="m", max_tokens=50, messages=ASK) as events:
            known = events.get_final_message()
        assert (known.usage.input_tokens, known.usage.output_tokens) == (12, 1)
        claude.close()
        bare.close()


# --- the containment record ----------------------------------------------------------------


@pytest.mark.parametrize("isolation", ["auto", "basic", "strict"])
def test_an_agents_containment_record_says_what_it_gets(tmp_path: Path, isolation: str) -> None:
    """``network`` and the words beside it agree: an agent that shares the host's
    network (auto, basic) is never said to have "no network"; under strict it reaches
    its gateway alone."""
    if isolation == "strict" and containment("auto")["level"] != "strong":
        pytest.skip("strict needs bubblewrap: " + str(containment("auto")["detail"]))
    workspace = AgentWorkspace.create(tmp_path / "ws", {}, None, isolation=isolation)
    record = workspace.containment()
    detail = str(record["detail"])
    if isolation == "strict":
        assert record["network"] is False and "reaches its gateway alone" in detail
    else:
        assert record["network"] is True, record
        assert "no network" not in detail, detail
        assert "network" in detail  # said: shared to reach the gateway, or reachable
