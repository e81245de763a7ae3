"""A script's declared usage, served in the native shape of the protocol that answers.

A script declares usage in one protocol's native shape (whichever its author knows), but
the same script may be served over Chat Completions, Responses or Anthropic Messages. A
shape the serving protocol does not speak is translated with each protocol's arithmetic:

- OpenAI (Chat ``prompt_tokens``, Responses ``input_tokens``) counts the *whole* prompt;
  cached tokens (``*_tokens_details.cached_tokens``) are a subset of it.
- Anthropic's ``input_tokens`` is the *uncached remainder*; ``cache_read_input_tokens``
  and ``cache_creation_input_tokens`` add to it.

So Chat ``prompt_tokens 50`` with ``cached_tokens 44`` is Anthropic ``input_tokens 6`` and
``cache_read_input_tokens 44``, and back. OpenAI has no cache-write count: Anthropic's
``cache_creation_input_tokens`` is part of OpenAI's whole prompt and nothing more. A field
the script did not declare is left out, never invented as 0. Usage already in the serving
protocol's shape, or in no recognisable shape, is served verbatim.
"""

from __future__ import annotations

from collections.abc import Mapping

from pytest_agentbench.core.fastclass import dataclass
from pytest_agentbench.core.jsontypes import JsonObject, JsonValue
from pytest_agentbench.core.stream import WireProtocol

#: The usage shape of a protocol: the protocol's name.
Shape = WireProtocol

#: The whole-prompt and output count of each OpenAI shape.
_NAMES = {
    "chat": ("prompt_tokens", "completion_tokens"),
    "responses": ("input_tokens", "output_tokens"),
}
_ANTHROPIC_ONLY = ("cache_read_input_tokens", "cache_creation_input_tokens")
_RESPONSES_ONLY = ("input_tokens_details", "output_tokens_details", "total_tokens")


def usage_shape(usage: Mapping[str, JsonValue]) -> Shape | None:
    """Which protocol's shape ``usage`` is in; None when it names none of their fields.
    ``input_tokens`` + ``output_tokens`` alone is Anthropic's (Responses always sends
    ``total_tokens``)."""
    if "prompt_tokens" in usage or "completion_tokens" in usage:
        return "chat"
    if any(name in usage for name in _ANTHROPIC_ONLY):
        return "anthropic"
    if any(name in usage for name in _RESPONSES_ONLY):
        return "responses"
    if "input_tokens" in usage or "output_tokens" in usage:
        return "anthropic"
    return None


def _int(value: JsonValue) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _detail(usage: Mapping[str, JsonValue], table: str, name: str) -> int | None:
    details = usage.get(table)
    return _int(details.get(name)) if isinstance(details, Mapping) else None


def _add(*terms: int | None) -> int | None:
    return None if any(term is None for term in terms) else sum(terms)  # type: ignore[arg-type]


@dataclass(frozen=True)
class _Counts:
    """Usage in neutral terms; None = not declared."""

    uncached: int | None
    cache_read: int | None
    cache_write: int | None
    output: int | None
    reasoning: int | None

    @property
    def whole(self) -> int | None:
        return _add(self.uncached, self.cache_read or 0, self.cache_write or 0)


def _counts(usage: Mapping[str, JsonValue], shape: Shape) -> _Counts:
    if shape == "anthropic":
        return _Counts(
            uncached=_int(usage.get("input_tokens")),
            cache_read=_int(usage.get("cache_read_input_tokens")),
            cache_write=_int(usage.get("cache_creation_input_tokens")),
            output=_int(usage.get("output_tokens")),
            reasoning=None,
        )
    prompt, output = _NAMES[shape]
    whole = _int(usage.get(prompt))
    cached = _detail(usage, f"{prompt}_details", "cached_tokens")
    return _Counts(
        uncached=whole - (cached or 0) if whole is not None else None,
        cache_read=cached,
        cache_write=None,
        output=_int(usage.get(output)),
        reasoning=_detail(usage, f"{output}_details", "reasoning_tokens"),
    )


def _render(counts: _Counts, shape: Shape) -> JsonObject:
    out: JsonObject = {}

    def put(name: str, value: JsonValue) -> None:
        if value is not None:
            out[name] = value

    if shape == "anthropic":
        put("input_tokens", counts.uncached)
        put("cache_creation_input_tokens", counts.cache_write)
        put("cache_read_input_tokens", counts.cache_read)
        put("output_tokens", counts.output)
        return out
    prompt, output = _NAMES[shape]
    put(prompt, counts.whole)
    if counts.cache_read is not None:
        out[f"{prompt}_details"] = {"cached_tokens": counts.cache_read}
    put(output, counts.output)
    if counts.reasoning is not None:
        out[f"{output}_details"] = {"reasoning_tokens": counts.reasoning}
    put("total_tokens", _add(counts.whole, counts.output))
    return out


def serve_usage(usage: Mapping[str, JsonValue], shape: Shape) -> JsonObject:
    """``usage`` as the protocol ``shape`` reports it (see the module docstring)."""
    declared = usage_shape(usage)
    if declared is None or declared == shape:
        return dict(usage)
    return _render(_counts(usage, declared), shape)
