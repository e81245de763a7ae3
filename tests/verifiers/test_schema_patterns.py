"""A json_schema verifier's own patterns cannot hang the run: ``pattern``,
``patternProperties`` (and the keys ``additionalProperties`` / ``unevaluatedProperties``
sort with them) run on the bounded regex engine, all matches of one answer sharing the
verifier's ``timeout_s``; past it the task is a verifier (harness) error naming the
pattern. Each test runs under a pytest-timeout guard, so on an engine without a bound it
fails instead of hanging (Python's re would run for hours on these)."""

from __future__ import annotations

import json

import pytest
from verifiers_support import judge

from pytest_agentbench.errors import VerifierError

#: Backtracks catastrophically on any text without "bz", on re and on regex alike.
CATASTROPHIC = "(.*){1,32000}[bc]z"
TEXT = "The quick brown fox jumps over the lazy dog while seven wizards judge boxing!"

SCHEMAS = {
    "pattern": (
        {"type": "object", "properties": {"name": {"type": "string", "pattern": CATASTROPHIC}}},
        {"name": TEXT},
    ),
    "patternProperties": (
        {"type": "object", "patternProperties": {CATASTROPHIC: {"type": "string"}}},
        {TEXT: "x"},
    ),
    "additionalProperties": (
        {
            "type": "object",
            "properties": {"id": {"type": "integer"}},
            "patternProperties": {CATASTROPHIC: True},
            "additionalProperties": False,
        },
        {TEXT: 1},
    ),
    "unevaluatedProperties": (
        {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "allOf": [{"patternProperties": {CATASTROPHIC: True}}],
            "unevaluatedProperties": False,
        },
        {TEXT: 1},
    ),
    "propertyNames": (
        {"type": "object", "propertyNames": {"pattern": CATASTROPHIC}},
        {TEXT: 1},
    ),
    "draft-07 pattern": (
        {
            "$schema": "http://json-schema.org/draft-07/schema#",
            "items": {"type": "string", "pattern": CATASTROPHIC},
        },
        [TEXT],
    ),
}


@pytest.mark.slow
@pytest.mark.timeout(60)
@pytest.mark.parametrize("keyword", list(SCHEMAS))
def test_a_catastrophic_schema_pattern_stops_at_its_limit(keyword: str) -> None:
    schema, answer = SCHEMAS[keyword]
    with pytest.raises(VerifierError) as info:
        judge("json_schema", json.dumps(answer), schema=schema, timeout_s=0.2)
    message = str(info.value)
    assert message.startswith(
        f"json_schema verifier: options.schema: the schema's pattern {CATASTROPHIC!r} ran "
        "past the 0.2 s limit of the schema's patterns on a 77-character string of the "
        "answer: it backtracks catastrophically; simplify it"
    ), message


@pytest.mark.parametrize("keyword", list(SCHEMAS))
def test_the_bounded_patterns_judge_as_jsonschema_does(keyword: str) -> None:
    """The same keywords with an ordinary pattern give jsonschema's own verdicts."""
    import jsonschema

    plain = json.loads(json.dumps(SCHEMAS[keyword][0]).replace(json.dumps(CATASTROPHIC), '"^x"'))
    for answer in (
        {"name": "xy", "id": 2},
        {"name": "yx"},
        {"xa": "s", "id": 1},
        {"ya": 1},
        ["x"],
        ["y"],
    ):
        cls = jsonschema.validators.validator_for(plain)
        expected = not any(cls(plain).iter_errors(answer))
        verdict = judge("json_schema", json.dumps(answer), schema=plain)
        assert verdict.reward == float(expected), (keyword, answer, verdict.details)
