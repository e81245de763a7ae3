"""The quick schema check (suites/quick_schema.py) never passes what jsonschema refuses.

It spares a valid suite the import of jsonschema; a suite it cannot pass goes to
jsonschema for its problems, so the one property that matters is soundness: every
instance it accepts, jsonschema's Draft 2020-12 validator accepts too. Checked here
value by value: valid documents (plain, agents of every kind, an environment, sampling,
a manifest), each slot of each replaced by probe values around every keyword's edge
(empty strings, bounds, wrong types, duplicates, patterns), and every built-in verifier's
options the same way. Where the probes are plain JSON the two agree exactly, so the
quick check is not merely cautious; the cases it leaves to jsonschema are named.
"""

from __future__ import annotations

import copy
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest

sys.path.insert(0, str(Path(__file__).parents[1]))  # the helpers (*_support.py)
import suite_fuzz_support as suite_fuzz

from pytest_agentbench.suites.quick_schema import QuickSchema
from pytest_agentbench.suites.validate import options_check, suite_schema
from pytest_agentbench.verifiers.builtin import BUILTIN_VERIFIERS

DOCUMENTS: tuple[dict[str, Any], ...] = (
    {
        "suite": {
            "name": "plain",
            "verifier": {"kind": "exact"},
            "repairs": 1,
            "repair_mode": "stateless",
            "feedback": "counts",
            "timeout_s": 60,
            "max_tokens": 256,
            "pass_threshold": 0.5,
            "min_score": 0.5,
            "epochs": 3,
            "reducer": "pass@2",
            "marks": ["slow"],
            "sampling": {"temperature": 0.5, "stop": ["x"], "extra_body": {"a": 1}},
        },
        "task": [
            {"id": "one", "input": "Say a.", "target": "a", "scripted": ["a"]},
            {"id": "two", "input": "q", "target": 4, "vars": {"u": "kg"}, "choices": ["a"]},
        ],
    },
    {
        "suite": {
            "name": "agents",
            "mode": "agent",
            "max_turns": 5,
            "tools": ["bash", "read_file"],
            "max_tool_output": 1000,
            "files": {"src/a.py": "x = 1\n"},
            "environment": {"image": "debian", "workdir": "/w", "cpus": 1, "memory_mb": 64},
            "agent": {"kind": "command", "argv": ["run", "{prompt}"], "prompt": "stdin"},
        },
        "task": [
            {"id": "py", "input": "q", "agent": {"kind": "python", "function": "m:f"}},
            {"id": "acp", "input": "q", "agent": {"kind": "acp", "argv": ["a"]}},
            {"id": "env", "input": "q", "environment": "debian:bookworm"},
        ],
    },
    {
        "suite": {
            "name": "mapped",
            "dataset": "data.jsonl",
            "columns": ["q", "a"],
            "fields": {"id": "n", "input": {"template": "{q}"}, "target": "a"},
        }
    },
)
#: Values tried in every slot: each keyword's edges and the wrong types.
PROBES: tuple[Any, ...] = (
    "",
    "x",
    "/abs",
    "m:f",
    "pass@0",
    "pass@12",
    "stdin",
    "command",
    0,
    -1,
    1,
    3,
    0.5,
    2.5,
    10**20,
    True,
    False,
    None,
    [],
    ["x"],
    ["x", "x"],
    [""],
    [1],
    {},
    {"kind": "command"},
    {"kind": "python"},
    {"kind": "nope"},
    {"unknown": 1},
)


def _variants(document: Any) -> Iterator[Any]:
    """The document, then each slot replaced by each probe, and each table given an
    unknown key."""
    yield document
    for parts in suite_fuzz._slots(document):
        if not parts:
            continue
        for probe in PROBES:
            changed = copy.deepcopy(document)
            parent = changed
            for part in parts[:-1]:
                parent = parent[part]
            parent[parts[-1]] = copy.deepcopy(probe)
            yield changed
        changed = copy.deepcopy(document)
        target = changed
        for part in parts:
            target = target[part]
        if isinstance(target, dict):
            target["zz_unknown"] = 1
            yield changed


def _tally(schema: dict[str, Any], instances: Iterator[Any]) -> dict[str, int]:
    quick = QuickSchema(schema)
    assert quick.known, "the quick check judges this schema"
    validator = jsonschema.Draft202012Validator(schema)
    tally = {"both accept": 0, "both refuse": 0}
    for instance in instances:
        accepted, valid = quick.accepts(instance), validator.is_valid(instance)
        assert not (accepted and not valid), f"the quick check passed an invalid {instance!r}"
        assert accepted == valid, f"the quick check left a valid plain {instance!r} unjudged"
        tally["both accept" if valid else "both refuse"] += 1
    return tally


def test_the_quick_check_agrees_with_jsonschema_on_suites_probed_at_every_slot() -> None:
    schema = suite_schema()
    for document in DOCUMENTS:
        assert jsonschema.Draft202012Validator(schema).is_valid(document)
    tally = _tally(schema, (v for d in DOCUMENTS for v in _variants(d)))
    assert tally["both accept"] > 200 and tally["both refuse"] > 1000, tally


@pytest.mark.parametrize("verifier", BUILTIN_VERIFIERS, ids=lambda v: v.kind)
def test_the_quick_check_agrees_with_jsonschema_on_each_verifiers_options(verifier: Any) -> None:
    schema = dict(verifier.options_schema)
    names = [*schema.get("properties", {}), "zz_unknown"]
    options = [{}] + [{name: probe} for name in names for probe in PROBES]
    tally = _tally(schema, iter(options))
    assert tally["both accept"] >= 1, tally


def test_what_the_quick_check_leaves_to_jsonschema() -> None:
    """Valid, yet not passed here: an integral float for an integer, a value JSON cannot
    hold, an unknown keyword or another draft (the whole schema is then left alone), a
    broken schema (its problem is jsonschema's to tell)."""
    assert not QuickSchema({"type": "integer"}).accepts(2.0)
    assert jsonschema.Draft202012Validator({"type": "integer"}).is_valid(2.0)
    assert not QuickSchema({"type": "string"}).accepts(b"x")
    assert not QuickSchema({"type": "string", "format": "date"}).known
    assert not QuickSchema({"$schema": "http://json-schema.org/draft-07/schema#"}).known
    assert not QuickSchema({"properties": {"a": {"type": "strnig"}}}).known
    assert not QuickSchema({"pattern": "("}).known
    broken = options_check("broken", {"properties": {"a": {"type": "strnig"}}})
    (problem,) = broken.problems({})
    assert "options_schema is invalid" in problem[1]


KEYWORD_SCHEMAS: tuple[dict[str, Any], ...] = (
    {"oneOf": [{"type": "string"}, {"minLength": 1}]},
    {"anyOf": [{"type": "integer"}, {"enum": ["a"]}]},
    {"not": {"const": "a"}},
    {"if": {"type": "string"}, "then": {"minLength": 2}, "else": {"type": "integer"}},
    {"dependentRequired": {"a": ["b"]}, "propertyNames": {"pattern": "^[ab]$"}},
    {"$defs": {"n": {"exclusiveMaximum": 3}}, "items": {"$ref": "#/$defs/n"}, "maxItems": 2},
)


@pytest.mark.parametrize("schema", KEYWORD_SCHEMAS)
def test_the_quick_check_agrees_with_jsonschema_keyword_by_keyword(schema: dict[str, Any]) -> None:
    """The keywords the shipped schemas use in one way only (a oneOf whose branches
    never overlap), each where the way it is read shows."""
    tally = _tally(schema, iter((*PROBES, {"a": 1}, {"a": 1, "b": 2}, [1, 2], [4], "ab", "a")))
    assert tally["both accept"] >= 1 and tally["both refuse"] >= 1, tally
