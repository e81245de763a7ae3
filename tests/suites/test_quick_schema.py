"""The quick schema check (suites/quick_schema.py) gives jsonschema's answer: on the
package's suite schema over every example suite and thousands of seeded broken suites
(the fuzz generator's), on the schema of a dataset record, and on each keyword's edge
cases; a keyword it does not know sends the document to jsonschema. A plain run's suite
is then never handed to jsonschema (tests/package/test_lazy_imports.py)."""

from __future__ import annotations

import copy
import json
import random
import sys
import tomllib
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from pytest_agentbench.suites.quick_schema import quick_valid
from pytest_agentbench.suites.validate import record_schema, suite_schema

sys.path.insert(0, str(Path(__file__).parents[1]))  # the helpers (*_support.py)
import suite_fuzz_support as suite_fuzz

EXAMPLES = Path(__file__).parents[2] / "example_suites"


def _document(path: Path) -> Any:
    if path.suffix == ".toml":
        return tomllib.loads(path.read_text())
    return json.loads(path.read_text())


@pytest.mark.parametrize(
    "path",
    sorted(p for p in EXAMPLES.iterdir() if p.suffix in (".toml", ".json")),
    ids=lambda p: p.name,
)
def test_every_example_suite_is_valid_to_both(path: Path) -> None:
    document = _document(path)
    assert jsonschema.Draft202012Validator(suite_schema()).is_valid(document)
    assert quick_valid(suite_schema(), document)


def test_thousands_of_broken_suites_get_jsonschema_s_answer() -> None:
    """Seeded: each case is one to four of the fuzz generator's changes to a valid suite
    (wrong types at any key, missing and unknown keys, bad verifiers, replies, templates,
    duplicated tasks), checked against the whole-suite schema and, for each task, the
    dataset record's schema. Both answers are counted, so the cases cannot all be one
    kind."""
    suite = jsonschema.Draft202012Validator(suite_schema())
    record = jsonschema.Draft202012Validator(record_schema())
    rng = random.Random(20261206)
    counts = {True: 0, False: 0}
    for number in range(3000):
        document: Any = copy.deepcopy(rng.choice(suite_fuzz.BASES))
        steps: list[str] = []
        for _ in range(rng.randint(1, 4)):
            document = suite_fuzz._mutate_tree(document, rng, steps)
        expected = suite.is_valid(document)
        assert quick_valid(suite_schema(), document) == expected, (number, steps)
        counts[expected] += 1
        tasks = document.get("task") if isinstance(document, dict) else None
        for task in tasks if isinstance(tasks, list) else []:
            assert quick_valid(record_schema(), task) == record.is_valid(task), (number, steps)
    assert min(counts.values()) > 200, counts


@pytest.mark.parametrize(
    ("schema", "instance", "valid"),
    [
        ({"enum": [1, "a"]}, True, False),  # true is not 1
        ({"const": 1}, 1.0, True),  # 1 is 1.0
        ({"const": [1, {"a": False}]}, [1, {"a": 0}], False),
        ({"type": "integer"}, 2.0, True),
        ({"type": "integer"}, True, False),
        ({"type": "number"}, False, False),
        ({"type": ["string", "null"]}, None, True),
        ({"minimum": 1}, True, True),  # bounds apply to numbers only
        ({"exclusiveMinimum": 0}, 0, False),
        ({"maxLength": 2}, "ab", True),
        ({"maxLength": 2}, "abc", False),
        ({"minItems": 1, "uniqueItems": True}, [1, 1.0], False),
        ({"uniqueItems": True}, [1, True], True),
        ({"pattern": "b"}, "abc", True),  # searched, not matched from the start
        ({"oneOf": [{"type": "integer"}, {"type": "number"}]}, 1, False),
        ({"oneOf": [{"type": "integer"}, {"type": "string"}]}, 1, True),
        ({"if": {"const": 1}, "then": {"type": "string"}}, 1, False),
        ({"if": {"const": 1}, "else": {"type": "string"}}, 2, False),
        ({"then": {"type": "string"}}, 1, True),  # then without if: nothing
        ({"dependentRequired": {"a": ["b"]}}, {"a": 1}, False),
        ({"propertyNames": {"pattern": "^x"}}, {"y": 1}, False),
        ({"not": {"type": "object"}}, {}, False),
        ({"additionalProperties": False, "properties": {"a": {}}}, {"a": 1, "b": 2}, False),
        ({"required": ["a"]}, [], True),  # an array has no properties to require
        ({"$ref": "#/$defs/x", "$defs": {"x": {"type": "string"}}}, 1, False),
        ({"items": {"type": "string"}}, ["a", 1], False),
        ({"format": "email"}, "not an address", True),  # an annotation in 2020-12
    ],
)
def test_each_keyword_is_judged_as_jsonschema_judges_it(
    schema: dict[str, Any], instance: object, valid: bool
) -> None:
    assert jsonschema.Draft202012Validator(schema).is_valid(instance) == valid
    assert quick_valid(schema, instance) == valid


@pytest.mark.parametrize(
    "schema",
    [
        {"patternProperties": {"^a": {"type": "string"}}},
        {"contains": {"type": "string"}},
        {"$ref": "other.json#/x"},
        {"items": [{"type": "string"}]},
        {"type": "strng"},
    ],
    ids=["patternProperties", "contains", "remote-ref", "items-array", "unknown-type"],
)
def test_a_keyword_it_does_not_know_leaves_the_answer_to_jsonschema(
    schema: dict[str, Any],
) -> None:
    assert not quick_valid(schema, {"a": "x"})
