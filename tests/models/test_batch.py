"""models/batch.py and models/batch_results.py against the scripted provider's batch
endpoints, over real sockets on 127.0.0.1: the three protocols, splitting by limits, errored /
expired / canceled entries, a batch that fails validation, polling and its timeout, clear
errors."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from sdk_support import without_ids

from pytest_agentbench.errors import ModelError, ProviderError
from pytest_agentbench.models import batch, batch_results
from pytest_agentbench.models.anthropic import AnthropicClient
from pytest_agentbench.models.base import REQUEST_CALL, REQUEST_TASK, ModelRequest, ModelSpec
from pytest_agentbench.models.openai_chat import OpenAIChatClient
from pytest_agentbench.models.response_cache import ResponseCache
from pytest_agentbench.models.retry import RetryingClient
from pytest_agentbench.models.scripted import scripted_client
from pytest_agentbench.scripted import ScriptedServer

PROTOCOLS = ["scripted", "openai-responses", "anthropic"]
KEY = "sk-batch-test-secret-key"
SCRIPTS: dict[str, list[Any]] = {
    "plain": ["seven", "eight"],
    "rich": [
        {
            "text": "the answer is 7",
            "thinking": "3 and 4",
            "usage": {"prompt_tokens": 12, "completion_tokens": 5},
        }
    ],
    "tools": [{"tool_calls": [{"name": "add", "arguments": {"a": 3, "b": 4}}]}],
    "flaky": [{"text": "recovered", "error": {"status": 500, "message": "boom", "times": 1}}],
    "late": [{"text": "live after all", "batch_expired": True}],
}


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer(SCRIPTS) as running:
        yield running


def client_for(server: ScriptedServer, protocol: str) -> Any:
    return scripted_client(ModelSpec("scripted", protocol), server.url)


def ask(task: str, call: int = 0) -> ModelRequest:
    return ModelRequest(
        messages=({"role": "user", "content": f"what is 3 + 4 ({task})"},),
        max_tokens=64,
        stream=False,
        metadata={REQUEST_TASK: task, REQUEST_CALL: str(call)},
    )


def entry_for(client: Any, custom_id: str, request: ModelRequest) -> batch.BatchEntry:
    return batch.BatchEntry(custom_id, client.build_body(request), client.request_headers(request))


def live_json(client: Any, request: ModelRequest) -> Any:
    """The live unstreamed reply to ``request``, as its JSON."""
    body = client.build_body(request)
    response = client.http.post(client.endpoint, json=body, headers=client.request_headers(request))
    assert response.status_code == 200, response.text
    return response.json()


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_batched_replies_equal_the_live_ones(server, protocol):
    client = client_for(server, protocol)
    requests = {"a": ask("plain", 1), "b": ask("rich"), "c": ask("tools")}
    entries = [entry_for(client, cid, request) for cid, request in requests.items()]
    ids = batch.submit(client, entries)
    assert len(ids) == 1
    outcomes = batch_results.wait(client, ids, poll_s=0, expected=requests)
    assert {o.custom_id for o in outcomes} == set(requests)
    assert server.stats["batches"] == 1
    assert server.stats["batch_entries"] == 3
    assert server.stats["requests"] == 0  # batch entries are not live requests
    for outcome in outcomes:
        assert outcome.failure is None
        assert outcome.recorded is not None
        assert (outcome.recorded.status, outcome.recorded.content_type) == (200, "application/json")
        batched = json.loads(outcome.recorded.body)
        live = live_json(client, requests[outcome.custom_id])
        assert without_ids(batched) == without_ids(live)
    assert server.stats["requests"] == 3
    text = json.dumps([json.loads(o.recorded.body) for o in outcomes if o.recorded])
    assert "eight" in text and "the answer is 7" in text and '"add"' in text
    logged = [e for e in server.requests if "batch" in e]
    assert {(e["custom_id"], e["key"], e["turn"]) for e in logged} == {
        ("a", "plain", 1),
        ("b", "rich", 0),
        ("c", "tools", 0),
    }
    assert all(e["batch"] == ids[0] for e in logged)


@pytest.mark.parametrize("protocol", ["scripted", "anthropic"])
def test_entries_are_split_by_the_limits(server, protocol):
    client = client_for(server, protocol)
    entries = [entry_for(client, f"e{i}", ask("plain")) for i in range(5)]
    ids = batch.submit(client, entries, limits=batch.Limits(requests=2, bytes=10**6))
    assert len(ids) == 3 and server.stats["batches"] == 3
    sizes = [len(json.dumps(batch._entry_json(e, "openai", "/v1/x", True))) + 1 for e in entries]
    by_bytes = batch.submit(
        client,
        [batch.BatchEntry(f"b{i}", e.body, e.headers) for i, e in enumerate(entries)],
        limits=batch.Limits(requests=100, bytes=2 * max(sizes) + 60),
    )
    assert len(by_bytes) == 3
    outcomes = batch_results.wait(client, ids + by_bytes, poll_s=0)
    assert sorted(o.custom_id for o in outcomes) == sorted(
        [f"e{i}" for i in range(5)] + [f"b{i}" for i in range(5)]
    )
    assert all(o.recorded is not None for o in outcomes)


def test_an_entry_larger_than_a_batch_is_refused(server):
    client = client_for(server, "scripted")
    with pytest.raises(batch.BatchError, match="larger than a whole batch"):
        batch.submit(client, [entry_for(client, "x", ask("plain"))], limits=batch.Limits(10, 50))
    assert server.stats["batches"] == 0


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_errored_and_expired_entries_are_answered_live_afterwards(server, protocol):
    client = client_for(server, protocol)
    entries = [entry_for(client, "f", ask("flaky")), entry_for(client, "l", ask("late"))]
    outcomes = {
        o.custom_id: o for o in batch_results.wait(client, batch.submit(client, entries), poll_s=0)
    }
    assert outcomes["f"].recorded is None
    assert outcomes["f"].failure is not None
    assert outcomes["f"].failure.startswith("errored: ")
    assert "boom" in outcomes["f"].failure
    assert outcomes["l"] == batch_results.BatchOutcome("l", failure="expired")
    assert server.stats["batch_entries"] == 1  # the expired one was never answered
    # live, the same turns answer: the error was spent in the batch, the expiry is batch-only
    assert client.generate(ask("flaky")).text == "recovered"
    assert client.generate(ask("late")).text == "live after all"


@pytest.mark.parametrize("protocol", ["scripted", "anthropic"])
def test_a_cancelled_batch_answers_nothing(protocol):
    with ScriptedServer(SCRIPTS, batch_polls=5) as server:
        client = client_for(server, protocol)
        ids = batch.submit(client, [entry_for(client, "a", ask("plain"))])
        batch_results.cancel(client, ids[0])
        state = batch_results.status(client, ids[0])
        assert state.ended
        assert state.status == ("cancelled" if protocol == "scripted" else "ended")
        assert batch_results.results(client, ids[0]) == [
            batch_results.BatchOutcome("a", failure="canceled")
        ]
        assert server.stats["batch_entries"] == 0


def test_results_of_a_batch_still_running_is_a_clear_error():
    with ScriptedServer(SCRIPTS, batch_polls=5) as server:
        client = client_for(server, "anthropic")
        ids = batch.submit(client, [entry_for(client, "a", ask("plain"))])
        with pytest.raises(batch.BatchError, match=f"batch {ids[0]} has not ended"):
            batch_results.results(client, ids[0])


def test_wait_polls_until_the_batches_end():
    with ScriptedServer(SCRIPTS, batch_polls=3) as server:
        client = client_for(server, "scripted")
        ids = batch.submit(client, [entry_for(client, "a", ask("plain"))])
        rounds: list[list[str]] = []
        sleeps: list[float] = []
        outcomes = batch_results.wait(
            client,
            ids,
            poll_s=7.5,
            on_progress=lambda states: rounds.append([s.status for s in states]),
            sleep=sleeps.append,
        )
        assert rounds == [["in_progress"], ["in_progress"], ["completed"]]
        assert sleeps == [7.5, 7.5]
        assert [o.custom_id for o in outcomes] == ["a"] and outcomes[0].recorded is not None


def test_wait_past_its_timeout_cancels_what_still_runs():
    with ScriptedServer(SCRIPTS, batch_polls=1000) as server:
        client = client_for(server, "anthropic")
        ids = batch.submit(client, [entry_for(client, "a", ask("plain"))])
        outcomes = batch_results.wait(client, ids, poll_s=0, timeout_s=0, expected=["a", "zz"])
        assert {o.custom_id: o.failure for o in outcomes} == {
            "a": "timed out: the batch did not end within 0 s (canceled)",
            "zz": "timed out: the batch did not end within 0 s (canceled)",
        }
        assert batch_results.status(client, ids[0]).counts["canceled"] == 1
        assert server.stats["batch_entries"] == 0


def _upload(client: Any, lines: list[bytes]) -> str:
    root = client.base_url
    response = httpx.post(
        f"{root}/files",
        files={"file": ("in.jsonl", b"\n".join(lines), "application/jsonl")},
        data={"purpose": "batch"},
        trust_env=False,
    )
    assert response.status_code == 200, response.text
    created = client.http.post(
        f"{root}/batches",
        json={
            "input_file_id": response.json()["id"],
            "endpoint": "/v1/chat/completions",
            "completion_window": "24h",
        },
    )
    assert created.status_code == 200, created.text
    batch_id: str = created.json()["id"]
    return batch_id


def test_a_batch_failing_validation_names_its_lines(server):
    client = client_for(server, "scripted")
    good = batch._entry_json(entry_for(client, "ok", ask("plain")), "openai", "", True)
    good["url"] = "/v1/chat/completions"
    wrong_url = {**good, "custom_id": "w", "url": "/v1/responses"}
    lines = [json.dumps(good).encode(), b"{not json", json.dumps(good).encode()]
    lines.append(json.dumps(wrong_url).encode())
    batch_id = _upload(client, lines)
    state = batch_results.status(client, batch_id)
    assert (state.status, state.ended) == ("failed", True)
    assert server.stats["batch_entries"] == 0
    outcomes = batch_results.results(client, batch_id)
    assert sorted(o.custom_id for o in outcomes) == ["ok", "w"]  # (line 3 repeats "ok")
    failure = next(o.failure for o in outcomes if o.custom_id == "ok")
    assert failure is not None
    assert failure.startswith("errored: the batch failed: line 2: ")
    assert "line 3: " in failure and "line 4: " in failure


def test_only_the_scripted_provider_hears_the_entry_headers(server):
    """An ``openai/…`` client (any provider but the scripted one) sends no
    ``agentbench_headers``: its entries are answered as requests without headers."""
    hosted = OpenAIChatClient(ModelSpec("openai", "plain"), server.url, KEY, trust_env=False)
    request = ask("rich")
    entry = batch.BatchEntry("h", hosted.build_body(request), {"x-agentbench-script": "rich"})
    outcomes = batch_results.wait(hosted, batch.submit(hosted, [entry]), poll_s=0)
    assert outcomes[0].recorded is not None
    assert "seven" in outcomes[0].recorded.body.decode()  # the model's script, not "rich"
    assert [e["headers"] for e in server.requests if "batch" in e] == [{}]


def test_batch_support_says_which_clients_have_a_batch_api(server):
    compat = OpenAIChatClient(ModelSpec("openai-compat", "q"), server.url, trust_env=False)
    hosted = OpenAIChatClient(ModelSpec("openai", "m"), server.url, KEY, trust_env=False)
    claude = AnthropicClient(ModelSpec("anthropic", "m"), server.url, KEY, trust_env=False)
    scripted = client_for(server, "scripted")
    assert batch.batch_support(hosted) is None
    assert batch.batch_support(claude) is None
    assert batch.batch_support(scripted) is None
    reason = batch.batch_support(compat)
    assert reason is not None and "OpenAI-compatible server" in reason
    wrapped = batch.batch_support(RetryingClient(scripted))
    assert wrapped is not None and "pass the bare client" in wrapped
    with pytest.raises(batch.BatchError, match="no batch API"):
        batch.submit(compat, [entry_for(scripted, "a", ask("plain"))])


def test_provider_errors_name_the_url_and_message_never_the_key(server):
    hosted = OpenAIChatClient(ModelSpec("openai", "m"), server.url, KEY, trust_env=False)
    with pytest.raises(ProviderError) as caught:
        batch_results.status(hosted, "batch_nope")
    message = str(caught.value)
    assert "HTTP 404" in message and "/v1/batches/batch_nope" in message
    assert "No batch found with id 'batch_nope'" in message
    assert KEY not in message and KEY not in repr(caught.value.__dict__)
    claude = AnthropicClient(ModelSpec("anthropic", "m"), server.url, KEY, trust_env=False)
    with pytest.raises(ModelError, match="not found") as caught_anthropic:
        batch_results.cancel(claude, "msgbatch_nope")
    assert KEY not in str(caught_anthropic.value)


def test_an_unreachable_provider_is_a_transport_error(monkeypatch):
    monkeypatch.setattr(batch, "RETRY_WAIT_S", (0.0, 0.0))
    with ScriptedServer() as server:
        url = server.url
    client = OpenAIChatClient(ModelSpec("openai", "m"), url, KEY, trust_env=False)
    with pytest.raises(ModelError, match=r"batch API: GET .* failed") as caught:
        batch_results.status(client, "b")
    assert KEY not in str(caught.value)


def test_httpx_multipart_upload_reaches_the_scripted_files_api(server):
    """(the scripted Files API reads a multipart body httpx wrote, not only our own)"""
    client = client_for(server, "scripted")
    response = httpx.post(
        f"{client.base_url}/files",
        files={"file": ("x.jsonl", b"{}\n", "application/jsonl")},
        data={"purpose": "batch"},
        trust_env=False,
    )
    assert response.status_code == 200, response.text
    file_id = response.json()["id"]
    content = httpx.get(f"{server.url}/files/{file_id}/content")
    assert content.content == b"{}\n"


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_batched_reply_replays_through_the_client_as_the_live_one_would(
    server, protocol, tmp_path
):
    """What the run side does with an outcome: record it in the response cache under the
    request's key; the client then answers the request from it, sending nothing."""
    client = client_for(server, protocol)
    request = ask("rich")
    entry = entry_for(client, "r", request)
    (outcome,) = batch_results.wait(client, batch.submit(client, [entry]), poll_s=0)
    assert outcome.recorded is not None
    cache = ResponseCache(tmp_path, "write")
    key = client._cache_key(request, client.build_body(request), client.request_headers(request))
    cache.write(key, outcome.recorded, model="scripted", endpoint=client.public_endpoint)
    cache.mode = "read"
    client.cache = cache
    generation = client.generate(request)
    assert server.stats["requests"] == 0  # answered from the batch's reply
    assert (generation.text, generation.thinking) == ("the answer is 7", "3 and 4")
    assert (generation.usage.input, generation.usage.output) == (12, 5)
    client.cache = None
    live = client.generate(request)
    assert server.stats["requests"] == 1
    assert (live.text, live.thinking, live.usage) == (
        generation.text,
        generation.thinking,
        generation.usage,
    )


def test_wait_reports_every_batch_each_round():
    with ScriptedServer(SCRIPTS, batch_polls=2) as server:
        client = client_for(server, "scripted")
        entries = [entry_for(client, f"e{i}", ask("plain")) for i in range(2)]
        ids = batch.submit(client, entries, limits=batch.Limits(1, 10**6))
        batch_results.status(client, ids[0])  # the first batch is one read ahead
        rounds: list[list[tuple[str, str]]] = []
        batch_results.wait(
            client,
            ids,
            poll_s=0,
            on_progress=lambda states: rounds.append([(s.batch_id, s.status) for s in states]),
        )
        assert rounds == [
            [(ids[0], "completed"), (ids[1], "in_progress")],
            [(ids[0], "completed"), (ids[1], "completed")],
        ]


def test_wait_rides_out_a_provider_that_is_away_for_a_while(monkeypatch):
    """The server stops between two polls and comes back on the same port: the rounds in
    between fail, and the wait goes on; a provider away for good ends it."""
    monkeypatch.setattr(batch, "RETRY_WAIT_S", (0.0, 0.0))
    server = ScriptedServer(SCRIPTS, batch_polls=2)
    server.start()
    try:
        server.port = int(server.url.rsplit(":", 1)[1].split("/")[0])
        client = client_for(server, "anthropic")
        ids = batch.submit(client, [entry_for(client, "a", ask("plain"))])
        naps: list[int] = []

        def nap(seconds: float) -> None:
            naps.append(1)
            if len(naps) == 1:
                server.stop()
            elif len(naps) == 3:
                server.start()

        rounds: list[list[str]] = []
        outcomes = batch_results.wait(
            client,
            ids,
            poll_s=0,
            sleep=nap,
            on_progress=lambda states: rounds.append([s.status for s in states]),
        )
        assert [o.custom_id for o in outcomes if o.recorded is not None] == ["a"]
        # round 1 read it, rounds 2 and 3 failed (the last state is shown again), round 4 ended it
        assert rounds == [["in_progress"]] * 3 + [["ended"]]
        server.stop()
        with pytest.raises(ModelError, match="batch API: GET"):
            batch_results.wait(client, ids, poll_s=0, sleep=lambda s: None)
    finally:
        server.stop()


def test_metadata_reaches_an_openai_batch_and_the_endpoint_follows_the_protocol(server):
    for protocol, endpoint in [
        ("scripted", "/v1/chat/completions"),
        ("openai-responses", "/v1/responses"),
    ]:
        client = client_for(server, protocol)
        (batch_id,) = batch.submit(
            client, [entry_for(client, "a", ask("plain"))], metadata={"run": "r-17"}
        )
        made = httpx.get(f"{server.url}/batches/{batch_id}", trust_env=False).json()
        assert (made["metadata"], made["endpoint"]) == ({"run": "r-17"}, endpoint)
