"""The three wire protocols' clients, side by side, for tests of behaviour they share.

Each ``Protocol`` builds its client against the scripted server (the model name carries
the script key, no script header is sent) and knows the endpoint path the client posts to.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pytest_agentbench.models.anthropic import AnthropicClient
from pytest_agentbench.models.base import (
    Generation,
    ModelClient,
    ModelRequest,
    ModelSpec,
    StreamEvent,
)
from pytest_agentbench.models.openai_chat import OpenAIChatClient
from pytest_agentbench.models.openai_responses import OpenAIResponsesClient
from pytest_agentbench.scripted import ScriptedServer

KEY = "sk-test-protocols-do-not-leak-4321"


@dataclass(frozen=True)
class Protocol:
    provider: str  # the ModelSpec provider, the prefix of every error message
    client_class: Callable[..., ModelClient]
    path: str  # the endpoint below the base URL
    key_header: str  # the header that carries the API key

    def client(self, base_url: str, key: str, api_key: str | None = KEY, **kwargs: Any) -> Any:
        spec = ModelSpec(self.provider, key)
        return self.client_class(spec, base_url, api_key, trust_env=False, **kwargs)

    def endpoint(self, server: ScriptedServer) -> str:
        return f"{server.url}{self.path}"


PROTOCOLS = {
    "chat": Protocol("openai", OpenAIChatClient, "/chat/completions", "authorization"),
    "responses": Protocol("openai-responses", OpenAIResponsesClient, "/responses", "authorization"),
    "anthropic": Protocol("anthropic", AnthropicClient, "/messages", "x-api-key"),
}


def ask(*, stream: bool = True, timeout_s: float | None = 10, **kwargs: Any) -> ModelRequest:
    return ModelRequest(
        messages=({"role": "user", "content": "what now"},),
        stream=stream,
        timeout_s=timeout_s,
        **kwargs,
    )


def generate(
    protocol: Protocol, server: ScriptedServer, key: str, **kwargs: Any
) -> tuple[Generation, list[StreamEvent]]:
    """One generation by a fresh client (closed after), with the events it streamed."""
    events: list[StreamEvent] = []
    client = protocol.client(server.url, key)
    try:
        return client.generate(ask(**kwargs), events.append), events
    finally:
        client.close()
