"""The model is part of the response cache's key: two models served at one endpoint never
share a cached reply (docs/cost.md). Two openai-compat clients of different models, one
cache folder, one independent standard-library server (tests/upstream_support.py) whose
request log counts what was really sent."""

from __future__ import annotations

from pathlib import Path

from upstream_support import upstream_server

from pytest_agentbench.models.base import ModelRequest, ModelSpec
from pytest_agentbench.models.openai_chat import OpenAIChatClient
from pytest_agentbench.models.response_cache import ResponseCache


def test_two_models_at_one_endpoint_do_not_share_cached_replies(tmp_path: Path) -> None:
    request = ModelRequest(messages=({"role": "user", "content": "same question"},))
    cache = ResponseCache(tmp_path / "cache")
    with upstream_server() as upstream:
        clients = []
        for name in ("model-a", "model-b"):
            client = OpenAIChatClient(
                ModelSpec("openai-compat", name), f"{upstream.url}/v1", "k", trust_env=False
            )
            client.cache = cache
            clients.append(client)
        try:
            for client in clients:  # each model's first call is sent
                client.generate(request)
            sent = [r["body"]["model"] for r in upstream.requests]
            assert sent == ["model-a", "model-b"], sent
            for client in clients:  # and each one's repeat is its own replay
                assert client.replays(request)
                client.generate(request)
            assert len(upstream.requests) == 2
        finally:
            for client in clients:
                client.close()
    assert len(list((tmp_path / "cache").rglob("*.json"))) == 2
