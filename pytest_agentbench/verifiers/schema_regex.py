"""JSON Schema validation whose regular expressions cannot hang the run.

jsonschema runs a schema's ``pattern`` and ``patternProperties`` (and the property names
``additionalProperties`` and ``unevaluatedProperties`` weed out with them) on Python's
``re``, which cannot be stopped: a pattern that backtracks catastrophically on the
answer's text would hold the verifier past every timeout. The validator classes made
here run those keywords on the ``regex`` package instead (its ``re``-compatible
``VERSION0`` mode, as the ``regex`` verifier does), whose matches take a timeout; every
match of one validation shares one budget (:func:`bounded`), and a match that runs out
of it raises :class:`SchemaPatternError`, naming the pattern.

``unevaluatedProperties`` is jsonschema's own (its bookkeeping of evaluated keys is long);
before it runs, every ``patternProperties`` pattern of the schema is tried on the
instance's keys under the budget, so a pattern that backtracks on a key is stopped there
(jsonschema then matches the same keys with ``re``: a pattern the bounded engine got
through within the budget is taken as safe there).
"""

from __future__ import annotations

import contextlib
import contextvars
import time
from collections.abc import Iterator, Mapping
from functools import lru_cache

import regex
from jsonschema import validators
from jsonschema.exceptions import ValidationError
from jsonschema.protocols import Validator

#: Seconds all the pattern matches of one validation may take together.
SCHEMA_REGEX_TIMEOUT_S = 5.0


class _Budget:
    """The time left to one validation's pattern matches, and the schema's
    ``patternProperties`` patterns (for ``unevaluatedProperties``)."""

    def __init__(self, seconds: float, patterns: list[str]) -> None:
        self.seconds = seconds
        self.deadline = time.monotonic() + seconds
        self.patterns = patterns


_budget: contextvars.ContextVar[_Budget | None] = contextvars.ContextVar(
    "agentbench_schema_regex_budget", default=None
)


class SchemaPatternError(Exception):
    """A schema pattern that cannot be run within bounds: it ran out of the validation's
    time budget on some text, or the bounded engine cannot compile it."""


@contextlib.contextmanager
def bounded(schema: object, seconds: float = SCHEMA_REGEX_TIMEOUT_S) -> Iterator[None]:
    """Every pattern matched while validating against ``schema`` inside shares
    ``seconds``."""
    token = _budget.set(_Budget(seconds, _schema_patterns(schema)))
    try:
        yield
    finally:
        _budget.reset(token)


@lru_cache(maxsize=1024)
def _compiled(pattern: str) -> regex.Pattern[str]:
    return regex.compile(pattern, regex.VERSION0)


def search(pattern: str, text: str) -> bool:
    """Whether ``pattern`` is found in ``text`` (``re.search`` semantics), within what is
    left of the budget (:data:`SCHEMA_REGEX_TIMEOUT_S` per match outside
    :func:`bounded`); raises SchemaPatternError past it."""
    budget = _budget.get()
    seconds = SCHEMA_REGEX_TIMEOUT_S if budget is None else budget.seconds
    left = seconds if budget is None else budget.deadline - time.monotonic()
    shown = pattern if len(pattern) <= 80 else pattern[:79] + "…"
    try:
        compiled = _compiled(pattern)
    except regex.error as exc:  # valid for re (the schema was checked with it)
        raise SchemaPatternError(
            f"the schema's pattern {shown!r} cannot be run with a time limit: {exc}"
        ) from None
    try:
        return compiled.search(text, timeout=max(left, 0.001)) is not None
    except TimeoutError:
        raise SchemaPatternError(
            f"the schema's pattern {shown!r} ran past the {seconds:g} s limit of the "
            f"schema's patterns on a {len(text)}-character string of the answer: it "
            "backtracks catastrophically; simplify it"
        ) from None


def _pattern(
    validator: Validator, pattern: str, instance: object, schema: Mapping[str, object]
) -> Iterator[ValidationError]:
    if validator.is_type(instance, "string") and not search(pattern, str(instance)):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(
    validator: Validator,
    patterns: Mapping[str, object],
    instance: object,
    schema: Mapping[str, object],
) -> Iterator[ValidationError]:
    if not isinstance(instance, Mapping) or not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for key, value in instance.items():
            if search(pattern, str(key)):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional(instance: Mapping[str, object], schema: Mapping[str, object]) -> list[str]:
    """The instance's keys neither ``properties`` nor a ``patternProperties`` pattern
    covers, in the instance's order."""
    properties = schema.get("properties")
    named = properties if isinstance(properties, Mapping) else {}
    patterns = schema.get("patternProperties")
    patterns = [str(p) for p in patterns] if isinstance(patterns, Mapping) else []
    return [
        key
        for key in instance
        if key not in named and not any(search(pattern, key) for pattern in patterns)
    ]


def _additional_properties(
    validator: Validator, allowed: object, instance: object, schema: Mapping[str, object]
) -> Iterator[ValidationError]:
    if not isinstance(instance, Mapping) or not validator.is_type(instance, "object"):
        return
    extras = _additional(instance, schema)
    if validator.is_type(allowed, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], allowed, path=extra)
    elif allowed is False and extras:
        shown = ", ".join(repr(extra) for extra in sorted(extras))
        if "patternProperties" in schema:
            patterns = schema["patternProperties"]
            listed = (
                ", ".join(repr(p) for p in sorted(patterns))
                if isinstance(patterns, Mapping)
                else ""
            )
            verb = "does" if len(extras) == 1 else "do"
            yield ValidationError(f"{shown} {verb} not match any of the regexes: {listed}")
        else:
            verb = "was" if len(extras) == 1 else "were"
            yield ValidationError(
                f"Additional properties are not allowed ({shown} {verb} unexpected)"
            )


def _schema_patterns(schema: object) -> list[str]:
    """Every ``patternProperties`` pattern anywhere in ``schema``."""
    found: list[str] = []
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, Mapping):
            patterns = node.get("patternProperties")
            if isinstance(patterns, Mapping):
                found.extend(str(p) for p in patterns)
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return list(dict.fromkeys(found))


@lru_cache(maxsize=64)
def bounded_class(base: type[Validator]) -> type[Validator]:
    """``base`` (a jsonschema draft's validator class) with its pattern keywords on the
    bounded engine; the draft's meta-schema, type checker and format checker are kept."""
    keywords = dict(base.VALIDATORS)
    replaced: dict[str, object] = {}
    if "pattern" in keywords:
        replaced["pattern"] = _pattern
    if "patternProperties" in keywords:
        replaced["patternProperties"] = _pattern_properties
    if "additionalProperties" in keywords:
        replaced["additionalProperties"] = _additional_properties
    original = keywords.get("unevaluatedProperties")
    if original is not None:

        def unevaluated(
            validator: Validator, value: object, instance: object, schema: Mapping[str, object]
        ) -> Iterator[ValidationError]:
            budget = _budget.get()
            if budget is not None and isinstance(instance, Mapping):
                for pattern in budget.patterns:
                    for key in instance:
                        search(pattern, str(key))
            yield from original(validator, value, instance, schema)

        replaced["unevaluatedProperties"] = unevaluated
    cls: type[Validator] = validators.extend(base, replaced)
    return cls


__all__ = ["SCHEMA_REGEX_TIMEOUT_S", "SchemaPatternError", "bounded", "bounded_class", "search"]
