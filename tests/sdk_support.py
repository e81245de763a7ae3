"""What the tests of the official SDKs against the scripted provider share: the SDK
clients pointed at a running server, and a reply's JSON without what differs on every
answer (ids, timestamps), to compare a batched answer with the live one."""

from __future__ import annotations

from typing import Any

import anthropic
import openai

from pytest_agentbench.scripted import ScriptedServer

KEY = "sk-test-not-a-real-key"
#: What differs between any two answers to the same request.
_VARYING = ("id", "created", "created_at", "completed_at")


def openai_sdk(server: ScriptedServer) -> openai.OpenAI:
    """The OpenAI SDK as it ships (its own retries), ignoring proxy settings."""
    return openai.OpenAI(
        base_url=server.url, api_key=KEY, http_client=openai.DefaultHttpxClient(trust_env=False)
    )


def anthropic_sdk(server: ScriptedServer) -> anthropic.Anthropic:
    """The Anthropic SDK as it ships, its base URL without ``/v1``."""
    return anthropic.Anthropic(
        base_url=server.url.removesuffix("/v1"),
        api_key=KEY,
        http_client=anthropic.DefaultHttpxClient(trust_env=False),
    )


def without_ids(value: Any) -> Any:
    """``value`` (a reply's JSON) without its ids and timestamps (``id``, ``created``,
    ``created_at``, ``completed_at``), at any depth."""
    if isinstance(value, dict):
        return {k: without_ids(v) for k, v in value.items() if k not in _VARYING}
    if isinstance(value, list):
        return [without_ids(v) for v in value]
    return value
