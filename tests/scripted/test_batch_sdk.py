"""The official OpenAI and Anthropic SDKs run their whole batch flow against the scripted
provider (files, batches, message batches), as they ship: what they parse must be what
the real APIs send, and each batched answer must be the live unstreamed one."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anthropic
import openai
import pytest
from sdk_support import anthropic_sdk, openai_sdk, without_ids

from pytest_agentbench.scripted import ScriptedServer

SCRIPTS: dict[str, list[Any]] = {
    "greet": ["hello", {"text": "hello again", "thinking": "twice"}],
    "tools": [{"tool_calls": [{"name": "add", "arguments": {"a": 1, "b": 2}}]}],
    "fails": [{"error": {"status": 400, "message": "scripted refusal"}}],
    "late": [{"text": "only live", "batch_expired": True}],
}
CHAT = {"model": "greet", "messages": [{"role": "user", "content": "hi there"}]}
RESPONSES = {"model": "greet", "input": "hi there"}
MESSAGES = {"model": "greet", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]}


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer(SCRIPTS, batch_polls=2) as running:
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


def headers(script: str, turn: int) -> dict[str, str]:
    return {"x-agentbench-script": script, "x-agentbench-turn": str(turn)}


def line(custom_id: str, url: str, body: dict[str, Any], script: str, turn: int) -> bytes:
    entry = {"custom_id": custom_id, "method": "POST", "url": url, "body": body}
    entry["agentbench_headers"] = headers(script, turn)
    return json.dumps(entry).encode()


def run_openai_batch(oai: openai.OpenAI, lines: list[bytes], endpoint: Any) -> Any:
    uploaded = oai.files.create(file=("in.jsonl", b"\n".join(lines) + b"\n"), purpose="batch")
    assert (uploaded.purpose, uploaded.bytes) == ("batch", sum(len(x) + 1 for x in lines))
    assert oai.files.retrieve(uploaded.id).filename == "in.jsonl"
    created = oai.batches.create(
        input_file_id=uploaded.id,
        endpoint=endpoint,
        completion_window="24h",
        metadata={"run": "t1"},
    )
    assert created.status == "validating"
    assert created.metadata == {"run": "t1"}
    assert oai.batches.retrieve(created.id).status == "in_progress"
    return oai.batches.retrieve(created.id)  # batch_polls=2: the 2nd read ends it


def read_lines(oai: openai.OpenAI, file_id: str | None) -> dict[str, Any]:
    assert file_id is not None
    text = oai.files.content(file_id).text
    return {row["custom_id"]: row for row in map(json.loads, text.splitlines())}


@pytest.mark.parametrize(
    ("endpoint", "body"),
    [("/v1/chat/completions", CHAT), ("/v1/responses", RESPONSES)],
)
def test_openai_sdk_runs_a_batch_whose_answers_equal_the_live_ones(server, oai, endpoint, body):
    tools_body = body  # one model per batch: the header names the script
    lines = [
        line("first", endpoint, body, "greet", 0),
        line("second", endpoint, body, "greet", 1),
        line("tool", endpoint, tools_body, "tools", 0),
        line("refused", endpoint, body, "fails", 0),
        line("expired", endpoint, body, "late", 0),
    ]
    done = run_openai_batch(oai, lines, endpoint)
    assert done.request_counts is not None
    assert (done.request_counts.total, done.request_counts.completed) == (5, 3)
    assert done.request_counts.failed == 2
    assert done.status == "expired"  # an entry expired: the batch hit its window
    assert done.model == "greet"
    output = read_lines(oai, done.output_file_id)
    errors = read_lines(oai, done.error_file_id)
    assert set(output) == {"first", "second", "tool"} and set(errors) == {"refused", "expired"}
    assert errors["refused"]["response"]["status_code"] == 400
    assert errors["refused"]["response"]["body"]["error"]["message"] == "scripted refusal"
    assert errors["expired"]["response"] is None
    assert errors["expired"]["error"]["code"] == "batch_expired"
    assert server.stats == {**server.stats, "requests": 0, "batches": 1, "batch_entries": 4}
    path = endpoint.removeprefix("/v1")
    for custom_id, (script, turn, sent) in {
        "first": ("greet", 0, body),
        "second": ("greet", 1, body),
        "tool": ("tools", 0, tools_body),
    }.items():
        row = output[custom_id]
        assert row["response"]["status_code"] == 200 and row["error"] is None
        live = oai.post(path, body=sent, cast_to=object, options={"headers": headers(script, turn)})
        assert without_ids(row["response"]["body"]) == without_ids(live)
    assert "hello again" in json.dumps(output["second"]) and "twice" in json.dumps(output)
    # the expired turn was not used up: sent live it answers
    live = oai.post(path, body=body, cast_to=object, options={"headers": headers("late", 0)})
    assert "only live" in json.dumps(live)


def test_anthropic_sdk_runs_a_message_batch_whose_answers_equal_the_live_ones(server, claude):
    tools = {**MESSAGES, "model": "tools"}
    requests: list[Any] = [
        {"custom_id": "first", "params": MESSAGES, "agentbench_headers": headers("greet", 0)},
        {"custom_id": "second", "params": MESSAGES, "agentbench_headers": headers("greet", 1)},
        {"custom_id": "tool", "params": tools, "agentbench_headers": headers("tools", 0)},
        {"custom_id": "refused", "params": MESSAGES, "agentbench_headers": headers("fails", 0)},
        {"custom_id": "expired", "params": MESSAGES, "agentbench_headers": headers("late", 0)},
    ]
    created = claude.messages.batches.create(requests=requests)
    assert created.processing_status == "in_progress"
    assert created.request_counts.processing == 5 and created.results_url is None
    assert claude.messages.batches.retrieve(created.id).processing_status == "in_progress"
    ended = claude.messages.batches.retrieve(created.id)
    assert ended.processing_status == "ended" and ended.ended_at is not None
    counts = ended.request_counts
    assert (counts.processing, counts.succeeded, counts.errored, counts.expired) == (0, 3, 1, 1)
    assert ended.results_url == f"{server.url}/messages/batches/{created.id}/results"
    results = {r.custom_id: r.result for r in claude.messages.batches.results(created.id)}
    assert results["refused"].type == "errored"
    assert results["refused"].error.error.message == "scripted refusal"  # type: ignore[union-attr]
    assert results["expired"].type == "expired"
    for custom_id, (script, turn, sent) in {
        "first": ("greet", 0, MESSAGES),
        "second": ("greet", 1, MESSAGES),
        "tool": ("tools", 0, tools),
    }.items():
        result = results[custom_id]
        assert result.type == "succeeded"
        live = claude.messages.create(**sent, extra_headers=headers(script, turn))
        assert without_ids(result.message.model_dump()) == without_ids(live.model_dump())
    assert server.stats["requests"] == 3 and server.stats["batch_entries"] == 4
    listed = claude.messages.batches.list()
    assert [b.id for b in listed.data] == [created.id]


def test_a_bad_input_file_fails_the_batch_naming_each_line(server, oai):
    good = line("a", "/v1/chat/completions", CHAT, "greet", 0)
    other_model = line("m", "/v1/chat/completions", {**CHAT, "model": "tools"}, "greet", 0)
    lines = [
        good,
        b"{not json",
        good,  # a repeated custom_id
        line("u", "/v1/responses", RESPONSES, "greet", 0),  # not the batch's endpoint
        b'{"custom_id": "g", "method": "GET", "url": "/v1/chat/completions", "body": {}}',
        other_model,
    ]
    uploaded = oai.files.create(file=("bad.jsonl", b"\n".join(lines)), purpose="batch")
    created = oai.batches.create(
        input_file_id=uploaded.id, endpoint="/v1/chat/completions", completion_window="24h"
    )
    failed = oai.batches.retrieve(created.id)
    assert failed.status == "failed" and failed.failed_at is not None
    assert failed.errors is not None and failed.errors.data is not None
    found = [(e.line, e.code, e.param) for e in failed.errors.data]
    assert found == [
        (2, "invalid_json_line", None),
        (3, "duplicate_custom_id", "custom_id"),
        (4, "mismatched_endpoint", "url"),
        (5, "invalid_method", "method"),
        (6, "mismatched_model", "body.model"),
    ]
    assert failed.output_file_id is None and failed.error_file_id is None
    assert server.stats["batch_entries"] == 0


def test_openai_sdk_requests_the_api_refuses(server, oai):
    with pytest.raises(openai.NotFoundError, match="No such File object: file-nope"):
        oai.batches.create(
            input_file_id="file-nope", endpoint="/v1/chat/completions", completion_window="24h"
        )
    uploaded = oai.files.create(file=("x.jsonl", b"{}\n"), purpose="batch")
    with pytest.raises(openai.BadRequestError, match="endpoint"):
        oai.batches.create(
            input_file_id=uploaded.id, endpoint="/v1/embeddings", completion_window="24h"
        )
    with pytest.raises(openai.BadRequestError, match="purpose"):
        oai.files.create(file=("x.jsonl", b"{}\n"), purpose="fine-tune")
    with pytest.raises(openai.NotFoundError):
        oai.batches.retrieve("batch_nope")
    assert server.stats["batches"] == 0


def test_both_sdks_cancel_a_batch_before_it_ends(server, oai, claude):
    uploaded = oai.files.create(
        file=("c.jsonl", line("a", "/v1/chat/completions", CHAT, "greet", 0)), purpose="batch"
    )
    made = oai.batches.create(
        input_file_id=uploaded.id, endpoint="/v1/chat/completions", completion_window="24h"
    )
    assert oai.batches.cancel(made.id).status == "cancelling"
    cancelled = oai.batches.retrieve(made.id)
    assert cancelled.status == "cancelled" and cancelled.cancelled_at is not None
    assert cancelled.output_file_id is None
    with pytest.raises(openai.ConflictError, match="Cannot cancel a batch with status"):
        oai.batches.cancel(made.id)
    assert [b.id for b in oai.batches.list()] == [made.id]

    request: Any = {"custom_id": "a", "params": MESSAGES}
    batch = claude.messages.batches.create(requests=[request])
    assert claude.messages.batches.cancel(batch.id).processing_status == "canceling"
    ended = claude.messages.batches.retrieve(batch.id)
    assert ended.processing_status == "ended" and ended.request_counts.canceled == 1
    assert [r.result.type for r in claude.messages.batches.results(batch.id)] == ["canceled"]
    assert server.stats["batch_entries"] == 0


@pytest.mark.parametrize(
    ("custom_id", "problem"),
    [("has space", "should match pattern"), ("x" * 65, "should match pattern")],
)
def test_anthropic_refuses_a_bad_custom_id(server, claude, custom_id, problem):
    request: Any = {"custom_id": custom_id, "params": MESSAGES}
    with pytest.raises(anthropic.BadRequestError, match=problem):
        claude.messages.batches.create(requests=[request])
    request = {"custom_id": "same", "params": MESSAGES}
    with pytest.raises(anthropic.BadRequestError, match="duplicate custom_id"):
        claude.messages.batches.create(requests=[request, request])
    assert server.stats["batches"] == 0
