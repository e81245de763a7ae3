"""The number and json_schema verifiers: extraction, tolerance, schema violations and
expected fields, and the errors for tasks they cannot judge."""

from __future__ import annotations

from typing import Any

import pytest
from verifiers_support import VERIFIERS, assert_well_formed, judge, verifier_task

from pytest_agentbench.verifiers.base import Check
from pytest_agentbench.verifiers.json_schema import compiled_validator, parse_answer
from pytest_agentbench.verifiers.number import extract_number

# --- number -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("answer", "value"),
    [
        ("7", "7"),
        ("7.0", "7.0"),
        ("1,234", "1234"),
        ("-3", "-3"),
        ("−3", "-3"),
        ("$12", "12"),
        ("-$3.50", "-3.50"),
        ("12%", "12"),
        (".5 litres", "0.5"),
        ("2e10 stars", "2E+10"),
        ("The answer is 7.", "7"),
        ("The answer is 7, since 3 + 4 = 7 and 7 > 2", "7"),
        ("Answer: $1,234.50 in total", "1234.50"),
        ("3 + 4 = 7\n#### 7", "7"),
        ("#### 42\nThat took 3 steps.", "42"),
        (r"We get \boxed{42}. Check: 40 + 2.", "42"),
        (r"\boxed{1{,}234}", "1234"),
        (r"\boxed{\text{42 apples}}", "42"),
        (r"\boxed{\$-12.50}", "-12.50"),
        ("I had 3 apples, bought 4, so 7", "7"),
        ("numbers 3,5,7", "7"),
        ("5-3 is 2", "2"),
        ("The answer is 3/4 = 0.75", "0.75"),
    ],
)
def test_number_extraction(answer: str, value: str) -> None:
    token = extract_number(answer).token
    assert token is not None and token.value is not None
    assert str(token.value) == value


@pytest.mark.parametrize("answer", ["no numbers", "version v1.2.3", "x2", ""])
def test_number_extraction_finds_nothing(answer: str) -> None:
    assert extract_number(answer).token is None


@pytest.mark.parametrize(
    ("answer", "target", "options", "reward"),
    [
        ("The answer is 7.", "7", {}, 1),
        ("7.0", 7, {}, 1),
        ("0.3", 0.3, {}, 1),
        ("0.30000000000000004", 0.3, {}, 0),
        ("1,234", "1,234", {}, 1),
        ("$12", "$12", {}, 1),
        ("12%", "12%", {}, 1),
        ("-3", -3, {}, 1),
        ("3", -3, {}, 0),
        ("8", 7, {}, 0),
        ("7.4", 7, {"tolerance": 0.5}, 1),
        ("7.6", 7, {"tolerance": 0.5}, 0),
        ("101", 100, {"relative": 0.01}, 1),
        ("102", 100, {"relative": 0.01}, 0),
        ("9007199254740993", 9007199254740992, {}, 0),
    ],
)
def test_number(answer: str, target: Any, options: dict[str, Any], reward: int) -> None:
    verdict = judge("number", answer, target, **options)
    assert verdict.reward == reward
    assert verdict.metrics["correct"] == reward
    assert verdict.metrics["extracted"] == 1
    assert "abs_error" in verdict.metrics


def test_number_wrong_answer_verdict() -> None:
    verdict = judge("number", "Tom has 3 + 4 = 8 apples.", "7")
    assert verdict.feedback == "Your answer 8 is not the expected number."
    assert verdict.metrics == {"correct": 0, "extracted": 1, "abs_error": 1.0}
    assert verdict.details["extracted"] == "8"
    assert verdict.details["value"] == 8.0
    assert verdict.details["extraction"] == "last number in the answer"


@pytest.mark.parametrize(
    ("answer", "feedback"),
    [
        ("3/4", "Your answer gives a fraction (3/4); write the number in decimal form."),
        (r"\boxed{\frac{3}{4}}", r"Your answer gives a fraction (\frac{3}{4}); write"),
        ("seven", "No number was found in your answer; end it with the number alone."),
        ("", "Your answer was empty."),
    ],
)
def test_number_without_a_number(answer: str, feedback: str) -> None:
    verdict = judge("number", answer, 0.75)
    assert verdict.reward == 0
    assert verdict.feedback.startswith(feedback)
    assert verdict.metrics == {"correct": 0, "extracted": 0}


def test_number_huge_values_stay_json_safe() -> None:
    verdict = judge("number", "1e999999", 1)
    assert verdict.reward == 0
    assert verdict.details["value"] == "1E+999999"
    assert "abs_error" not in verdict.metrics


@pytest.mark.parametrize("target", ["seven", "7 apples", "3/4", None, True, float("nan"), [7]])
def test_number_cannot_judge_a_bad_target(target: Any) -> None:
    verdict = judge("number", "7", target)
    assert verdict.error is not None
    assert verdict.error.startswith("number verifier: target ")
    assert "is not a number" in verdict.error


# --- json_schema ------------------------------------------------------------------------

PERSON = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0}},
    "required": ["name", "age"],
}


@pytest.mark.parametrize(
    ("answer", "method"),
    [
        ('{"name": "Ann", "age": 3}', "whole answer"),
        ('Here you go:\n```json\n{"name": "Ann", "age": 3}\n```\nDone.', "fenced block"),
        ('Sure:\n```\n{"name": "Ann", "age": 3}\n```', "fenced block"),
        ('```python\nx = [1]\n```\n```json\n{"name": "Ann", "age": 3}\n```', "fenced block"),
        ('The person is {"name": "Ann", "age": 3} as asked.', "first JSON value in the text"),
        ('See [note] then {"name": "Ann", "age": 3}', "first JSON value in the text"),
    ],
)
def test_json_extraction(answer: str, method: str) -> None:
    parsed = parse_answer(answer)
    assert parsed.error is None
    assert parsed.value == {"name": "Ann", "age": 3}
    assert parsed.method.startswith(method)
    assert judge("json_schema", answer, PERSON).reward == 1


@pytest.mark.parametrize(
    ("answer", "feedback"),
    [
        ('{"name": "Ann",\n "age": }', "Expecting value at line 2, column 9."),
        ('```json\n{"a": 1,}\n```', "in the fenced block: Expecting property name enclosed"),
        ("No JSON at all", "it contains no JSON object or array."),
        ("", "Your answer was empty."),
    ],
)
def test_json_invalid_answers(answer: str, feedback: str) -> None:
    verdict = judge("json_schema", answer, PERSON, expected={"name": "Ann"})
    assert verdict.reward == 0
    assert feedback in verdict.feedback
    assert verdict.metrics == {"json_valid": 0, "fields_found": 0, "fields_total": 1}


def test_json_schema_violations_are_listed_with_paths() -> None:
    answer = '{"age": -1, "name": 5, "tags": [1]}'
    schema = {
        **PERSON,
        "properties": {**PERSON["properties"], "tags": {"items": {"type": "string"}}},
    }
    verdict = judge("json_schema", answer, schema)
    assert verdict.reward == 0
    assert verdict.metrics == {"json_valid": 1, "schema_errors": 3}
    assert verdict.feedback == (
        "Your JSON does not match the required schema: $.age: -1 is less than the minimum "
        "of 0; $.name: 5 is not of type 'string'; $.tags[0]: 1 is not of type 'string'."
    )
    assert [v["path"] for v in verdict.details["schema_errors"]] == ["$.age", "$.name", "$.tags[0]"]


def test_json_schema_feedback_shows_three_violations_and_counts_the_rest() -> None:
    schema = {"type": "array", "items": {"type": "integer"}}
    verdict = judge("json_schema", '["a", "b", "c", "d", "e"]', schema)
    assert verdict.metrics["schema_errors"] == 5
    assert verdict.feedback.endswith("$[2]: 'c' is not of type 'integer' (and 2 more).")


def test_json_schema_feedback_never_lists_allowed_values() -> None:
    schema = {
        "type": "object",
        "properties": {"color": {"enum": ["teal", "plum"]}, "size": {"const": "XL"}},
        "required": ["missing key"],
    }
    verdict = judge("json_schema", '{"color": "red", "size": "S"}', schema)
    assert "teal" not in verdict.feedback and "XL" not in verdict.feedback
    assert "$.color: the value is not one of the allowed values" in verdict.feedback
    assert "$.size: the value is not the required one" in verdict.feedback
    assert "$: 'missing key' is a required property" in verdict.feedback


@pytest.mark.parametrize(
    ("answer", "found", "reward"),
    [
        ('{"name": "Ann", "age": 3, "city": "Oslo"}', 3, 1.0),
        ('{"name": "Ann", "age": 4, "city": "Oslo"}', 2, 2 / 3),
        ('{"name": "Ann", "age": 3.0, "city": "Oslo"}', 3, 1.0),
        ('{"name": "Bob", "age": 4}', 0, 0.0),
        ('{"name": "Ann", "age": "3"}', 1, 0.0),
    ],
)
def test_json_expected_fields(answer: str, found: int, reward: float) -> None:
    expected = {"name": "Ann", "age": 3, "city": "Oslo"}
    verdict = judge("json_schema", answer, None, schema=PERSON, expected=expected)
    assert verdict.reward == pytest.approx(reward)
    assert verdict.metrics["fields_found"] == found
    assert verdict.metrics["fields_total"] == 3
    assert verdict.details["expected"] == expected
    assert "Oslo" not in verdict.feedback


def test_json_expected_field_feedback_names_fields_not_values() -> None:
    verdict = judge("json_schema", '{"ok": 1, "n": 2}', None, expected={"ok": True, "n": 3})
    assert verdict.reward == 0
    assert verdict.feedback == (
        "2 of 2 expected fields in your JSON are missing or have the wrong value: ok, n."
    )
    assert verdict.details["schema_source"] is None


@pytest.mark.parametrize(
    ("target", "options", "fragment"),
    [
        ("a string", {}, "no schema; set options.schema or make the target"),
        ({"type": "nope"}, {}, "target is not a valid JSON Schema at $.type:"),
        ({"name": "Ann", "age": 3}, {}, "target has no JSON Schema keyword"),
        (None, {"schema": {"$ref": "#/$defs/missing"}}, "options.schema has a $ref that cannot"),
    ],
)
def test_json_schema_cannot_judge(target: Any, options: dict[str, Any], fragment: str) -> None:
    verdict = judge("json_schema", '{"a": 1}', target, **options)
    assert verdict.error is not None
    assert verdict.error.startswith("json_schema verifier: ")
    assert fragment in verdict.error


@pytest.mark.parametrize(
    ("options", "fragment"),
    [
        ({"expected": ["a"]}, "options.expected must be an object, not list"),
        ({"schema": "object"}, "options.schema must be an object, not str"),
    ],
)
def test_json_schema_called_directly_with_options_of_the_wrong_kind_cannot_judge(
    options: dict[str, Any], fragment: str
) -> None:
    """A plugin or a test calling the verifier without its options schema gets a verdict
    naming the option, not a crash (before, ``expected`` as a list raised AttributeError)."""
    task = verifier_task("json_schema", options)
    verdict = VERIFIERS["json_schema"].verify(Check('{"a": 1}', task, options))
    assert_well_formed(verdict)
    assert verdict.error is not None and fragment in verdict.error


def test_json_schema_with_a_schema_option_takes_an_object_target_as_expected_values() -> None:
    verdict = judge(
        "json_schema", '{"name": "Ann", "age": 3}', {"name": "Ann", "age": 4}, schema=PERSON
    )
    assert verdict.details["schema_source"] == "options.schema"
    assert verdict.reward == 0.5
    assert verdict.metrics["fields_found"] == 1 and verdict.metrics["fields_total"] == 2
    explicit = judge(
        "json_schema",
        '{"name": "Ann", "age": 3}',
        {"name": "Bob"},
        schema=PERSON,
        expected={"age": 3},
    )
    assert explicit.reward == 1


def test_one_compiled_validator_per_schema() -> None:
    first = compiled_validator({"type": "object", "required": ["a"]})
    again = compiled_validator({"required": ["a"], "type": "object"})
    other = compiled_validator({"type": "object", "required": ["b"]})
    assert first is again
    assert other is not first
