"""The gateway on its own: real servers on 127.0.0.1 (the gateway, the scripted provider
behind it), real clients in front (httpx, the official OpenAI and Anthropic SDKs).
Relaying per protocol, streamed and not; attribution by route and key; refusals in the
protocol's own error shape; retries before the first byte; the tool-call loop watch on
the history an agent sends."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest

from pytest_agentbench.agents.gateway import Gateway
from pytest_agentbench.agents.route import Route
from pytest_agentbench.models.base import ModelClient, ModelSpec
from pytest_agentbench.models.retry import RetryingClient, RetryPolicy
from pytest_agentbench.models.scripted import register_scripts, scripted_client
from pytest_agentbench.models.siblings import sibling
from pytest_agentbench.scripted.server import ScriptedServer


@dataclass(frozen=True)
class _Task:
    key: str
    scripted: tuple[object, ...]
    id: str = "t"
    path: str = "bench_gateway.toml"


@pytest.fixture(scope="module")
def provider() -> Iterator[str]:
    server = ScriptedServer()
    url = server.start()
    yield url
    server.stop()


@pytest.fixture
def gateway() -> Iterator[Gateway]:
    made = Gateway()
    yield made
    made.close()


def _route(gateway: Gateway, url: str, key: str, replies: list[object]) -> Route:
    bare = scripted_client(ModelSpec("scripted", "scripted"), url)
    register_scripts(bare, [_Task(key, tuple(replies))])
    policy = RetryPolicy(max_attempts=3, base_delay_s=0.0, max_delay_s=0.0)

    def clients(protocol: str) -> ModelClient | None:
        made = sibling(bare, protocol)
        return RetryingClient(made, policy) if made is not None else None

    route = gateway.open_route(key, "scripted", clients)
    route.begin_attempt(0, time.monotonic() + 60, None)
    return route


def test_each_protocol_is_relayed_streamed_and_not(gateway: Gateway, provider: str) -> None:
    route = _route(gateway, provider, "protocols", ["one", "two", "three", "four"])
    key = route.endpoint.key
    with httpx.Client(timeout=30) as http:
        chat = http.post(
            f"{route.base_url}/v1/chat/completions",
            headers={"authorization": f"Bearer {key}"},
            json={
                "model": "whatever",
                "messages": [{"role": "user", "content": "hi there"}],
                "stream": True,
                "stream_options": {"include_usage": True},
            },
        )
        assert chat.status_code == 200 and '"content": "one"' in chat.text
        assert chat.text.rstrip().endswith("data: [DONE]")
        messages = http.post(
            f"{route.base_url}/v1/messages",
            headers={"x-api-key": key, "anthropic-version": "2023-06-01"},
            json={"model": "m", "max_tokens": 50, "messages": [{"role": "user", "content": "x"}]},
        )
        assert messages.json()["content"][0]["text"] == "two"
        responses = http.post(
            f"{route.base_url}/responses",  # /v1 may be left out
            headers={"authorization": f"Bearer {key}"},
            json={"model": "m", "input": "x", "stream": True},
        )
        assert "event: response.completed" in responses.text
    records = route.records_of(0)
    assert [r.text for r in records] == ["one", "two", "three"]
    assert [r.entry["protocol"] for r in records] == ["chat", "messages", "responses"]
    assert all(r.ok and r.usage is not None and r.usage["output"] == 1 for r in records)
    assert route.calls == 3


@pytest.mark.slow
def test_the_official_sdks_talk_to_the_gateway(gateway: Gateway, provider: str) -> None:
    openai = pytest.importorskip("openai")
    anthropic = pytest.importorskip("anthropic")
    route = _route(gateway, provider, "sdks", ["from openai", "from anthropic"])
    env = route.endpoint.environment()
    client = openai.OpenAI(base_url=env["OPENAI_BASE_URL"], api_key=env["OPENAI_API_KEY"])
    stream = client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "hi"}], stream=True
    )
    assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices) == "from openai"
    client.close()
    second = anthropic.Anthropic(
        base_url=env["ANTHROPIC_BASE_URL"], api_key=env["ANTHROPIC_API_KEY"]
    )
    with second.messages.stream(
        model="m", max_tokens=20, messages=[{"role": "user", "content": "hi"}]
    ) as events:
        assert events.get_final_text() == "from anthropic"
    second.close()


def test_requests_are_attributed_by_route_and_key_only(gateway: Gateway, provider: str) -> None:
    first = _route(gateway, provider, "first", ["first's reply"])
    second = _route(gateway, provider, "second", ["second's reply"])
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    with httpx.Client(timeout=30) as http:
        crossed = http.post(
            f"{first.base_url}/v1/chat/completions",
            headers={"authorization": f"Bearer {second.key}"},
            json=body,
        )
        assert crossed.status_code == 401
        assert "wrong key" in crossed.json()["error"]["message"]
        anthropic_shape = http.post(
            f"{first.base_url}/v1/messages", headers={"x-api-key": "nope"}, json=body
        )
        assert anthropic_shape.status_code == 401
        assert anthropic_shape.json()["error"]["type"] == "authentication_error"
        own = http.post(
            f"{second.base_url}/v1/chat/completions",
            headers={"authorization": f"Bearer {second.key}"},
            json=body,
        )
        assert own.json()["choices"][0]["message"]["content"] == "second's reply"
        second.stop("timeout", "the deadline passed")
        late = http.post(
            f"{second.base_url}/v1/chat/completions",
            headers={"authorization": f"Bearer {second.key}"},
            json=body,
        )
        assert late.status_code == 409 and "the deadline passed" in late.text
        gateway.close_route(first)
        closed = http.post(
            f"{first.base_url}/v1/chat/completions",
            headers={"authorization": f"Bearer {first.key}"},
            json=body,
        )
        # the route's own key after its task ended: 409 saying why (docs/agents-external.md)
        assert closed.status_code == 409, closed.text
        assert "the task has ended: its rollout finished" in closed.json()["error"]["message"]
        gateway.close_route(second)
        stopped = http.post(
            f"{second.base_url}/v1/messages",
            headers={"x-api-key": second.key},
            json=body,
        )
        assert stopped.status_code == 409 and "the deadline passed" in stopped.text
        stranger = http.post(
            f"{first.base_url}/v1/chat/completions",
            headers={"authorization": f"Bearer {second.key}"},
            json=body,
        )
        assert stranger.status_code == 401  # another route's key learns nothing
    assert first.calls == 0 and second.calls == 1


def test_a_model_with_no_protocol_client_is_refused(gateway: Gateway) -> None:
    """A plugin's client speaks none of the built-in protocols: nothing to relay over,
    nothing to translate through (tests/agents/test_translate.py has the translated
    cases)."""
    route = gateway.open_route("plugin-only", "myprovider/x", lambda protocol: None)
    with httpx.Client(timeout=30) as http:
        refused = http.post(
            f"{route.base_url}/v1/chat/completions",
            headers={"authorization": f"Bearer {route.key}"},
            json={"model": "m", "messages": [{"role": "user", "content": "hi"}]},
        )
    assert refused.status_code == 400
    message = refused.json()["error"]["message"]
    assert "not served over OpenAI Chat Completions" in message
    assert "neither relay nor translate" in message


def test_errors_are_retried_before_the_first_byte_then_handed_on(
    gateway: Gateway, provider: str
) -> None:
    route = _route(
        gateway,
        provider,
        "errors",
        [
            {"text": "after one 429", "error": {"status": 429, "times": 1}},
            {"text": "never", "error": {"status": 400, "message": "bad request body"}},
        ],
    )
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    headers = {"authorization": f"Bearer {route.key}"}
    with httpx.Client(timeout=30) as http:
        first = http.post(f"{route.base_url}/v1/chat/completions", headers=headers, json=body)
        second = http.post(f"{route.base_url}/v1/chat/completions", headers=headers, json=body)
    assert first.json()["choices"][0]["message"]["content"] == "after one 429"
    assert second.status_code == 400 and "bad request body" in second.text
    retried, failed = route.records_of(0)
    assert retried.ok and len(retried.entry["retries"]) == 1  # type: ignore[arg-type]
    assert not failed.ok and failed.entry["status"] == 400
    assert not route.stopped.is_set()


def test_a_tool_call_loop_in_the_agents_history_stops_the_route(
    gateway: Gateway, provider: str
) -> None:
    route = _route(gateway, provider, "tool-loop", ["ok"])
    history: list[object] = [{"role": "user", "content": "go"}]
    statuses = []
    with httpx.Client(timeout=30) as http:
        for n in range(5):
            response = http.post(
                f"{route.base_url}/v1/chat/completions",
                headers={"authorization": f"Bearer {route.key}"},
                json={"model": "m", "messages": history},
            )
            statuses.append(response.status_code)
            call = {
                "id": f"call_{n}",
                "type": "function",
                "function": {"name": "read_file", "arguments": '{"path": "a.txt"}'},
            }
            history += [
                {"role": "assistant", "content": "", "tool_calls": [call]},
                {"role": "tool", "tool_call_id": f"call_{n}", "content": "same"},
            ]
    # the 4th identical call shows up in the 5th request: killed there, refused after
    assert statuses == [200, 200, 200, 200, 400]
    assert route.stopped.is_set() and route.stop_info is not None
    assert route.stop_info.reason == "loop_killed"
    assert route.stop_info.evidence is not None and route.stop_info.evidence["repetitions"] == 4


def test_the_agents_own_usage_is_read_and_a_disagreement_flagged() -> None:
    from pytest_agentbench.agents.command import reported_usage, usage_disagreement

    # Claude Code's --output-format json: one object, Anthropic's usage arithmetic
    out = (
        'noise\n{"type": "result", "total_cost_usd": 0.012, "usage": {"input_tokens": 6, '
        '"cache_read_input_tokens": 44, "cache_creation_input_tokens": 0, "output_tokens": 3}}\n'
    )
    reported = reported_usage(out)
    assert reported is not None and reported["cost_usd"] == 0.012
    own = reported["usage"]
    assert isinstance(own, dict)
    counted = [{"input": 6, "cache_read": 44, "cache_write": 0, "output": 3}]
    assert usage_disagreement(own, counted) is None
    over = [{"input": 6, "cache_read": 44, "cache_write": 0, "output": 5}]
    assert usage_disagreement(own, over) == {"output": {"agent": 3, "gateway": 5}}
    # Chat shape: the prompt is the whole input
    chat = {"prompt_tokens": 50, "completion_tokens": 2}
    assert usage_disagreement(chat, [{"input": 50, "output": 2}]) is None
    # unknown on one side: no verdict
    assert usage_disagreement(chat, [{"input": None, "output": 2}]) is None
    assert reported_usage("no json here\n") is None


def test_an_unstreamed_looping_reply_is_relayed_whole_then_the_route_stopped(
    gateway: Gateway, provider: str
) -> None:
    """An agent that asks without streaming gets the whole reply (nothing can be cut);
    its loop is found as it is read, and the route stops once it is relayed, with the
    provider's usage for what was paid, not an estimate."""
    sentence = "I should double-check the total once more before answering. "
    reply = {"text": sentence, "repeat": 600, "usage": {"completion_tokens": 3600}}
    route = _route(gateway, provider, "whole-loop", [reply])
    with httpx.Client(timeout=30) as http:
        answer = http.post(
            f"{route.base_url}/v1/chat/completions",
            headers={"authorization": f"Bearer {route.endpoint.key}"},
            json={"model": "m", "messages": [{"role": "user", "content": "add"}]},
        )
    assert answer.status_code == 200
    assert answer.json()["choices"][0]["message"]["content"] == sentence * 600
    assert route.stop_info is not None and route.stop_info.reason == "loop_killed"
    assert route.stop_info.evidence is not None
    assert route.stop_info.evidence["rule"] == "whole reply"
    assert "loop in the model's reply (it arrived whole)" in route.stop_info.message
    (record,) = route.records_of(0)
    assert record.usage is not None and record.usage["output"] == 3600
