"""Usage normalisation with each provider's own arithmetic.

OpenAI (Chat Completions and Responses) reports the whole input and cached tokens as a
subset of it; Anthropic reports the uncached remainder, and the cache reads and writes add
to it. Normalised ``input`` is always the uncached input, so ``input + cache_read +
cache_write`` is the whole prompt for every provider. A field the provider did not report
stays None; a sum with an unknown term is unknown.
"""

from __future__ import annotations

from collections.abc import Mapping

from pytest_agentbench.core.jsontypes import JsonValue
from pytest_agentbench.core.usage import Usage


def count(value: object) -> int | None:
    """An integer token count, or None for anything else (bools, floats, strings)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _detail(native: Mapping[str, JsonValue], group: str, name: str) -> int | None:
    details = native.get(group)
    return count(details.get(name)) if isinstance(details, Mapping) else None


def normalise_chat_usage(native: Mapping[str, JsonValue] | None) -> Usage:
    """Chat Completions usage, normalised. ``prompt_tokens`` is the whole input and
    ``cached_tokens`` a subset of it, so ``input`` is the uncached remainder. A field the
    provider did not report stays None."""
    if not native:
        return Usage()
    prompt = count(native.get("prompt_tokens"))
    completion = count(native.get("completion_tokens"))
    prompt_details = native.get("prompt_tokens_details")
    completion_details = native.get("completion_tokens_details")
    cached = (
        count(prompt_details.get("cached_tokens")) if isinstance(prompt_details, Mapping) else None
    )
    reasoning = (
        count(completion_details.get("reasoning_tokens"))
        if isinstance(completion_details, Mapping)
        else None
    )
    total = count(native.get("total_tokens"))
    if total is None and prompt is not None and completion is not None:
        total = prompt + completion
    return Usage(
        input=prompt - (cached or 0) if prompt is not None else None,
        output=completion,
        cache_read=cached,
        reasoning=reasoning,
        total=total,
    )


def normalise_responses_usage(native: Mapping[str, JsonValue] | None) -> Usage:
    """OpenAI Responses usage: ``input_tokens`` is the whole input, ``cached_tokens`` a
    subset; ``output_tokens`` includes ``reasoning_tokens``."""
    if not native:
        return Usage()
    prompt = count(native.get("input_tokens"))
    output = count(native.get("output_tokens"))
    cached = _detail(native, "input_tokens_details", "cached_tokens")
    total = count(native.get("total_tokens"))
    if total is None and prompt is not None and output is not None:
        total = prompt + output
    return Usage(
        input=prompt - (cached or 0) if prompt is not None else None,
        output=output,
        cache_read=cached,
        reasoning=_detail(native, "output_tokens_details", "reasoning_tokens"),
        total=total,
    )


def normalise_anthropic_usage(native: Mapping[str, JsonValue] | None) -> Usage:
    """Anthropic Messages usage: ``input_tokens`` is the uncached remainder; cache reads
    (``cache_read_input_tokens``) and writes (``cache_creation_input_tokens``) add to it."""
    if not native:
        return Usage()
    uncached = count(native.get("input_tokens"))
    output = count(native.get("output_tokens"))
    cache_read = count(native.get("cache_read_input_tokens"))
    cache_write = count(native.get("cache_creation_input_tokens"))
    parts = (uncached, cache_read, cache_write, output)
    total = sum(p for p in parts if p is not None) if all(p is not None for p in parts) else None
    return Usage(
        input=uncached,
        output=output,
        cache_read=cache_read,
        cache_write=cache_write,
        total=total,
    )


def recovered_usage(text: str, thinking: str) -> Usage:
    """A rough output count (words streamed) for replies that reported no usage."""
    if not text and not thinking:
        return Usage()
    return Usage(output=len(thinking.split()) + len(text.split()), recovered=True)
