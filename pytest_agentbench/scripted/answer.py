"""What the scripted provider answers to one generation request, apart from the HTTP: the
script and turn its headers name, the reply the book picks, the request log entry, and
the JSON body of an unstreamed answer.

A live request (``handler.py``) and an entry of a provider batch (``batches.py``) go
through these same functions, so a batched answer is the live unstreamed answer: the
same script, the same turn rules, the same usage and body shape.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from urllib.parse import unquote

from pytest_agentbench.core.fastclass import dataclass
from pytest_agentbench.core.jsontypes import JsonObject, JsonValue
from pytest_agentbench.scripted.book import ScriptBook
from pytest_agentbench.scripted.script import Reply
from pytest_agentbench.scripted.wire import Refusal, Wire
from pytest_agentbench.scripted.wire_anthropic import ANTHROPIC_WIRE
from pytest_agentbench.scripted.wire_chat import CHAT_WIRE
from pytest_agentbench.scripted.wire_responses import RESPONSES_WIRE

#: The generation endpoints, by path below ``/v1``, and the protocol each speaks.
WIRES: dict[str, Wire] = {
    "/chat/completions": CHAT_WIRE,
    "/messages": ANTHROPIC_WIRE,
    "/responses": RESPONSES_WIRE,
}

REDACTED_HEADERS = ("authorization", "proxy-authorization", "x-api-key", "api-key")


def header_text(value: str) -> str | None:
    """A script header's key: percent-encoded UTF-8 (what the scripted client sends, so
    any Unicode key fits in an ASCII header); raw UTF-8 bytes (which ``http.server``
    reads as Latin-1) are accepted too. None when it is neither."""
    try:
        value = value.encode("latin-1").decode("utf-8")
    except UnicodeError:
        return None
    try:
        return unquote(value, errors="strict")
    except UnicodeDecodeError:
        return None


@dataclass(frozen=True)
class Named:
    """The script and turn a request names in its headers (None: not named)."""

    key: str | None
    turn: int | None


def named_script(header: Callable[[str], str | None]) -> Named | str:
    """The script and turn named by ``x-agentbench-script`` / ``x-agentbench-turn``
    (``header`` looks one up by its lower-case name); the message of an HTTP 400 when
    either is malformed."""
    key = header("x-agentbench-script")
    if key is not None:
        key = header_text(key)
        if key is None:
            return "x-agentbench-script is neither percent-encoded nor raw UTF-8"
    turn_text = header("x-agentbench-turn")
    turn: int | None = None
    if turn_text is not None:
        if not turn_text.strip().isdigit():
            return f"x-agentbench-turn must be an integer >= 0: {turn_text!r}"
        turn = int(turn_text)
    return Named(key, turn)


@dataclass(frozen=True)
class Choice:
    """The book's answer to a request: the reply picked (with its script key and turn), or
    why none was: a refusal the real API would make (HTTP 400, no turn used up) or no
    script matching (HTTP 404, ``missing`` the message)."""

    key: str | None
    turn: int | None
    reply: Reply | None = None
    refusal: Refusal | None = None
    missing: str = ""


def choose(book: ScriptBook, wire: Wire, route: str, body: JsonObject, named: Named) -> Choice:
    """Pick the reply answering ``body`` sent to ``route`` (a path of ``WIRES``)."""
    model = body.get("model")
    refusal = wire.check(body, book.script(named.key, model))
    if refusal is not None:
        return Choice(named.key, named.turn, refusal=refusal)
    fingerprint = hashlib.sha256(
        route.encode() + json.dumps(body, sort_keys=True).encode()
    ).hexdigest()
    picked = book.pick(named.key, model, named.turn, fingerprint)
    if picked is None:
        keys: list[str] = book.keys()  # (sorted: a ScriptBook is not a mapping)
        known = ", ".join(repr(k) for k in keys) or "(none)"
        asked = named.key if named.key is not None else model
        message = f"no script for key {asked!r}; registered keys: {known}"
        return Choice(named.key, named.turn, missing=message)
    return Choice(picked[0], picked[1], reply=picked[2])


def log_entry(
    path: str, choice: Choice, body: JsonObject, headers: Mapping[str, str]
) -> JsonObject:
    """The request log's entry (``ScriptedServer.requests``): credentials redacted."""
    return {
        "path": path,
        "key": choice.key,
        "turn": choice.turn,
        "body": body,
        "headers": {
            name.lower(): "[redacted]" if name.lower() in REDACTED_HEADERS else value
            for name, value in headers.items()
        },
    }


def _at_the_limit(usage: JsonObject, body: JsonObject) -> JsonObject:
    """The default usage of a reply cut with ``length``: its output is the request's
    output-token limit, as a server that stopped there reports it (declare ``usage`` to
    imitate a cut by the context window instead)."""
    limit = next(
        (
            value
            for key in ("max_tokens", "max_completion_tokens", "max_output_tokens")
            if isinstance(value := body.get(key), int) and not isinstance(value, bool)
        ),
        None,
    )
    key = next((k for k in ("completion_tokens", "output_tokens") if k in usage), None)
    if limit is None or key is None:
        return usage
    before, total = usage[key], usage.get("total_tokens")
    changed = {**usage, key: limit}
    if isinstance(before, int) and isinstance(total, int):
        changed["total_tokens"] = total + limit - before
    return changed


def reply_usage(wire: Wire, reply: Reply, body: JsonObject) -> JsonObject:
    """The native usage a reply reports: its declared usage in the protocol's shape, else
    the protocol's default count (at the output limit for a ``length`` reply)."""
    if reply.usage is not None:
        return wire.declared_usage(reply.usage)
    usage = wire.default_usage(reply, body)
    if reply.finish_reason == "length":
        usage = _at_the_limit(usage, body)
    return usage


def model_name(body: JsonObject) -> str:
    """The model an answer names: the request's, else ``scripted``."""
    named: JsonValue = body.get("model")
    return named if isinstance(named, str) else "scripted"


def completion_body(wire: Wire, reply: Reply, body: JsonObject) -> JsonObject:
    """The JSON body of the unstreamed answer ``reply`` gives to ``body``."""
    return wire.completion(reply, model_name(body), reply_usage(wire, reply, body), body)
