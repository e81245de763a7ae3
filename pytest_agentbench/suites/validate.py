"""Checking the parts of a suite, each mistake turned into readable text.

A problem is a ``(path, text)`` pair: ``path`` is a tuple of keys and indexes, ``text``
completes a sentence whose subject is that path (``must be an integer; got string "2"``).
The loader decides which task a problem concerns and prints it. The readers raise
ValueError with a reason a user can act on; nothing else here raises for bad input.
A task's prompt (its template checked and rendered) is ``template.py``'s.

A document or a verifier's options are checked by a :class:`SchemaCheck`: the quick check
(quick_schema.py) passes what surely satisfies the schema, and jsonschema, imported then,
finds the problems of the rest; a valid suite never imports it.
"""

from __future__ import annotations

import difflib
import functools
import json
import math
import re
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from importlib import resources
from typing import TYPE_CHECKING

from pytest_agentbench.core.jsontypes import JsonObject, JsonValue
from pytest_agentbench.suites.quick_schema import QuickSchema

if TYPE_CHECKING:
    from jsonschema.exceptions import ValidationError
    from jsonschema.protocols import Validator

Parts = tuple[str | int, ...]
#: Judges one scripted reply, given the reply and its JSON path; raises ValueError.
ReplyCheck = Callable[[JsonValue, str], None]

#: Template fields every task defines itself; vars may not take these names.
RESERVED_FIELDS = ("input", "choices", "target")
MAX_ID_LENGTH = 200
_JSON_TYPE = {
    type(None): "null",
    bool: "boolean",
    int: "integer",
    float: "number",
    str: "string",
    list: "array",
    dict: "object",
}
_A_TYPE = {
    "boolean": "a boolean",
    "integer": "an integer",
    "number": "a number",
    "string": "a string",
    "array": "an array",
}
_BOUNDS = {
    "minimum": "must be at least {expected}; got {got}",
    "maximum": "must be at most {expected}; got {got}",
    "exclusiveMinimum": "must be greater than {expected}; got {got}",
    "exclusiveMaximum": "must be less than {expected}; got {got}",
    "minLength": "must be at least {expected} characters long; got {got}",
    "maxLength": "must be at most {expected} characters long; got {got}",
    "minItems": "must have at least {expected} items; got {got}",
    "maxItems": "must have at most {expected} items; got {got}",
}
_NOT_A_STRING_KEY = "has a key that is not a string"
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@functools.cache
def suite_schema() -> JsonObject:
    """The JSON Schema shipped with the package (``suites/suite.schema.json``)."""
    text = resources.files(__package__).joinpath("suite.schema.json").read_text("utf-8")
    schema: JsonObject = json.loads(text)
    return schema


class SchemaCheck:
    """A JSON Schema's check: an instance the quick check surely accepts has no problem;
    the rest are judged by jsonschema's validator, made (and jsonschema imported) on the
    first such instance. ``make`` builds that validator; a ValueError from it (a broken
    options schema) is the one problem of every instance the quick check cannot pass."""

    def __init__(self, schema: Mapping[str, object], make: Callable[[], Validator]) -> None:
        self.quick = QuickSchema(schema)
        self._make = make
        self._validator: Validator | str | None = None

    def problems(
        self, instance: object, object_word: str = "an object", *, quick: bool = True
    ) -> list[tuple[Parts, str]]:
        """Every schema violation in ``instance`` (schema_problems); ``quick`` False skips
        the quick check (an instance that holds values JSON cannot)."""
        if quick and self.quick.accepts(instance):
            return []
        if self._validator is None:
            try:
                self._validator = self._make()
            except ValueError as exc:
                self._validator = str(exc)
        if isinstance(self._validator, str):
            return [((), self._validator)]
        return schema_problems(self._validator, instance, object_word)


def _draft_2020_12(schema: Mapping[str, object]) -> Callable[[], Validator]:
    def make() -> Validator:
        import jsonschema

        validator: Validator = jsonschema.Draft202012Validator(schema)
        return validator

    return make


@functools.cache
def document_check() -> SchemaCheck:
    """The check of a whole suite file (its task list under ``task``)."""
    return SchemaCheck(suite_schema(), _draft_2020_12(suite_schema()))


@functools.cache
def record_check() -> SchemaCheck:
    """The check of one task made from a dataset record (``input`` checked apart)."""
    defs = suite_schema()["$defs"]
    task = defs.get("task") if isinstance(defs, dict) else None
    if not isinstance(defs, dict) or not isinstance(task, dict):
        raise TypeError("suite.schema.json has no $defs.task object")  # a packaging bug
    task = {key: value for key, value in task.items() if key != "required"}
    schema = {**task, "$defs": defs}
    return SchemaCheck(schema, _draft_2020_12(schema))


@functools.cache
def agent_validator() -> Validator:
    """A validator for one ``agent`` table (a Harbor task's ``[metadata.agentbench.agent]``)."""
    import jsonschema

    defs = suite_schema()["$defs"]
    validator: Validator = jsonschema.Draft202012Validator({"$ref": "#/$defs/agent", "$defs": defs})
    return validator


def options_check(kind: str, schema: Mapping[str, object]) -> SchemaCheck:
    """The check of a verifier's options against its ``options_schema``, read in the draft
    it declares (2020-12 when it declares none); a broken schema is its one problem."""

    def make() -> Validator:
        import jsonschema

        cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
        try:
            cls.check_schema(schema)
        except jsonschema.SchemaError as exc:
            raise ValueError(
                f"cannot be checked: the {show(kind)} verifier's options_schema is invalid"
                f" ({show(exc.message, 120)}); this is a bug in the plugin that provides it"
            ) from None
        validator: Validator = cls(schema)
        return validator

    return SchemaCheck(schema, make)


def clean(bad: frozenset[Parts] | set[Parts], parts: Parts) -> bool:
    """True when no problem was found at or below ``parts``."""
    return not any(found[: len(parts)] == parts for found in bad)


def reserved_name(key: str) -> str:
    """The problem of a var named like a task key."""
    return f"is a reserved name (the task's own {key}); rename the var"


def reply_problem(
    check: ReplyCheck | None, reply: JsonValue, path: str, object_word: str
) -> str | None:
    """Why a scripted reply at ``path`` is refused, or None: ``check`` raises ValueError
    to refuse it; without one, a reply must be a string or a table."""
    if check is None:
        if isinstance(reply, str | dict):
            return None
        return f"must be a string or {object_word}; got {type_name(reply)} {show(reply)}"
    try:
        check(reply, path)
    except ValueError as exc:
        message = str(exc).removeprefix(path).lstrip(" :") or "no reason given"
        return f"is not a valid scripted reply: {message}"
    except Exception as exc:
        return f"could not be checked as a scripted reply ({type(exc).__name__}: {exc})"
    return None


def problem_lines(
    problems: Sequence[tuple[int | None, str, str]],
    label: Callable[[int], str],
    lines: Mapping[int, int],
    dataset: str,
    limit: int,
) -> list[str]:
    """One line per distinct ``(task index or None, path, text)`` problem, suite problems
    first, then task by task (``label`` names a task); the same problem in several tasks
    (a suite template, a dataset field) is one line, naming the dataset ``lines`` when
    every task came from one. At most ``limit`` lines, then a count of the rest."""
    groups: dict[tuple[str, str], list[int]] = {}
    for index, path, text in problems:
        groups.setdefault((path, text), []).append(-1 if index is None else index)
    shown = []
    for (path, text), indexes in sorted(groups.items(), key=lambda group: group[1][0]):
        tasks = [i for i in dict.fromkeys(indexes) if i >= 0]
        if len(tasks) == 1:
            who = label(tasks[0])
        elif tasks and all(i in lines for i in tasks):
            who = f"{dataset} lines {some([lines[i] for i in tasks])}"
        else:
            who = f"tasks {some([i + 1 for i in tasks])}" if tasks else ""
        subject = f"{path} {text}" if path else text
        shown.append(f"{who}: {subject}" if who else subject)
    if len(shown) > limit:
        shown[limit:] = [f"… and {len(shown) - limit} more problems"]
    return shown


def type_name(value: object) -> str:
    """The JSON name of a value's type (``string``, ``object``…), else the Python one."""
    return _JSON_TYPE.get(type(value), type(value).__name__)


def show(value: object, limit: int = 60) -> str:
    """A short one-line rendering of a value for a message (JSON when possible)."""
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def json_path(parts: Parts) -> str:
    """``("task", 2, "verifier", "kind")`` → ``$.task[2].verifier.kind``."""
    out = ["$"]
    for part in parts:
        if isinstance(part, int):
            out.append(f"[{part}]")
        elif _NAME.fullmatch(part):
            out.append(f".{part}")
        else:
            out.append(f"[{json.dumps(part, ensure_ascii=False)}]")
    return "".join(out)


def some(items: Sequence[object], shown: int = 3) -> str:
    """``1, 2, 3 and 4 more``: a list cut short for a message."""
    head = ", ".join(str(item) for item in items[:shown])
    return f"{head} and {len(items) - shown} more" if len(items) > shown else head


def structure_problems(
    data: object, check: SchemaCheck, object_word: str = "an object"
) -> list[tuple[Parts, str]]:
    """Values JSON cannot hold, then the schema violations they do not already explain.
    A table with a key that is not a string still has its other keys checked: the loader
    reads them when no problem is found at or below them."""
    found = _odd_values(data)
    odd = {parts for parts, text in found if not text.startswith(_NOT_A_STRING_KEY)}
    for parts, text in check.problems(data, object_word, quick=not found):
        # at or below an odd value? (its prefixes looked up: linear in the problems)
        if not any(parts[:length] in odd for length in range(len(parts) + 1)):
            found.append((parts, text))
    return found


def schema_problems(
    validator: Validator, instance: object, object_word: str = "an object"
) -> list[tuple[Parts, str]]:
    """Every schema violation in ``instance``, one problem each; ``object_word`` names
    a mapping the way the file's format does (``a table`` in TOML)."""
    from jsonschema.exceptions import best_match

    problems: list[tuple[Parts, str]] = []
    for error in validator.iter_errors(instance):
        problems.extend(_describe(best_match([error]) if error.context else error, object_word))
    return problems


def _describe(error: ValidationError, object_word: str) -> list[tuple[Parts, str]]:
    path: Parts = tuple(error.absolute_path)
    keyword, expected, value = error.validator, error.validator_value, error.instance
    if keyword == "type":
        kinds = expected if isinstance(expected, list) else [expected]
        wanted = " or ".join(
            object_word if k == "object" else _A_TYPE.get(k, str(k)) for k in kinds
        )
        got = "null" if value is None else f"{type_name(value)} {show(value)}"
        return [(path, f"must be {wanted}; got {got}")]
    if keyword == "required" and isinstance(value, dict):
        return [(path, f"is missing required key {show(k)}") for k in expected if k not in value]
    if keyword == "additionalProperties" and not error.schema.get("patternProperties"):
        known = sorted(error.schema.get("properties", {}))
        tail = f"; known keys: {', '.join(known) or '(none)'}"
        return [
            (path, f"has unknown key {show(key)}{_did_you_mean(key, known)}{tail}")
            for key in value
            if key not in known
        ]
    if keyword == "dependentRequired" and isinstance(value, dict):
        return [
            (path, f"has {show(key)} but no {show(need)}")
            for key, needs in expected.items()
            if key in value
            for need in needs
            if need not in value
        ]
    if keyword in ("minLength", "minItems") and expected == 1:
        return [(path, "must not be empty")]
    if keyword in _BOUNDS:
        size = len(value) if isinstance(value, str | list) else value
        return [(path, _BOUNDS[keyword].format(expected=expected, got=show(size)))]
    if keyword == "enum":
        return [(path, f"must be one of {', '.join(map(show, expected))}; got {show(value)}")]
    if keyword == "pattern":
        return [(path, f"must match the pattern {show(expected)}; got {show(value)}")]
    return [(path, f"is invalid: {error.message[:200]}")]


def _did_you_mean(word: object, known: Sequence[str]) -> str:
    return _closest(str(word), tuple(known))


@functools.lru_cache(maxsize=1024)
def _closest(word: str, known: tuple[str, ...]) -> str:
    """The suggestion for ``word`` (the same mistake in N tasks is worked out once)."""
    close = difflib.get_close_matches(word, known, n=1, cutoff=0.6)
    close = close or [name for name in known if name.startswith(word)][:1]
    return f" (did you mean {show(close[0])}?)" if close else ""


def unknown_name(name: str, known: Sequence[str]) -> str:
    """``must be one of a, b; got "x" (did you mean "a"?)``."""
    listed = ", ".join(known) or "(none is available)"
    return f"must be one of {listed}; got {show(name)}{_did_you_mean(name, known)}"


def _odd_values(value: object) -> list[tuple[Parts, str]]:
    """Values JSON cannot hold: TOML/YAML dates, NaN and infinities, non-string keys,
    YAML values that contain themselves. A shared YAML alias is walked once."""
    problems: list[tuple[Parts, str]] = []
    done: set[int] = set()
    open_: set[int] = set()
    stack: list[tuple[object, Parts, bool]] = [(value, (), False)]
    while stack:
        item, path, leaving = stack.pop()
        if leaving:
            open_.discard(id(item))
            done.add(id(item))
        elif isinstance(item, dict | list):
            if id(item) in open_:
                problems.append((path, "contains itself (a recursive YAML alias)"))
            elif id(item) not in done:
                open_.add(id(item))
                stack.append((item, path, True))
                pairs = list(item.items() if isinstance(item, dict) else enumerate(item))
                for key, child in reversed(pairs):
                    if isinstance(item, dict) and not isinstance(key, str):
                        problems.append((path, f"{_NOT_A_STRING_KEY}: {show(key)}"))
                    else:
                        stack.append((child, (*path, key), False))
        elif isinstance(item, float) and not math.isfinite(item):
            problems.append((path, f"must be a finite number; got {item}"))
        elif hasattr(item, "isoformat"):
            problems.append((path, f"is a date/time ({item}); quote it to make it a string"))
        elif not isinstance(item, str | int | float | type(None)):
            problems.append((path, f"is a {type_name(item)}; a suite holds JSON values only"))
    return problems


def id_problem(text: str) -> str | None:
    """Why ``text`` cannot be a task id or suite name (both end up in paths), or None."""
    if not text:
        return "must not be empty"
    if len(text) > MAX_ID_LENGTH:
        return f"must be at most {MAX_ID_LENGTH} characters long; got {len(text)}"
    if any(unicodedata.category(char) == "Cc" for char in text):
        return f"must not contain control characters; got {show(text)}"
    return None


def mark_problem(name: str) -> str | None:
    """Why ``name`` cannot be a pytest marker name (it must work in ``-m``), or None."""
    if _NAME.fullmatch(name):
        return None
    return (
        f"must be a marker name (letters, digits, _; not starting with a digit); got {show(name)}"
    )
