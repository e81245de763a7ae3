"""Text verifiers: ``exact``, ``includes`` and ``regex``.

They compare the model's final text with the task's target as strings and never guess at
meaning (``number`` and ``choice`` do that). A wrong or empty answer is reward 0 with
feedback; a target or option they cannot use is found at collection (``check_task``).

Patterns run on the ``regex`` package, not ``re``: its matches take a time limit, so a
pattern that backtracks catastrophically on some answer (``(a+)+$``) stops with a clear
verifier error instead of holding the interpreter for hours (``re`` holds the GIL and
cannot be interrupted).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Protocol

from pytest_agentbench.core.jsontypes import JsonObject, JsonValue
from pytest_agentbench.errors import VerifierError
from pytest_agentbench.suites.task import Task
from pytest_agentbench.verifiers.base import (
    Check,
    ConfigProblem,
    FunctionVerifier,
    Verdict,
    number_option,
)

#: How much of an answer ``details["got"]`` keeps, so a runaway answer never bloats
#: ``reward.json`` past what the evidence miner reads.
EXCERPT_CHARS = 500
#: How long one regex match may run unless ``options.timeout_s`` says otherwise.
REGEX_TIMEOUT_S = 5.0


def excerpt(text: str, limit: int = EXCERPT_CHARS) -> str:
    """``text`` cut to ``limit`` characters, saying how much was cut."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… [{len(text) - limit} more characters]"


def cannot_judge(error: VerifierError, **details: JsonValue) -> Verdict:
    """The verdict for a verifier that could not judge: reward 0 and the error's message."""
    return Verdict(reward=0.0, details=details, error=str(error))


def unusable(at: tuple[str, ...], error: VerifierError) -> ConfigProblem:
    """A collection problem at ``at`` from the error the verifier would have given."""
    return ConfigProblem(at, f"cannot be used: {error}")


def _target_strings(kind: str, target: object) -> list[str]:
    """The acceptable strings of a target; raises VerifierError saying what to write."""
    if isinstance(target, str):
        items = [target]
    elif isinstance(target, list | tuple) and target and all(isinstance(t, str) for t in target):
        items = list(target)
    else:
        shown = excerpt(repr(target), 80)
        hint = ' (quote it, e.g. "7", or use the number verifier)' if _is_number(target) else ""
        raise VerifierError(
            f"{kind} verifier: target must be a string or a non-empty list of strings, "
            f"got {type(target).__name__} {shown}{hint}"
        )
    if any(not item for item in items):
        raise VerifierError(f"{kind} verifier: target contains an empty string")
    return items


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _normalizer(
    options: Mapping[str, JsonValue], *, strip: bool
) -> tuple[Callable[[str], str], str]:
    """A function applying the comparison options to a string, and a description of it."""
    case_sensitive = bool(options.get("case_sensitive", True))
    collapse = bool(options.get("normalize_whitespace", False))
    steps = []
    if strip:
        steps.append("stripped")
    if collapse:
        steps.append("whitespace collapsed")
    if not case_sensitive:
        steps.append("case-insensitive")

    def normalize(text: str) -> str:
        if collapse:
            text = " ".join(text.split()) if strip else re.sub(r"\s+", " ", text)
        elif strip:
            text = text.strip()
        return text if case_sensitive else text.casefold()

    return normalize, ", ".join(steps) or "as written"


def _check_targets(kind: str) -> Callable[[Task], list[ConfigProblem]]:
    def check(task: Task) -> list[ConfigProblem]:
        try:
            _target_strings(kind, task.target)
        except VerifierError as exc:
            return [unusable(("target",), exc)]
        return []

    return check


def _loose(text: str) -> str:
    return " ".join(text.split()).casefold()


def verify_exact(check: Check) -> Verdict:
    """Reward 1 when the answer equals the target (or one of a list of targets)."""
    try:
        targets = _target_strings("exact", check.task.target)
    except VerifierError as exc:
        return cannot_judge(exc, got=excerpt(check.answer))
    normalize, how = _normalizer(check.options, strip=bool(check.options.get("strip", True)))
    got = normalize(check.answer)
    matched = next((t for t in targets if normalize(t) == got), None)
    details = {
        "expected": check.task.target,
        "got": excerpt(check.answer),
        "extraction": f"whole answer ({how})",
        "matched": matched,
    }
    if matched is not None:
        return Verdict(reward=1.0, metrics={"exact": 1}, details=details)
    return Verdict(
        reward=0.0,
        metrics={"exact": 0},
        details=details,
        feedback=_exact_feedback(check.answer, targets),
    )


def _exact_feedback(answer: str, targets: list[str]) -> str:
    """Say how the answer misses without saying what the target is."""
    loose = _loose(answer)
    if not loose:
        return "Your answer was empty."
    if any(_loose(t) == loose for t in targets):
        if any(" ".join(t.split()) == " ".join(answer.split()) for t in targets):
            return "Your answer differs from the expected answer only in whitespace."
        return "Your answer differs from the expected answer only in letter case or spacing."
    if any(_loose(t) in loose for t in targets):
        return "Your answer contains more than the expected answer; reply with the answer only."
    return "Your answer does not match the expected answer."


def verify_includes(check: Check) -> Verdict:
    """Reward = the fraction of target strings found in the answer."""
    try:
        targets = _target_strings("includes", check.task.target)
    except VerifierError as exc:
        return cannot_judge(exc, got=excerpt(check.answer))
    normalize, how = _normalizer(check.options, strip=False)
    haystack = normalize(check.answer)
    found: list[JsonValue] = [t for t in targets if normalize(t) in haystack]
    missing: list[JsonValue] = [t for t in targets if normalize(t) not in haystack]
    total = len(targets)
    details: dict[str, JsonValue] = {
        "expected": check.task.target,
        "got": excerpt(check.answer),
        "extraction": f"substring search ({how})",
        "found": found,
        "missing": missing,
    }
    if not missing:
        feedback = ""
    elif total == 1:
        feedback = "Your answer does not contain the required text."
    elif not found:
        feedback = f"Your answer contains none of the {total} required items."
    else:
        feedback = f"Your answer is missing {len(missing)} of the {total} required items."
    return Verdict(
        reward=len(found) / total,
        metrics={"items_found": len(found), "items_total": total},
        details=details,
        feedback=feedback,
    )


class PatternMatch(Protocol):
    """What the verifier reads of a ``regex`` match."""

    def group(self, index: int, /) -> str: ...
    def start(self) -> int: ...
    def end(self) -> int: ...


class CompiledPattern(Protocol):
    """What the verifier uses of a compiled ``regex`` pattern (the package ships no
    types): matching with a time limit."""

    def search(self, text: str, *, timeout: float) -> PatternMatch | None: ...
    def fullmatch(self, text: str, *, timeout: float) -> PatternMatch | None: ...


#: The flags the verifier takes, by the name of ``regex``'s flag.
_FLAGS = {"i": "IGNORECASE", "m": "MULTILINE", "s": "DOTALL"}


def _compile(pattern: str, flags: str, source: str) -> CompiledPattern:
    import regex  # ~15 ms: paid by runs with a regex task only

    if set(flags) - set(_FLAGS):
        raise VerifierError(
            f"regex verifier: options.flags may only contain i, m, s; got {flags!r}"
        )
    bits = 0
    for letter in flags:
        bits |= getattr(regex, _FLAGS[letter])
    try:
        compiled: CompiledPattern = regex.compile(pattern, bits | regex.VERSION0)
    except regex.error as exc:
        raise VerifierError(
            f"regex verifier: invalid pattern {excerpt(pattern, 120)!r} in {source}: "
            f"{exc.msg} at position {exc.pos}"
        ) from None
    return compiled


def _pattern(task: Task, options: Mapping[str, JsonValue]) -> tuple[CompiledPattern, str, str]:
    """The compiled pattern, its text and where it came from; raises VerifierError."""
    pattern = options.get("pattern")
    source = "options.pattern"
    if pattern is None:
        pattern, source = task.target, "target"
    if not isinstance(pattern, str):
        raise VerifierError(
            "regex verifier: set options.pattern or make target the pattern string "
            f"(target is {type(pattern).__name__})"
        )
    return _compile(pattern, str(options.get("flags", "")), source), pattern, source


def check_regex(task: Task) -> list[ConfigProblem]:
    """The pattern must compile (it comes from ``options.pattern``, else the target)."""
    options = task.verifier.options
    try:
        _pattern(task, options)
    except VerifierError as exc:
        at = ("options", "pattern") if options.get("pattern") is not None else ("target",)
        return [unusable(at, exc)]
    return []


def verify_regex(check: Check) -> Verdict:
    """Reward 1 when the pattern is found in the answer (or matches all of it, stripped).

    Raises VerifierError when the match runs past its time limit: the pattern, not the
    answer, is at fault, so the task is a harness error rather than a failure."""
    flags = str(check.options.get("flags", ""))
    fullmatch = bool(check.options.get("fullmatch", False))
    try:
        compiled, pattern, source = _pattern(check.task, check.options)
    except VerifierError as exc:
        return cannot_judge(exc, got=excerpt(check.answer))
    answer = check.answer.strip() if fullmatch else check.answer
    limit = number_option(check.options, "timeout_s", REGEX_TIMEOUT_S)
    try:
        if fullmatch:
            match = compiled.fullmatch(answer, timeout=limit)
        else:
            match = compiled.search(answer, timeout=limit)
    except TimeoutError:
        raise VerifierError(
            f"regex verifier: match timed out after {limit:g}s: the pattern "
            f"{excerpt(pattern, 80)!r} ({source}) backtracks catastrophically on a "
            f"{len(answer)}-character answer; simplify it or raise options.timeout_s"
        ) from None
    details: JsonObject = {
        "expected": pattern,
        "flags": flags,
        "got": excerpt(check.answer),
        "extraction": "whole answer, stripped, fullmatch" if fullmatch else "search",
        "match": None
        if match is None
        else {"text": excerpt(match.group(0), 200), "start": match.start(), "end": match.end()},
    }
    if match is not None:
        return Verdict(reward=1.0, metrics={"matched": 1}, details=details)
    if fullmatch:
        feedback = "Your answer as a whole is not in the required format."
    else:
        feedback = "Your answer does not contain text in the required format."
    return Verdict(reward=0.0, metrics={"matched": 0}, details=details, feedback=feedback)


_CASE: JsonObject = {
    "type": "boolean",
    "default": True,
    "description": "Compare letter case exactly; false compares case-insensitively.",
}

EXACT = FunctionVerifier(
    kind="exact",
    function=verify_exact,
    task_check=_check_targets("exact"),
    options_schema={
        "type": "object",
        "properties": {
            "strip": {
                "type": "boolean",
                "default": True,
                "description": "Ignore leading and trailing whitespace.",
            },
            "case_sensitive": _CASE,
            "normalize_whitespace": {
                "type": "boolean",
                "default": False,
                "description": "Treat every run of whitespace as one space.",
            },
        },
        "additionalProperties": False,
    },
)

INCLUDES = FunctionVerifier(
    kind="includes",
    function=verify_includes,
    task_check=_check_targets("includes"),
    options_schema={
        "type": "object",
        "properties": {"case_sensitive": _CASE},
        "additionalProperties": False,
    },
)

REGEX = FunctionVerifier(
    kind="regex",
    function=verify_regex,
    task_check=check_regex,
    options_schema={
        "type": "object",
        "properties": {
            "pattern": {
                "type": "string",
                "description": "Python regular expression; default: the task's target.",
            },
            "flags": {
                "type": "string",
                "pattern": "^[ims]*$",
                "default": "",
                "description": "i = ignore case, m = multiline, s = dot matches newline.",
            },
            "fullmatch": {
                "type": "boolean",
                "default": False,
                "description": "The whole (stripped) answer must match, not just a part.",
            },
            "timeout_s": {
                "type": "number",
                "exclusiveMinimum": 0,
                "maximum": 600,
                "default": REGEX_TIMEOUT_S,
                "description": "Time limit of one match; past it the task is a harness error.",
            },
        },
        "additionalProperties": False,
    },
)
