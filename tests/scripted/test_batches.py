"""The scripted provider's batch endpoints at the HTTP level: which reply answers an entry
(with and without ``agentbench_headers``), replies that make no sense in a batch, the
pace set by ``batch_polls`` (server option and CLI flag), and the counts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from pytest_agentbench.scripted import ScriptedServer

ROOT = Path(__file__).resolve().parents[2]
MESSAGES = {"model": "count", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]}


@pytest.fixture
def http() -> Iterator[httpx.Client]:
    with httpx.Client(trust_env=False, timeout=30) as client:
        yield client


def results(http: httpx.Client, url: str, batch_id: str) -> dict[str, Any]:
    """An Anthropic batch's results by custom_id, after one status read ended it."""
    ended = http.get(f"{url}/messages/batches/{batch_id}").json()
    assert ended["processing_status"] == "ended"
    text = http.get(ended["results_url"]).text
    return {row["custom_id"]: row["result"] for row in map(json.loads, text.splitlines())}


def create(http: httpx.Client, url: str, requests: list[dict[str, Any]]) -> str:
    response = http.post(f"{url}/messages/batches", json={"requests": requests})
    assert response.status_code == 200, response.text
    batch_id: str = response.json()["id"]
    return batch_id


def text_of(result: dict[str, Any]) -> str:
    assert result["type"] == "succeeded", result
    return "".join(block.get("text", "") for block in result["message"]["content"])


def test_entries_without_headers_are_picked_as_live_requests_without_headers(http):
    """No ``agentbench_headers``: the body's model names the script, and each entry is
    the script's next turn, in input order; as live requests would be."""
    with ScriptedServer({"count": ["one", "two", "three"]}) as server:
        requests = [{"custom_id": f"r{i}", "params": MESSAGES} for i in range(2)]
        found = results(http, server.url, create(http, server.url, requests))
        assert [text_of(found[f"r{i}"]) for i in range(2)] == ["one", "two"]
        live = http.post(f"{server.url}/messages", json=MESSAGES).json()
        assert live["content"][0]["text"] == "three"
        assert [(e.get("custom_id"), e["turn"]) for e in server.requests] == [
            ("r0", 0),
            ("r1", 1),
            (None, 2),
        ]
        assert server.stats["requests"] == 1 and server.stats["batch_entries"] == 2


def test_replies_that_make_no_sense_in_a_batch_are_errored_entries(http):
    scripts = {
        "cut": [{"text": "half of it", "truncate": True}],
        "stuck": [{"text": "never", "hang": True}],
        "slow": [{"text": "in time", "delay_s": 60, "chunk_delay_s": 5}],
    }
    with ScriptedServer(scripts) as server:

        def entry(custom_id: str, script: str, **params: Any) -> dict[str, Any]:
            return {
                "custom_id": custom_id,
                "params": {**MESSAGES, **params},
                "agentbench_headers": {"x-agentbench-script": script},
            }

        found = results(
            http,
            server.url,
            create(
                http,
                server.url,
                [
                    entry("cut", "cut"),
                    entry("stuck", "stuck"),
                    entry("slow", "slow"),
                    entry("streamed", "slow", stream=True),
                    {
                        "custom_id": "badturn",
                        "params": MESSAGES,
                        "agentbench_headers": {"X-Agentbench-Turn": "first"},
                    },
                    {
                        "custom_id": "nobody",
                        "params": MESSAGES,
                        "agentbench_headers": {"x-agentbench-script": "nobody"},
                    },
                ],
            ),
        )
        assert text_of(found["slow"]) == "in time"  # delays do not apply in a batch
        for custom_id, words in {
            "cut": "truncated",
            "stuck": "hung",
            "streamed": "streaming is not supported in a batch",
            "badturn": "x-agentbench-turn must be an integer",
            "nobody": "no script for key 'nobody'",
        }.items():
            assert found[custom_id]["type"] == "errored", custom_id
            assert words in found[custom_id]["error"]["error"]["message"]
        assert found["cut"]["error"]["error"]["type"] == "api_error"


def test_batch_polls_sets_how_many_status_reads_a_batch_takes(http):
    with pytest.raises(ValueError, match="batch_polls must be an integer >= 1"):
        ScriptedServer(batch_polls=0)
    with ScriptedServer({"count": ["x"]}, batch_polls=3) as server:
        batch_id = create(http, server.url, [{"custom_id": "a", "params": MESSAGES}])
        listed = http.get(f"{server.url}/messages/batches").json()
        assert [b["id"] for b in listed["data"]] == [batch_id]  # a list is not a read
        states = [
            http.get(f"{server.url}/messages/batches/{batch_id}").json()["processing_status"]
            for _ in range(4)
        ]
        assert states == ["in_progress", "in_progress", "ended", "ended"]
        assert server.stats["batch_entries"] == 1


def test_the_cli_takes_batch_polls(tmp_path, http):
    script = tmp_path / "replies.toml"
    script.write_text('default = ["from the file"]\n')
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "pytest_agentbench.scripted", "--script", str(script)]
    refused = subprocess.run(
        [*command, "--batch-polls", "0"], capture_output=True, text=True, env=env, timeout=60
    )
    assert refused.returncode == 2
    assert refused.stderr == "error: --batch-polls 0 must be at least 1\n"
    process = subprocess.Popen(
        [*command, "--batch-polls", "2"], stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        assert process.stdout is not None
        url = process.stdout.readline().rsplit(" ", 1)[1].strip()
        batch_id = create(http, url, [{"custom_id": "a", "params": MESSAGES}])
        first = http.get(f"{url}/messages/batches/{batch_id}").json()
        assert first["processing_status"] == "in_progress"
        assert text_of(results(http, url, batch_id)["a"]) == "from the file"
    finally:
        process.terminate()
        process.wait(timeout=10)
        if process.stdout is not None:
            process.stdout.close()


def test_unknown_batch_routes_are_404_in_each_api_s_shape(http):
    with ScriptedServer() as server:
        openai_style = http.get(f"{server.url}/files/file-nope")
        assert openai_style.status_code == 404
        assert openai_style.json()["error"]["message"] == "No such File object: file-nope"
        anthropic_style = http.get(f"{server.url}/messages/batches/msgbatch_nope")
        assert anthropic_style.status_code == 404
        assert anthropic_style.json()["error"]["type"] == "not_found_error"
        upload = http.post(f"{server.url}/files", json={"purpose": "batch"})
        assert upload.status_code == 400
        assert "multipart/form-data" in upload.json()["error"]["message"]
        assert server.stats["requests"] == 0
