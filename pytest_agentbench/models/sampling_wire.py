"""Where each sampling setting goes in each wire protocol's request body, and which
settings a protocol has no field for (refused before anything is sent).

The protocols: ``chat`` (Chat Completions: openai, openai-compat, scripted), ``responses``
(openai-responses, scripted/openai-responses) and ``anthropic`` (Messages).
"""

from __future__ import annotations

from collections.abc import Mapping

from pytest_agentbench.core.jsontypes import JsonObject
from pytest_agentbench.core.sampling import Sampling
from pytest_agentbench.core.stream import WireProtocol
from pytest_agentbench.models.base import ModelSpec

PROTOCOL_NAMES: dict[WireProtocol, str] = {
    "chat": "Chat Completions",
    "responses": "the Responses API",
    "anthropic": "the Anthropic Messages API",
}

#: Why a protocol refuses a setting (no field for it), by protocol and setting.
_NO_FIELD: dict[WireProtocol, dict[str, str]] = {
    "chat": {
        "top_k": "Chat Completions has no top_k field (a server that reads one, like vLLM "
        "or llama.cpp, takes it in extra_body)",
        "thinking_budget": "Chat Completions has no thinking budget; use reasoning_effort",
    },
    "responses": {
        "top_k": "the Responses API has no top_k field",
        "seed": "the Responses API has no seed field",
        "stop": "the Responses API has no stop field",
        "thinking_budget": "the Responses API has no thinking budget; use reasoning_effort",
    },
    "anthropic": {
        "seed": "the Anthropic Messages API has no seed field",
        "reasoning_effort": "the Anthropic Messages API takes a thinking budget instead; "
        "use thinking_budget",
    },
}

#: The smallest thinking budget the Anthropic API accepts.
ANTHROPIC_MIN_BUDGET = 1024


def protocol_of(spec: ModelSpec) -> WireProtocol:
    """The wire protocol a model spec speaks."""
    name = spec.model if spec.provider == "scripted" else spec.provider
    if name == "openai-responses":
        return "responses"
    if name == "anthropic":
        return "anthropic"
    return "chat"


def sampling_refusals(
    protocol: WireProtocol, values: Mapping[str, object]
) -> list[tuple[str, str]]:
    """``(setting, reason)`` for each set value (``Sampling.public()`` form) that
    ``protocol`` cannot carry or takes in a narrower range."""
    refusals = [
        (key, reason) for key, reason in _NO_FIELD[protocol].items() if values.get(key) is not None
    ]
    if protocol == "anthropic":
        temperature = values.get("temperature")
        if isinstance(temperature, int | float) and temperature > 1:
            refusals.append(
                ("temperature", f"the Anthropic Messages API takes 0 to 1, got {temperature!r}")
            )
        budget = values.get("thinking_budget")
        if isinstance(budget, int) and budget < ANTHROPIC_MIN_BUDGET:
            refusals.append(
                (
                    "thinking_budget",
                    f"the Anthropic Messages API takes at least {ANTHROPIC_MIN_BUDGET}, "
                    f"got {budget!r}",
                )
            )
    return refusals


def apply_sampling(protocol: WireProtocol, body: JsonObject, sampling: Sampling) -> JsonObject:
    """Put each set setting in ``body`` under ``protocol``'s field, then merge
    ``extra_body`` last (it may override a sampling field, never the harness's own keys:
    those are refused when the settings are read). Returns ``body``."""
    if sampling.temperature is not None:
        body["temperature"] = sampling.temperature
    if sampling.top_p is not None:
        body["top_p"] = sampling.top_p
    if protocol == "chat":
        if sampling.seed is not None:
            body["seed"] = sampling.seed
        if sampling.stop is not None:
            body["stop"] = list(sampling.stop)
        if sampling.reasoning_effort is not None:
            body["reasoning_effort"] = sampling.reasoning_effort
    elif protocol == "responses":
        if sampling.reasoning_effort is not None:
            body["reasoning"] = {"effort": sampling.reasoning_effort}
    else:
        if sampling.top_k is not None:
            body["top_k"] = sampling.top_k
        if sampling.stop is not None:
            body["stop_sequences"] = list(sampling.stop)
        if sampling.thinking_budget is not None:
            body["thinking"] = {"type": "enabled", "budget_tokens": sampling.thinking_budget}
    body.update(sampling.extra)
    return body
