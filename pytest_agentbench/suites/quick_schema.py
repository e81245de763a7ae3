"""A quick yes to "does this document match the schema?" for the common case, a valid
suite, without importing jsonschema (with ``attrs``, ``referencing`` and ``rpds`` behind
it, about a sixth of pytest's own start-up: docs/scale.md).

``quick_valid`` answers True only when the document is valid under JSON Schema 2020-12
as jsonschema's ``Draft202012Validator`` judges it (no format assertion); it answers
False when the document is not valid, or when the schema uses a keyword this check does
not know (then jsonschema decides, as it always does when something is wrong, and its
errors make the messages: suites/validate.py). tests/suites/test_quick_schema.py holds
the two to the same answer on the package's schema over seeded broken suites.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping

from pytest_agentbench.core.jsontypes import JsonValue

#: keywords that assert nothing (2020-12 leaves ``format`` an annotation by default)
_ANNOTATIONS = frozenset(
    {
        "$schema",
        "$id",
        "$defs",
        "$comment",
        "title",
        "description",
        "default",
        "examples",
        "deprecated",
        "readOnly",
        "writeOnly",
        "format",
    }
)


#: one keyword's check: its value, the instance, the schema holding it, the root schema
Check = Callable[[object, object, object, Mapping[str, JsonValue]], bool]


class _Unknown(Exception):
    """The schema uses a keyword (or a form of one) this check does not evaluate."""


def quick_valid(schema: Mapping[str, JsonValue], instance: object) -> bool:
    """Whether ``instance`` is valid against ``schema`` (see the module docstring)."""
    try:
        return _valid(schema, instance, schema)
    except _Unknown:
        return False


def _valid(schema: object, instance: object, root: Mapping[str, JsonValue]) -> bool:
    if schema is True:
        return True
    if schema is False:
        return False
    if not isinstance(schema, dict):
        raise _Unknown
    for keyword, value in schema.items():
        check = _KEYWORDS.get(keyword)
        if check is not None:
            if not check(value, instance, schema, root):
                return False
        elif keyword not in _ANNOTATIONS and keyword not in _PAIRED:
            raise _Unknown
    return True


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


_TYPES: dict[str, Callable[[object], bool]] = {
    "null": lambda v: v is None,
    "boolean": lambda v: isinstance(v, bool),
    "integer": lambda v: (
        (isinstance(v, int) and not isinstance(v, bool))
        or (isinstance(v, float) and v.is_integer())
    ),
    "number": _is_number,
    "string": lambda v: isinstance(v, str),
    "array": lambda v: isinstance(v, list),
    "object": lambda v: isinstance(v, dict),
}


def _type(value: object, instance: object, schema: object, root: object) -> bool:
    names = value if isinstance(value, list) else [value]
    for name in names:
        test = _TYPES.get(name) if isinstance(name, str) else None
        if test is None:
            raise _Unknown
        if test(instance):
            return True
    return False


def equal(one: object, other: object) -> bool:
    """JSON equality as jsonschema sees it: ``true`` is not ``1``, ``1`` is ``1.0``."""
    if isinstance(one, bool) or isinstance(other, bool):
        return isinstance(one, bool) and isinstance(other, bool) and one == other
    if isinstance(one, list) or isinstance(other, list):
        return (
            isinstance(one, list)
            and isinstance(other, list)
            and len(one) == len(other)
            and all(map(equal, one, other))
        )
    if isinstance(one, dict) or isinstance(other, dict):
        return (
            isinstance(one, dict)
            and isinstance(other, dict)
            and one.keys() == other.keys()
            and all(equal(one[key], other[key]) for key in one)
        )
    if isinstance(one, str) != isinstance(other, str):
        return False
    return bool(one == other)


def _bound(test: str) -> Check:
    def check(
        value: object, instance: object, schema: object, root: Mapping[str, JsonValue]
    ) -> bool:
        if not _is_number(value):
            raise _Unknown
        if not _is_number(instance):
            return True
        got, limit = instance, value
        assert isinstance(got, int | float) and isinstance(limit, int | float)
        if test == "minimum":
            return got >= limit
        if test == "maximum":
            return got <= limit
        if test == "exclusiveMinimum":
            return got > limit
        return got < limit

    return check


def _count(kind: type[str | list[object] | dict[str, object]], most: bool) -> Check:
    def check(
        value: object, instance: object, schema: object, root: Mapping[str, JsonValue]
    ) -> bool:
        if not isinstance(value, int) or isinstance(value, bool):
            raise _Unknown
        if not isinstance(instance, kind):
            return True
        size = len(instance)
        return size <= value if most else size >= value

    return check


@functools.cache
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def _pattern(value: object, instance: object, schema: object, root: object) -> bool:
    if not isinstance(value, str):
        raise _Unknown
    return not isinstance(instance, str) or _compiled(value).search(instance) is not None


def _enum(value: object, instance: object, schema: object, root: object) -> bool:
    if not isinstance(value, list):
        raise _Unknown
    return any(equal(instance, choice) for choice in value)


def _const(value: object, instance: object, schema: object, root: object) -> bool:
    return equal(instance, value)


def _unique(value: object, instance: object, schema: object, root: object) -> bool:
    if not isinstance(value, bool):
        raise _Unknown
    if not value or not isinstance(instance, list):
        return True
    return not any(
        equal(instance[i], instance[j])
        for i in range(len(instance))
        for j in range(i + 1, len(instance))
    )


def _items(value: object, instance: object, schema: object, root: Mapping[str, JsonValue]) -> bool:
    if not isinstance(value, dict | bool):
        raise _Unknown  # (the older array form)
    if "prefixItems" in schema:  # type: ignore[operator]
        raise _Unknown
    return not isinstance(instance, list) or all(_valid(value, item, root) for item in instance)


def _properties(
    value: object, instance: object, schema: object, root: Mapping[str, JsonValue]
) -> bool:
    if not isinstance(value, dict):
        raise _Unknown
    if not isinstance(instance, dict):
        return True
    return all(_valid(value[key], item, root) for key, item in instance.items() if key in value)


def _additional(
    value: object, instance: object, schema: object, root: Mapping[str, JsonValue]
) -> bool:
    assert isinstance(schema, dict)
    if "patternProperties" in schema:
        raise _Unknown
    if not isinstance(instance, dict):
        return True
    known = schema.get("properties", {})
    if not isinstance(known, dict):
        raise _Unknown
    return all(_valid(value, item, root) for key, item in instance.items() if key not in known)


def _required(value: object, instance: object, schema: object, root: object) -> bool:
    if not isinstance(value, list):
        raise _Unknown
    return not isinstance(instance, dict) or all(key in instance for key in value)


def _dependent_required(value: object, instance: object, schema: object, root: object) -> bool:
    if not isinstance(value, dict):
        raise _Unknown
    if not isinstance(instance, dict):
        return True
    for key, needed in value.items():
        if not isinstance(needed, list):
            raise _Unknown
        if key in instance and not all(other in instance for other in needed):
            return False
    return True


def _property_names(
    value: object, instance: object, schema: object, root: Mapping[str, JsonValue]
) -> bool:
    return not isinstance(instance, dict) or all(_valid(value, key, root) for key in instance)


def _ref(value: object, instance: object, schema: object, root: Mapping[str, JsonValue]) -> bool:
    return _valid(_target(value, root), instance, root)


def _target(ref: object, root: Mapping[str, JsonValue]) -> object:
    if not isinstance(ref, str) or not ref.startswith("#"):
        raise _Unknown
    found: object = root
    for part in ref[1:].split("/")[1:] if ref != "#" else []:
        part = part.replace("~1", "/").replace("~0", "~")
        if not isinstance(found, dict) or part not in found or "%" in part:
            raise _Unknown
        found = found[part]
    return found


def _all_of(value: object, instance: object, schema: object, root: Mapping[str, JsonValue]) -> bool:
    if not isinstance(value, list):
        raise _Unknown
    return all(_valid(part, instance, root) for part in value)


def _any_of(value: object, instance: object, schema: object, root: Mapping[str, JsonValue]) -> bool:
    if not isinstance(value, list):
        raise _Unknown
    return any(_valid(part, instance, root) for part in value)


def _one_of(value: object, instance: object, schema: object, root: Mapping[str, JsonValue]) -> bool:
    if not isinstance(value, list):
        raise _Unknown
    return sum(1 for part in value if _valid(part, instance, root)) == 1


def _not(value: object, instance: object, schema: object, root: Mapping[str, JsonValue]) -> bool:
    return not _valid(value, instance, root)


def _if(value: object, instance: object, schema: object, root: Mapping[str, JsonValue]) -> bool:
    assert isinstance(schema, dict)
    branch = "then" if _valid(value, instance, root) else "else"
    return branch not in schema or _valid(schema[branch], instance, root)


_KEYWORDS: dict[str, Check] = {
    "type": _type,
    "enum": _enum,
    "const": _const,
    "minimum": _bound("minimum"),
    "maximum": _bound("maximum"),
    "exclusiveMinimum": _bound("exclusiveMinimum"),
    "exclusiveMaximum": _bound("exclusiveMaximum"),
    "minLength": _count(str, most=False),
    "maxLength": _count(str, most=True),
    "minItems": _count(list, most=False),
    "maxItems": _count(list, most=True),
    "minProperties": _count(dict, most=False),
    "maxProperties": _count(dict, most=True),
    "pattern": _pattern,
    "uniqueItems": _unique,
    "items": _items,
    "properties": _properties,
    "additionalProperties": _additional,
    "required": _required,
    "dependentRequired": _dependent_required,
    "propertyNames": _property_names,
    "$ref": _ref,
    "allOf": _all_of,
    "anyOf": _any_of,
    "oneOf": _one_of,
    "not": _not,
    "if": _if,
}
#: read by the keyword they belong to (``if``)
_PAIRED = frozenset({"then", "else"})
