"""A sure "valid" for a JSON Schema, without jsonschema.

Loading checks every suite file against the shipped schema (suites/suite.schema.json) and
each task's verifier options against the verifier's ``options_schema``. jsonschema (with
``referencing``, ``rpds`` and ``attrs``) costs more to import than the rest of a one-task
run's start-up, and a valid suite needs none of what it is there for: the problems,
each told where and why. :class:`QuickSchema` answers only "surely valid": True when
the instance satisfies the schema as jsonschema's Draft 2020-12 validator reads it;
False for a violation and for anything it does not know (a keyword, another draft, a
reference outside the document, a value JSON cannot hold), and the caller then asks
jsonschema, whose errors make the messages (suites/validate.py).

So it must never accept what jsonschema refuses: each keyword it knows is read as
jsonschema reads it (``type`` with ``bool`` apart from the numbers, ``pattern`` with
``re.search``, ``enum`` and ``const`` with strings only, ``uniqueItems`` over strings
only), and a schema with a keyword outside that set, or one that is not well formed
(what ``check_schema`` would refuse: a misspelt type, a pattern that does not compile),
is never judged here at all.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping

DRAFT_2020_12 = "https://json-schema.org/draft/2020-12/schema"
#: Keywords that say nothing of validity (what ``check_schema`` asks of their values).
_ANNOTATIONS: dict[str, tuple[type, ...]] = {
    "title": (str,),
    "description": (str,),
    "$comment": (str,),
    "deprecated": (bool,),
    "readOnly": (bool,),
    "writeOnly": (bool,),
    "examples": (list,),
    "default": (object,),
}
_TYPES = ("object", "array", "string", "integer", "number", "boolean", "null")
_SUBSCHEMA = ("additionalProperties", "items", "propertyNames", "not", "if", "then", "else")
_SCHEMA_LISTS = ("allOf", "anyOf", "oneOf")
_NUMBER_BOUNDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")
_COUNTS = ("minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties")
_JSON_VALUES = (str, int, float, bool, type(None), dict, list)


class _Unsure(Exception):
    """Something the quick check does not judge: jsonschema will."""


class QuickSchema:
    """One schema, checked once for whether the quick check may judge it at all."""

    def __init__(self, schema: object) -> None:
        self.schema = schema
        self._patterns: dict[str, re.Pattern[str]] = {}
        try:
            self.known = _root_known(schema) and self._well_formed(schema, root=True)
        except (_Unsure, re.error, RecursionError):
            self.known = False

    def accepts(self, instance: object) -> bool:
        """True only when ``instance`` surely satisfies the schema (else ask jsonschema)."""
        if not self.known:
            return False
        try:
            return self._valid(self.schema, instance)
        except (_Unsure, RecursionError):
            return False

    def _well_formed(self, schema: object, *, root: bool = False) -> bool:
        if isinstance(schema, bool):
            return True
        if not isinstance(schema, dict):
            return False
        for key, value in schema.items():
            if key in _ANNOTATIONS:
                if not isinstance(value, _ANNOTATIONS[key]):
                    return False
            elif key in ("$schema", "$id"):
                if not root or not isinstance(value, str):
                    return False
            elif key == "$defs" or key == "properties":
                if not isinstance(value, dict):
                    return False
                if not all(self._well_formed(one) for one in value.values()):
                    return False
            elif key in _SUBSCHEMA:
                if not self._well_formed(value):
                    return False
            elif key in _SCHEMA_LISTS:
                if not isinstance(value, list) or not value:
                    return False
                if not all(self._well_formed(one) for one in value):
                    return False
            elif not _keyword_well_formed(key, value, self._patterns):
                return False
        return True

    def _valid(self, schema: object, instance: object) -> bool:
        if isinstance(schema, bool):
            return schema
        if not isinstance(schema, dict):
            raise _Unsure
        if not isinstance(instance, _JSON_VALUES):
            raise _Unsure  # a value JSON cannot hold: the structure check reports it
        if isinstance(instance, float) and not math.isfinite(instance):
            raise _Unsure
        return all(self._keyword(key, value, schema, instance) for key, value in schema.items())

    def _keyword(
        self, key: str, value: object, schema: Mapping[str, object], instance: object
    ) -> bool:
        if key in _ANNOTATIONS or key in ("$schema", "$id", "$defs"):
            return True
        if key == "$ref":
            return self._valid(_resolve(self.schema, str(value)), instance)
        if key == "type":
            names = value if isinstance(value, list) else [value]
            return any(_is_type(instance, str(name)) for name in names)
        if key in ("enum", "const"):
            options = value if key == "enum" else [value]
            if not isinstance(options, list) or not all(isinstance(o, str) for o in options):
                raise _Unsure
            return isinstance(instance, str) and instance in options
        if key in ("allOf", "anyOf", "oneOf"):
            assert isinstance(value, list)
            passed = sum(1 for one in value if self._valid(one, instance))
            if key == "allOf":
                return passed == len(value)
            return passed >= 1 if key == "anyOf" else passed == 1
        if key == "not":
            return not self._valid(value, instance)
        if key == "if":
            then = schema.get("then" if self._valid(value, instance) else "else", True)
            return self._valid(then, instance)
        if key in ("then", "else"):
            return True  # judged with its ``if`` (alone it is ignored, as jsonschema does)
        if isinstance(instance, dict):
            return self._object_keyword(key, value, schema, instance)
        if isinstance(instance, list):
            return self._array_keyword(key, value, instance)
        if isinstance(instance, str) and key in ("minLength", "maxLength"):
            return _within(key, len(instance), value)
        if isinstance(instance, str) and key == "pattern":
            return self._patterns[str(value)].search(instance) is not None
        number = isinstance(instance, int | float) and not isinstance(instance, bool)
        if number and key in _NUMBER_BOUNDS:
            assert isinstance(instance, int | float)
            return _number_within(key, instance, value)
        return True  # a keyword of another type's instances

    def _object_keyword(
        self, key: str, value: object, schema: Mapping[str, object], instance: dict[str, object]
    ) -> bool:
        if not all(isinstance(name, str) for name in instance):
            raise _Unsure
        if key == "properties":
            assert isinstance(value, dict)
            return all(
                self._valid(value[name], item) for name, item in instance.items() if name in value
            )
        if key == "additionalProperties":
            known = schema.get("properties", {})
            assert isinstance(known, dict)
            extra = [item for name, item in instance.items() if name not in known]
            return all(self._valid(value, item) for item in extra)
        if key == "required":
            assert isinstance(value, list)
            return all(name in instance for name in value)
        if key == "dependentRequired":
            assert isinstance(value, dict)
            wanted = [needs for name, needs in value.items() if name in instance]
            return all(need in instance for needs in wanted for need in needs)
        if key == "propertyNames":
            return all(self._valid(value, name) for name in instance)
        if key in ("minProperties", "maxProperties"):
            return _within(key, len(instance), value)
        return True

    def _array_keyword(self, key: str, value: object, instance: list[object]) -> bool:
        if key == "items":
            return all(self._valid(value, item) for item in instance)
        if key in ("minItems", "maxItems"):
            return _within(key, len(instance), value)
        if key == "uniqueItems":
            if value is not True:
                return True
            texts = [item for item in instance if isinstance(item, str)]
            if len(texts) < len(instance):
                raise _Unsure
            return len(set(texts)) == len(texts)
        return True


def _root_known(schema: object) -> bool:
    """A schema read as Draft 2020-12 (what ``validator_for`` picks without a ``$schema``)."""
    if not isinstance(schema, dict):
        return isinstance(schema, bool)
    return bool(schema.get("$schema", DRAFT_2020_12) == DRAFT_2020_12)


def _keyword_well_formed(key: str, value: object, patterns: dict[str, re.Pattern[str]]) -> bool:
    """A keyword outside the subschema ones, as the 2020-12 metaschema asks; False for one
    the quick check does not know."""
    if key == "type":
        names = value if isinstance(value, list) else [value]
        unique = len({str(name) for name in names}) == len(names)
        return bool(names) and unique and all(name in _TYPES for name in names)
    if key == "enum":
        return isinstance(value, list)
    if key == "const":
        return True
    if key in _NUMBER_BOUNDS:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if key in _COUNTS:
        return isinstance(value, int) and not isinstance(value, bool) and value >= 0
    if key == "uniqueItems":
        return isinstance(value, bool)
    if key == "pattern":
        if not isinstance(value, str):
            return False
        patterns[value] = re.compile(value)  # (re.error: not well formed)
        return True
    if key == "required":
        return _names(value)
    if key == "dependentRequired":
        return isinstance(value, dict) and all(_names(needs) for needs in value.values())
    if key == "$ref":
        return isinstance(value, str) and value.startswith("#/")
    return False


def _names(value: object) -> bool:
    return (
        isinstance(value, list)
        and all(isinstance(name, str) for name in value)
        and len(set(value)) == len(value)
    )


def _resolve(root: object, ref: str) -> object:
    """The subschema a ``#/…`` JSON pointer names in the root schema."""
    found = root
    for part in ref[2:].split("/"):
        name = part.replace("~1", "/").replace("~0", "~")
        if isinstance(found, dict) and name in found:
            found = found[name]
        elif isinstance(found, list) and name.isdigit() and int(name) < len(found):
            found = found[int(name)]
        else:
            raise _Unsure
    return found


def _is_type(instance: object, name: str) -> bool:
    if name == "object":
        return isinstance(instance, dict)
    if name == "array":
        return isinstance(instance, list)
    if name == "string":
        return isinstance(instance, str)
    if name == "boolean":
        return isinstance(instance, bool)
    if name == "null":
        return instance is None
    if name == "integer":
        return isinstance(instance, int) and not isinstance(instance, bool)
    if name == "number":
        return isinstance(instance, int | float) and not isinstance(instance, bool)
    raise _Unsure


def _within(key: str, count: int, bound: object) -> bool:
    assert isinstance(bound, int)
    return count >= bound if key.startswith("min") else count <= bound


def _number_within(key: str, number: float, bound: object) -> bool:
    assert isinstance(bound, int | float)
    if key == "minimum":
        return not number < bound
    if key == "maximum":
        return not number > bound
    if key == "exclusiveMinimum":
        return not number <= bound
    return not number >= bound
