"""Which wire protocol a built-in client speaks, and the same model's client for another
protocol where the provider serves it: the gateway relays an agent's request over the
protocol the agent speaks (models/http.py ``Relay``), so it needs the task's model on
that protocol.

The scripted provider serves all three protocols; OpenAI serves Chat Completions and
Responses at one base URL with one key; Anthropic serves Messages only. A client built
by a plugin, or a protocol its provider does not serve, has no sibling (None).
"""

from __future__ import annotations

from pytest_agentbench.models.anthropic import AnthropicClient
from pytest_agentbench.models.base import ModelClient, ModelSpec
from pytest_agentbench.models.openai_chat import OpenAIChatClient
from pytest_agentbench.models.openai_responses import OpenAIResponsesClient
from pytest_agentbench.models.scripted import (
    ScriptedAnthropicClient,
    ScriptedClient,
    ScriptedResponsesClient,
    scripted_client,
)

#: The protocols, by the endpoint path below ``/v1`` an agent calls.
PROTOCOL_PATHS = {
    "/chat/completions": "chat",
    "/responses": "responses",
    "/messages": "messages",
}
#: Their names for people.
PROTOCOL_NAMES = {
    "chat": "OpenAI Chat Completions",
    "responses": "OpenAI Responses",
    "messages": "Anthropic Messages",
}
_SCRIPTED_MODELS = {"chat": "scripted", "responses": "openai-responses", "messages": "anthropic"}
#: Headers every client sets itself: not copied to a sibling.
_OWN_HEADERS = ("user-agent", "content-type")


def protocol_of(client: ModelClient) -> str | None:
    """``chat``, ``responses`` or ``messages`` for a built-in protocol client (not a
    wrapper: unwrap it first); None for anything else."""
    if isinstance(client, OpenAIChatClient):
        return "chat"
    if isinstance(client, OpenAIResponsesClient):
        return "responses"
    if isinstance(client, AnthropicClient):
        return "messages"
    return None


def sibling(
    client: ModelClient, protocol: str
) -> OpenAIChatClient | OpenAIResponsesClient | AnthropicClient | None:
    """``client``'s model over ``protocol``: the client itself when it speaks it, a new
    client with the same base URL, key and proxy settings when its provider serves that
    protocol too, else None."""
    if isinstance(client, ScriptedClient | ScriptedResponsesClient | ScriptedAnthropicClient):
        if protocol_of(client) == protocol:
            return client
        if protocol not in _SCRIPTED_MODELS:
            return None
        made = scripted_client(ModelSpec("scripted", _SCRIPTED_MODELS[protocol]), client.base_url)
        assert isinstance(made, ScriptedClient | ScriptedResponsesClient | ScriptedAnthropicClient)
        made.digests = client.digests  # the scripts registered through ``client``
        return made
    if isinstance(client, OpenAIChatClient | OpenAIResponsesClient | AnthropicClient):
        own = protocol_of(client)
        if own == protocol:
            return client
        if own == "messages" or protocol not in ("chat", "responses"):
            return None
        headers = {k: v for k, v in client._headers.items() if k not in _OWN_HEADERS}
        if protocol == "responses":
            spec = ModelSpec("openai-responses", client.spec.model)
            return OpenAIResponsesClient(
                spec, client.base_url, None, extra_headers=headers, trust_env=client._trust_env
            )
        spec = ModelSpec("openai", client.spec.model)
        return OpenAIChatClient(
            spec, client.base_url, None, extra_headers=headers, trust_env=client._trust_env
        )
    return None
