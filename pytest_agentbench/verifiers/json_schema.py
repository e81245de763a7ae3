"""The ``json_schema`` verifier: the answer parsed as JSON, validated with a JSON Schema,
and optionally compared field by field with an expected object.

Models wrap JSON in prose and code fences, so the answer is parsed as a whole, else from
its ```json block, else from the first ``{``/``[`` where a JSON value starts. One compiled
validator is kept per schema, since the same task runs many times.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Iterable, Mapping
from functools import lru_cache
from urllib.parse import unquote

from jsonschema import validators
from jsonschema.exceptions import SchemaError, ValidationError
from jsonschema.protocols import Validator
from referencing.exceptions import Unresolvable

from pytest_agentbench.core.fastclass import dataclass
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
from pytest_agentbench.verifiers.schema_regex import (
    SCHEMA_REGEX_TIMEOUT_S,
    SchemaPatternError,
    bounded,
    bounded_class,
)
from pytest_agentbench.verifiers.text import cannot_judge, excerpt, unusable

_FENCE = re.compile(r"```[ \t]*([\w+-]*)[^\n]*\n(.*?)```", re.DOTALL)
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SPAN_ATTEMPTS = 100
_ERRORS_COUNTED = 1000
_ERRORS_SHOWN = 3
_ERRORS_KEPT = 10


@dataclass(frozen=True)
class ParsedAnswer:
    """The JSON value found in an answer, or ``error`` (a sentence) when there is none."""

    value: JsonValue
    method: str
    error: str | None = None


def _position(exc: json.JSONDecodeError) -> str:
    return f"{exc.msg} at line {exc.lineno}, column {exc.colno}"


def parse_answer(answer: str) -> ParsedAnswer:
    """The answer's JSON value: the whole answer, else the first ```json (or unlabelled)
    fenced block, else the first ``{``/``[`` from which a JSON value decodes."""
    try:
        return ParsedAnswer(json.loads(answer), "whole answer")
    except json.JSONDecodeError:
        pass
    fences = _FENCE.findall(answer)
    block = next((body for lang, body in fences if lang.lower() == "json"), None)
    if block is None:
        block = next((body for lang, body in fences if not lang), None)
    if block is not None:
        try:
            return ParsedAnswer(json.loads(block), "fenced block")
        except json.JSONDecodeError as exc:
            return ParsedAnswer(None, "fenced block", f"in the fenced block: {_position(exc)}")
    decoder = json.JSONDecoder()
    starts = (m.start() for m in re.finditer(r"[\[{]", answer))
    first_error = None
    for start in itertools.islice(starts, _SPAN_ATTEMPTS):
        try:
            value, end = decoder.raw_decode(answer, start)
        except json.JSONDecodeError as exc:
            first_error = first_error or _position(exc)
            continue
        return ParsedAnswer(value, f"first JSON value in the text (characters {start}–{end})")
    if first_error is None:
        return ParsedAnswer(None, "no JSON found", "it contains no JSON object or array")
    return ParsedAnswer(None, "first JSON value in the text", first_error)


def _schema_key(schema: Mapping[str, JsonValue], source: str) -> str:
    def plain(value: object) -> object:
        if isinstance(value, Mapping):
            return dict(value)
        raise TypeError(f"{type(value).__name__} is not JSON")

    try:
        return json.dumps(schema, sort_keys=True, default=plain)
    except (TypeError, ValueError) as exc:
        raise VerifierError(f"json_schema verifier: {source} is not plain JSON: {exc}") from None


@lru_cache(maxsize=256)
def _validator(schema_json: str) -> Validator:
    """One checked, compiled validator per distinct schema (keyed by its canonical JSON)."""
    schema = json.loads(schema_json)
    cls = validators.validator_for(schema)
    cls.check_schema(schema)
    bounded = bounded_class(cls)  # pattern keywords on the regex engine, with a time limit
    return bounded(schema, format_checker=cls.FORMAT_CHECKER)


def compiled_validator(schema: Mapping[str, JsonValue], source: str = "schema") -> Validator:
    """The validator for ``schema``; raises VerifierError when the schema itself is
    invalid or has no JSON Schema keyword at all (an expected object given as a schema
    would accept everything)."""
    key = _schema_key(schema, source)
    try:
        validator = _validator(key)
    except SchemaError as exc:
        raise VerifierError(
            f"json_schema verifier: {source} is not a valid JSON Schema at "
            f"{_json_path(exc.absolute_path)}: {excerpt(exc.message, 200)}"
        ) from None
    if schema and not any(k.startswith("$") or k in validator.VALIDATORS for k in schema):
        raise VerifierError(
            f"json_schema verifier: {source} has no JSON Schema keyword (type, properties, "
            "required, …); to compare field values, put the object in options.expected"
        )
    return validator


def _json_path(parts: Iterable[str | int]) -> str:
    path = "$"
    for part in parts:
        if isinstance(part, int):
            path += f"[{part}]"
        elif _IDENTIFIER.fullmatch(part):
            path += f".{part}"
        else:
            path += f"[{json.dumps(part)}]"
    return path


def _violation(error: ValidationError) -> JsonObject:
    """A violation for feedback; ``const`` and ``enum`` messages list the allowed values,
    which may be the very answer, so they are replaced."""
    if error.validator == "const":
        message = "the value is not the required one"
    elif error.validator == "enum":
        message = "the value is not one of the allowed values"
    else:
        message = excerpt(error.message, 200)
    return {"path": _json_path(error.absolute_path), "message": message}


def _same(left: object, right: object) -> bool:
    """JSON equality: 1 equals 1.0, but true is not 1."""
    if isinstance(left, bool) or isinstance(right, bool):
        return isinstance(left, bool) and isinstance(right, bool) and left == right
    if isinstance(left, int | float) and isinstance(right, int | float):
        return left == right
    if isinstance(left, Mapping) and isinstance(right, Mapping):
        return left.keys() == right.keys() and all(_same(left[k], right[k]) for k in left)
    if isinstance(left, list | tuple) and isinstance(right, list | tuple):
        return len(left) == len(right) and all(map(_same, left, right))
    return type(left) is type(right) and left == right


def _schema_for(check: Check) -> tuple[Mapping[str, JsonValue] | None, str | None]:
    schema = check.options.get("schema")
    if isinstance(schema, Mapping):
        return schema, "options.schema"
    if schema is not None:
        raise VerifierError(
            f"json_schema verifier: options.schema must be an object, not {type(schema).__name__}"
        )
    if isinstance(check.task.target, Mapping):
        return check.task.target, "target"
    if check.options.get("expected") is not None:
        return None, None
    raise VerifierError(
        "json_schema verifier: no schema; set options.schema or make the target a JSON "
        f"Schema object (target is {type(check.task.target).__name__})"
    )


def check_json_schema(task: Task) -> list[ConfigProblem]:
    """There must be a schema (options.schema or an object target) or ``expected``, and
    the schema must be a valid JSON Schema with at least one keyword, whose local
    ``$ref`` pointers (``#/$defs/item``) point at something."""
    check = Check("", task, task.verifier.options)
    try:
        schema, source = _schema_for(check)
        if schema is not None:
            compiled_validator(schema, source or "schema")
            _check_local_refs(schema, source or "schema")
    except VerifierError as exc:
        at = ("options", "schema") if _schema_is_option(check) else ("target",)
        return [unusable(at, exc)]
    return []


def _check_local_refs(schema: Mapping[str, JsonValue], source: str) -> None:
    """Raise VerifierError for a ``$ref`` JSON pointer into the schema itself that points
    at nothing. Only checked when no nested ``$id`` changes the base of a reference (then
    resolution is left to jsonschema, at run time)."""
    refs: list[str] = []
    stack: list[object] = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, Mapping):
            if node is not schema and "$id" in node:
                return
            if isinstance(node.get("$ref"), str):
                refs.append(node["$ref"])
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    for ref in refs:
        if ref != "#" and not ref.startswith("#/"):
            continue
        target: object = schema
        for token in filter(None, unquote(ref[1:]).split("/")):
            key = token.replace("~1", "/").replace("~0", "~")
            if isinstance(target, Mapping) and key in target:
                target = target[key]
            elif isinstance(target, list) and key.isdigit() and int(key) < len(target):
                target = target[int(key)]
            else:
                raise VerifierError(
                    f"json_schema verifier: {source} has a $ref that points at nothing: "
                    f"{excerpt(ref, 120)!r}"
                )


def _schema_is_option(check: Check) -> bool:
    return check.options.get("schema") is not None


def verify_json_schema(check: Check) -> Verdict:
    """Reward 0 unless the answer is JSON valid under the schema; then 1, or the fraction
    of ``expected`` fields whose values are equal."""
    given = check.options.get("expected")
    schema_given = check.options.get("schema") is not None
    if given is None and schema_given and isinstance(check.task.target, Mapping):
        given = dict(check.task.target)
    try:
        if given is not None and not isinstance(given, Mapping):
            raise VerifierError(
                f"json_schema verifier: options.expected must be an object, not "
                f"{type(given).__name__}"
            )
        expected = None if given is None else dict(given)
        schema, source = _schema_for(check)
        validator = None if schema is None else compiled_validator(schema, source or "schema")
    except VerifierError as exc:
        return cannot_judge(exc, got=excerpt(check.answer))
    parsed = parse_answer(check.answer)
    details: JsonObject = {
        "expected": expected,
        "schema_source": source,
        "got": excerpt(check.answer),
        "extraction": parsed.method,
    }
    metrics: dict[str, float] = {"json_valid": 0}
    if expected is not None:
        metrics.update(fields_found=0, fields_total=len(expected))
    if parsed.error is not None:
        details["parse_error"] = parsed.error
        feedback = (
            "Your answer was empty."
            if not check.answer.strip()
            else f"Your answer is not valid JSON: {parsed.error}."
        )
        return Verdict(reward=0.0, metrics=metrics, details=details, feedback=feedback)
    try:
        limit = number_option(check.options, "timeout_s", SCHEMA_REGEX_TIMEOUT_S)
        errors = [] if validator is None else _schema_errors(validator, parsed.value, limit)
    except Unresolvable as exc:
        problem = f"json_schema verifier: {source} has a $ref that cannot be resolved: {exc}"
        return cannot_judge(VerifierError(problem), got=excerpt(check.answer))
    except SchemaPatternError as exc:
        # the schema, not the answer, is at fault: a harness error, as for the regex verifier
        raise VerifierError(f"json_schema verifier: {source}: {exc}") from None
    violations = [_violation(e) for e in errors]
    details["schema_errors"] = [*violations[:_ERRORS_KEPT]]
    metrics.update(json_valid=1, schema_errors=len(errors))
    feedback = ""
    if violations:
        shown = "; ".join(f"{v['path']}: {v['message']}" for v in violations[:_ERRORS_SHOWN])
        more = len(errors) - _ERRORS_SHOWN
        suffix = f" (and {more} more)" if more > 0 else ""
        feedback = f"Your JSON does not match the required schema: {shown}{suffix}."
    reward = 0.0 if violations else 1.0
    if expected is not None:
        found, wrong = _compare_fields(parsed.value, expected)
        details["fields"] = {"matched": [*found], "mismatched": [*wrong]}
        metrics.update(fields_found=len(found), fields_total=len(expected))
        if not violations and expected:
            reward = len(found) / len(expected)
            if wrong:
                names = ", ".join(wrong[:5]) + (", …" if len(wrong) > 5 else "")
                feedback = (
                    f"{len(wrong)} of {len(expected)} expected fields in your JSON are "
                    f"missing or have the wrong value: {names}."
                )
    return Verdict(reward=reward, metrics=metrics, details=details, feedback=feedback)


def _schema_errors(
    validator: Validator, value: JsonValue, limit: float = SCHEMA_REGEX_TIMEOUT_S
) -> list[ValidationError]:
    """The violations (at most ``_ERRORS_COUNTED``), by path; every schema pattern matched
    on the way shares ``limit`` seconds (``schema_regex``: SchemaPatternError past it)."""
    with bounded(validator.schema, limit):
        errors = list(itertools.islice(validator.iter_errors(value), _ERRORS_COUNTED))
    return sorted(
        errors,
        key=lambda e: [(str(p), 0) if isinstance(p, str) else ("", p) for p in e.absolute_path],
    )


def _compare_fields(
    value: JsonValue, expected: Mapping[str, JsonValue]
) -> tuple[list[str], list[str]]:
    """The expected field names whose values the answer matches, and the others."""
    if not isinstance(value, Mapping):
        return [], list(expected)
    found = [k for k, want in expected.items() if k in value and _same(value[k], want)]
    return found, [k for k in expected if k not in found]


JSON_SCHEMA = FunctionVerifier(
    kind="json_schema",
    function=verify_json_schema,
    task_check=check_json_schema,
    options_schema={
        "type": "object",
        "properties": {
            "schema": {
                "type": "object",
                "description": "JSON Schema the parsed answer must satisfy; default: the "
                "task's target when the target is an object.",
            },
            "expected": {
                "type": "object",
                "description": "Fields whose values must equal the answer's; reward is the "
                "fraction that do. Default: the task's target when options.schema is set and "
                "the target is an object; else none (a schema-valid answer scores 1).",
            },
            "timeout_s": {
                "type": "number",
                "exclusiveMinimum": 0,
                "maximum": 600,
                "default": SCHEMA_REGEX_TIMEOUT_S,
                "description": "Time limit of all the schema's pattern matches on one answer "
                "together (pattern, patternProperties); past it the task is a harness error.",
            },
        },
        "additionalProperties": False,
    },
)
