"""Context overflow: how servers say a request does not fit the model's context, and the
ContextOverflow every client raises for it (never retried, never counted by the breaker).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping

from pytest_agentbench.core.jsontypes import JsonValue
from pytest_agentbench.errors import ContextOverflow

#: How servers say a request does not fit the model's context: llama.cpp's error type
#: (HTTP 400, or 500 in older builds), OpenAI's error code, and the messages of
#: llama.cpp (old and new), llama-cpp-python ("Requested tokens (N) exceed context window
#: of M" when its own 400 mapping does not apply), OpenAI/vLLM ("maximum context length",
#: "exceeds the context window") and Anthropic ("prompt is too long: N tokens > M
#: maximum").
_OVERFLOW_TYPES = frozenset({"exceed_context_size_error"})
_OVERFLOW_CODES = frozenset({"context_length_exceeded"})
_OVERFLOW_TEXT = re.compile(
    r"exceeds? the available context size|context size has been exceeded|"
    r"prompt is too long|maximum context length|context_length_exceeded|"
    r"exceeds the context window|exceed context window",
    re.IGNORECASE,
)
#: Where a message holds both counts: (pattern, group of the prompt, group of the context).
_OVERFLOW_COUNTS = (
    (re.compile(r"(\d+) tokens\s*>\s*(\d+)\s*maximum"), 1, 2),
    (re.compile(r"\((\d+) tokens\) exceeds the available context size \((\d+) tokens\)"), 1, 2),
    (re.compile(r"Requested tokens \((\d+)\) exceed context window of (\d+)"), 1, 2),
    (re.compile(r"maximum context length is (\d+) tokens\. However, you requested (\d+)"), 2, 1),
)
#: Where a message splits what was requested into the prompt and the completion asked for
#: (llama-cpp-python and OpenAI: "… you requested 2285 tokens (2029 in the messages, 256
#: in the completion)"; its text-completion form: "(2029 in your prompt; 256 for the
#: completion)"): (prompt, completion).
_REQUESTED_PARTS = re.compile(
    r"\((\d+) in (?:the messages|your prompt)[,;] (\d+) (?:in|for) the completion\)"
)


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def context_overflow(error: JsonValue, text: str = "") -> tuple[int | None, int | None] | None:
    """``(prompt_tokens, context_tokens)`` when a provider error says the request does not
    fit the model's context (either count None when unknown); None for any other error.
    ``error`` is the body's ``error`` object (or a Responses ``error``), ``text`` the raw
    body, read when there is no object."""
    if isinstance(error, Mapping):
        message = str(error.get("message") or "")
        if not (
            error.get("type") in _OVERFLOW_TYPES
            or error.get("code") in _OVERFLOW_CODES
            or _OVERFLOW_TEXT.search(message)
        ):
            return None
        prompt, context = _int(error.get("n_prompt_tokens")), _int(error.get("n_ctx"))
    elif _OVERFLOW_TEXT.search(text):
        message, prompt, context = text, None, None
    else:
        return None
    for pattern, prompt_at, context_at in _OVERFLOW_COUNTS:
        found = pattern.search(message)
        if found and prompt is None and context is None:
            prompt, context = int(found.group(prompt_at)), int(found.group(context_at))
    parts = _REQUESTED_PARTS.search(message)
    if parts is not None:
        prompt = int(parts.group(1))  # "you requested N" counted the completion too
    return prompt, context


def requested_completion(detail: str) -> int | None:
    """The completion tokens an overflowing request asked room for, when the server's
    message says (None otherwise)."""
    parts = _REQUESTED_PARTS.search(detail)
    return int(parts.group(2)) if parts is not None else None


def overflow_error(
    label: str,
    endpoint: str,
    status: int | None,
    counts: tuple[int | None, int | None],
    detail: str,
) -> ContextOverflow:
    """The ContextOverflow every client raises, with the counts when the server gave them."""
    prompt, context = counts
    completion = requested_completion(detail)
    size = ""
    if prompt is not None and context is not None:
        asked = f" + {completion} requested completion tokens" if completion is not None else ""
        size = f" ({prompt} prompt tokens{asked} > {context} context tokens)"
    where = f"HTTP {status} from {endpoint}" if status is not None else f"from {endpoint}"
    return ContextOverflow(
        f"{label}: context overflow{size}: the conversation does not fit the model's "
        f"context, not retried: {detail} ({where})",
        endpoint=endpoint,
        status=status,
        prompt_tokens=prompt,
        context_tokens=context,
        completion_tokens=completion,
    )


def error_object(text: str) -> JsonValue:
    """The ``error`` member of a JSON error body (None when there is none)."""
    try:
        body: JsonValue = json.loads(text)
    except ValueError:
        return None
    return body.get("error") if isinstance(body, dict) else None
