"""What a verifier expected and what came instead, for a failure line a person can act on.

Read from the ``details`` of a task's ``verifier/reward.json``, whose shape each built-in
verifier documents (docs/verifiers.md): ``exact`` (``expected``, ``got``, ``matched``),
``includes`` (``found``, ``missing``), ``regex`` (``expected`` pattern, ``flags``,
``match``), ``choice`` (``expected`` letter, ``expected_text``, ``chosen``,
``chosen_text``, ``candidates``), ``number`` (``expected``, ``extracted``, ``value``,
``allowed_error``), ``json_schema`` (``parse_error``, ``schema_errors``, ``fields``).
Any other verifier whose details hold ``expected`` and ``got`` gets the plain
``expected …, got …``.

Values are cut to :data:`VALUE_CHARS` characters and quoted with their whitespace shown:
a newline is ``\\n``, a tab ``\\t``, and a space at either end or in a run of two or more
is ``␣``. Where two texts share a long beginning, both are shown from just before the
first character that differs. Never raises on a well-formed mapping of JSON values; an
unexpected shape gives None (the miner then tries its next tier).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping

from pytest_agentbench.core.jsontypes import JsonValue

VALUE_CHARS = 40
#: How much of the shared beginning is kept before the first difference.
_LEAD = 8
_SPACES = re.compile(r"^ +| +$| {2,}")


def _marked(text: str) -> str:
    return _SPACES.sub(lambda m: "␣" * len(m.group()), text)


def visible(value: JsonValue, limit: int = VALUE_CHARS, start: int = 0) -> str:
    """``value`` as it was: a string quoted, its whitespace shown, cut to ``limit``
    characters from ``start`` (``…`` marks a cut at either end); any other JSON value
    compact."""
    if not isinstance(value, str):
        text = json.dumps(value, ensure_ascii=False, separators=(", ", ": "))
        return text if len(text) <= limit else text[: limit - 1] + "…"
    head = "…" if start > 0 else ""
    piece = value[start : start + limit]
    tail = "…" if start + limit < len(value) else ""
    quoted = json.dumps(_marked(piece), ensure_ascii=False)
    return f'"{head}{quoted[1:-1]}{tail}"'


def _shared(a: str, b: str) -> int:
    """Where the two texts start to differ."""
    size = min(len(a), len(b))
    return next((i for i in range(size) if a[i] != b[i]), size)


def expected_got(expected: JsonValue, got: JsonValue, limit: int = VALUE_CHARS) -> str:
    """``expected "Paris", got "Paris.␣"``; two texts with a long shared beginning are
    both shown from just before their first difference."""
    start = 0
    if isinstance(expected, str) and isinstance(got, str):
        differs = _shared(expected, got)
        if differs > limit - _LEAD:
            start = differs - _LEAD
    return f"expected {visible(expected, limit, start)}, got {visible(got, limit, start)}"


def _texts(values: JsonValue) -> list[str]:
    return [v for v in values if isinstance(v, str)] if isinstance(values, list) else []


def _exact(details: Mapping[str, JsonValue]) -> str:
    expected, got = details.get("expected"), details.get("got")
    targets = _texts(expected)
    if len(targets) > 1:
        shown = ", ".join(visible(t, 20) for t in targets[:3])
        more = f" (+{len(targets) - 3} more)" if len(targets) > 3 else ""
        return f"expected one of {shown}{more}, got {visible(got)}"
    return expected_got(targets[0] if targets else expected, got)


def _includes(details: Mapping[str, JsonValue]) -> str:
    missing = _texts(details.get("missing"))
    shown = ", ".join(visible(t, 20) for t in missing[:3])
    more = f" (+{len(missing) - 3} more)" if len(missing) > 3 else ""
    return f"missing {shown}{more} in {visible(details.get('got'))}"


def _regex(details: Mapping[str, JsonValue]) -> str:
    pattern, flags = details.get("expected"), details.get("flags")
    text = visible(pattern if isinstance(pattern, str) else "")[1:-1]
    shown = f"/{text}/{flags if isinstance(flags, str) else ''}"
    whole = "fullmatch" in str(details.get("extraction"))
    verb = "does not wholly match" if whole else "has no match for"
    return f"{visible(details.get('got'))} {verb} {shown}"


def _option(letter: JsonValue, text: JsonValue) -> str:
    return f"{letter} ({visible(text, 30)})" if isinstance(text, str) else str(letter)


def _choice(details: Mapping[str, JsonValue]) -> str:
    expected = _option(details.get("expected"), details.get("expected_text"))
    candidates = _texts(details.get("candidates"))
    chosen = details.get("chosen")
    if candidates:
        return f"expected {expected}, got an answer naming {', '.join(candidates)}"
    if not isinstance(chosen, str):
        return f"expected {expected}, no option letter found in {visible(details.get('got'))}"
    text = details.get("chosen_text")
    got = _option(chosen, text) if isinstance(text, str) else f"{chosen} (not an option)"
    return f"expected {expected}, got {got}"


def _number(details: Mapping[str, JsonValue]) -> str:
    expected = visible(details.get("expected"))
    extracted = details.get("extracted")
    if not isinstance(extracted, str):
        return f"expected {expected}, no number found in {visible(details.get('got'))}"
    if details.get("value") is None:
        return f"expected {expected}, got the fraction {visible(extracted)}"
    how = details.get("extraction")
    where = f" ({how})" if isinstance(how, str) and how else ""
    return f"expected {expected}, got {extracted}{where}"


def _answer_object(got: JsonValue) -> Mapping[str, JsonValue] | None:
    """The answer's JSON object, read back from ``got`` (fences dropped); None when it
    is not one whole object (``got`` is an excerpt of the answer)."""
    if not isinstance(got, str):
        return None
    text = got.strip()
    if text.startswith("```"):
        text = text.split("\n", 1)[1] if "\n" in text else ""
        text = text.rsplit("```", 1)[0]
    try:
        value: JsonValue = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _json_schema(details: Mapping[str, JsonValue]) -> str | None:
    parse_error = details.get("parse_error")
    if isinstance(parse_error, str):
        return f"not valid JSON: got {visible(details.get('got'))} ({parse_error})"
    errors = details.get("schema_errors")
    first = errors[0] if isinstance(errors, list) and errors else None
    expected = details.get("expected")
    if isinstance(first, dict):
        path = str(first.get("path"))
        line = f"{path}: {first.get('message')}"
        field = path.removeprefix("$.")
        if isinstance(expected, dict) and field in expected and path != field:
            line += f" (expected {visible(expected[field])})"
        return line
    fields = details.get("fields")
    wrong = _texts(fields.get("mismatched")) if isinstance(fields, dict) else []
    if not wrong or not isinstance(expected, dict):
        return None
    name = wrong[0]
    answer = _answer_object(details.get("got"))
    if answer is None:
        return f"{name}: expected {visible(expected.get(name))}"
    if name not in answer:
        return f"{name}: expected {visible(expected.get(name))}, missing from the answer"
    return f"{name}: " + expected_got(expected.get(name), answer[name])


def mismatch_line(details: Mapping[str, JsonValue]) -> str | None:
    """What was expected and what came instead, by the shape of ``details``; None when
    the details say neither."""
    if "chosen" in details and "expected_text" in details:
        return _choice(details)
    if "allowed_error" in details and "expected" in details:
        return _number(details)
    if "schema_source" in details or "parse_error" in details or "schema_errors" in details:
        return _json_schema(details)
    if "missing" in details and "found" in details:
        return _includes(details) if _texts(details.get("missing")) else None
    if "match" in details and "flags" in details:
        return _regex(details) if details.get("match") is None else None
    if "expected" in details and "got" in details:
        return _exact(details) if details.get("matched") is None else None
    return None


def count_note(metrics: Mapping[str, JsonValue]) -> str:
    """``fields found 2/3``: the ``<x>_found`` / ``<x>_total`` pairs of ``metrics``, for
    the line's count suffix (empty when there is none)."""
    shown = []
    for name, found in metrics.items():
        base = name.removesuffix("_found")
        total = metrics.get(f"{base}_total")
        if base == name or not isinstance(found, int | float) or isinstance(found, bool):
            continue
        if isinstance(total, int | float) and not isinstance(total, bool) and total > 0:
            shown.append(f"{base} found {found:g}/{total:g}")
    return "; ".join(shown)
