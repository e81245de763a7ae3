"""The built-in verifiers: right, wrong, malformed and edge answers, the errors for tasks
they cannot judge, and the shapes of metrics, details and feedback."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from pytest_agentbench.suites.task import Task, VerifierConfig
from pytest_agentbench.verifiers.base import Check, Verdict
from pytest_agentbench.verifiers.builtin import BUILTIN_VERIFIERS
from pytest_agentbench.verifiers.choice import extract_choice
from pytest_agentbench.verifiers.json_schema import compiled_validator, parse_answer
from pytest_agentbench.verifiers.number import extract_number

VERIFIERS = {v.kind: v for v in BUILTIN_VERIFIERS}
CAPITALS = ("Paris", "Rome", "Madrid", "New York")


def judge(
    kind: str,
    answer: str,
    target: Any = None,
    *,
    choices: tuple[str, ...] = (),
    **options: Any,
) -> Verdict:
    """Run one built-in verifier the way the runner does: options checked by its schema."""
    verifier = VERIFIERS[kind]
    jsonschema.validate(options, verifier.options_schema)
    task = Task(
        suite="unit",
        id="t1",
        index=0,
        path=Path("bench_unit.toml"),
        input="question",
        prompt="question",
        target=target,
        choices=choices,
        verifier=VerifierConfig(kind, options),
    )
    verdict = verifier.verify(Check(answer=answer, task=task, options=options))
    assert_well_formed(verdict)
    return verdict


def assert_well_formed(verdict: Verdict) -> None:
    """What every verdict owes the artifacts and the failure-line miner."""
    assert 0.0 <= verdict.reward <= 1.0
    json.dumps(dict(verdict.details), allow_nan=False)
    for name, value in verdict.metrics.items():
        assert isinstance(value, int | float) and not isinstance(value, bool), name
        assert math.isfinite(value), name
        if name.endswith("_found"):
            assert name.removesuffix("_found") + "_total" in verdict.metrics
    if verdict.error is not None:
        assert verdict.reward == 0.0
        assert verdict.error.split(" ")[1] == "verifier:"
    elif verdict.reward < 1.0:
        assert verdict.feedback.endswith(".")
    else:
        assert verdict.feedback == ""


# --- the registry -----------------------------------------------------------------------


def test_builtin_kinds_are_unique_and_schemas_are_strict() -> None:
    kinds = ["choice", "command", "exact", "includes", "json_schema", "number", "python_checks"]
    kinds.append("python_tests")
    assert sorted(VERIFIERS) == [*kinds, "regex"]
    assert len(VERIFIERS) == len(BUILTIN_VERIFIERS)
    for verifier in BUILTIN_VERIFIERS:
        schema = verifier.options_schema
        jsonschema.Draft202012Validator.check_schema(schema)
        assert schema["additionalProperties"] is False
        jsonschema.validate({}, schema)
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate({"no_such_option": 1}, schema)
        for name, prop in schema["properties"].items():
            assert prop.get("description"), f"{verifier.kind}.{name}"
            if "default" in prop:
                jsonschema.validate({name: prop["default"]}, schema)


# --- exact ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("answer", "target", "options", "reward"),
    [
        ("Paris", "Paris", {}, 1),
        ("  Paris\n", "Paris", {}, 1),
        ("  Paris\n", "Paris", {"strip": False}, 0),
        ("paris", "Paris", {}, 0),
        ("PARIS", "Paris", {"case_sensitive": False}, 1),
        ("New   York", "New York", {}, 0),
        ("New \n York", "New York", {"normalize_whitespace": True}, 1),
        ("Rome", ["Roma", "Rome"], {}, 1),
        ("Milan", ["Roma", "Rome"], {}, 0),
        ("", "Paris", {}, 0),
        ("Paris.", "Paris", {}, 0),
    ],
)
def test_exact(answer: str, target: Any, options: dict[str, Any], reward: int) -> None:
    verdict = judge("exact", answer, target, **options)
    assert verdict.reward == reward
    assert verdict.metrics == {"exact": reward}
    assert verdict.details["expected"] == target


@pytest.mark.parametrize(
    ("answer", "hint"),
    [
        ("", "was empty"),
        ("paris", "only in letter case"),
        ("The capital is Paris.", "more than the expected answer"),
        ("Lyon", "does not match"),
    ],
)
def test_exact_feedback_hints_without_the_target(answer: str, hint: str) -> None:
    verdict = judge("exact", answer, "Paris")
    assert hint in verdict.feedback
    assert "Paris" not in verdict.feedback


def test_exact_whitespace_hint_and_matched_target() -> None:
    assert "whitespace" in judge("exact", "New  York", "New York").feedback
    verdict = judge("exact", "Roma", ["Rome", "Roma"])
    assert verdict.details["matched"] == "Roma"
    assert verdict.details["extraction"] == "whole answer (stripped)"


@pytest.mark.parametrize(
    ("target", "fragment"),
    [
        (7, 'quote it, e.g. "7"'),
        (None, "got NoneType"),
        ([], "non-empty list"),
        (["a", 1], "list of strings"),
        ("", "empty string"),
    ],
)
def test_exact_cannot_judge_a_bad_target(target: Any, fragment: str) -> None:
    verdict = judge("exact", "7", target)
    assert verdict.error is not None
    assert verdict.error.startswith("exact verifier: ")
    assert fragment in verdict.error


def test_long_answers_are_cut_in_details() -> None:
    verdict = judge("exact", "x" * 5000, "y")
    got = verdict.details["got"]
    assert got.startswith("x" * 500)
    assert got.endswith("[4500 more characters]")
    assert len(got) < 600


# --- includes ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("answer", "target", "options", "found", "total"),
    [
        ("It is Paris, France.", "Paris", {}, 1, 1),
        ("It is paris.", "Paris", {}, 0, 1),
        ("It is paris.", "Paris", {"case_sensitive": False}, 1, 1),
        ("apples and pears", ["apples", "pears", "plums"], {}, 2, 3),
        ("nothing here", ["apples", "pears"], {}, 0, 2),
        ("", ["apples"], {}, 0, 1),
    ],
)
def test_includes(
    answer: str, target: Any, options: dict[str, Any], found: int, total: int
) -> None:
    verdict = judge("includes", answer, target, **options)
    assert verdict.reward == pytest.approx(found / total)
    assert verdict.metrics == {"items_found": found, "items_total": total}


def test_includes_details_and_feedback() -> None:
    verdict = judge("includes", "apples and pears", ["apples", "pears", "plums"])
    assert verdict.details["found"] == ["apples", "pears"]
    assert verdict.details["missing"] == ["plums"]
    assert verdict.feedback == "Your answer is missing 1 of the 3 required items."
    assert "plums" not in verdict.feedback
    assert "none of the 2" in judge("includes", "x", ["a1", "b1"]).feedback
    assert judge("includes", "x", "abc").feedback.startswith("Your answer does not contain")


def test_includes_cannot_judge_a_number_target() -> None:
    verdict = judge("includes", "7", 7)
    assert verdict.error is not None and verdict.error.startswith("includes verifier:")


# --- regex ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("answer", "target", "options", "reward"),
    [
        ("The code is AB-123.", r"[A-Z]{2}-\d{3}", {}, 1),
        ("The code is ab-123.", r"[A-Z]{2}-\d{3}", {}, 0),
        ("The code is ab-123.", r"[A-Z]{2}-\d{3}", {"flags": "i"}, 1),
        ("The code is AB-123.", r"[A-Z]{2}-\d{3}", {"fullmatch": True}, 0),
        (" AB-123\n", r"[A-Z]{2}-\d{3}", {"fullmatch": True}, 1),
        ("first\nsecond", r"^second$", {}, 0),
        ("first\nsecond", r"^second$", {"flags": "m"}, 1),
        ("a\nb", r"a.b", {"flags": "s"}, 1),
        ("yes", None, {"pattern": r"^(yes|no)$"}, 1),
        ("maybe", 42, {"pattern": r"^(yes|no)$"}, 0),
    ],
)
def test_regex(answer: str, target: Any, options: dict[str, Any], reward: int) -> None:
    verdict = judge("regex", answer, target, **options)
    assert verdict.reward == reward
    assert verdict.metrics == {"matched": reward}
    assert (verdict.details["match"] is not None) == bool(reward)


def test_regex_records_the_match_and_hides_the_pattern_from_feedback() -> None:
    verdict = judge("regex", "code AB-123 ok", r"[A-Z]{2}-\d{3}")
    assert verdict.details["match"] == {"text": "AB-123", "start": 5, "end": 11}
    wrong = judge("regex", "no code", r"[A-Z]{2}-\d{3}")
    assert "[A-Z]" not in wrong.feedback
    assert wrong.details["expected"] == r"[A-Z]{2}-\d{3}"


@pytest.mark.parametrize(
    ("target", "options", "fragment"),
    [
        ("(unclosed", {}, "invalid pattern '(unclosed' in target: missing )"),
        ("x", {"pattern": "a{2,1}"}, "in options.pattern: min repeat greater than max repeat"),
        (None, {}, "set options.pattern or make target the pattern string (target is NoneType)"),
        (["a"], {}, "(target is list)"),
    ],
)
def test_regex_cannot_judge(target: Any, options: dict[str, Any], fragment: str) -> None:
    verdict = judge("regex", "anything", target, **options)
    assert verdict.error is not None
    assert verdict.error.startswith("regex verifier: ")
    assert fragment in verdict.error


# --- choice -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("answer", "letter"),
    [
        ("B", "B"),
        ("b", "B"),
        ("(B)", "B"),
        ("B.", "B"),
        ("B) Rome", "B"),
        ("**B**", "B"),
        ("**B) Rome**", "B"),
        ("Answer: B", "B"),
        ("The answer is **B**, not A.", "B"),
        ("The answer is B", "B"),
        ("The answer is b.", "B"),
        ("The answer is (c)", "C"),
        ("I think the answer is B because Rome is the capital.", "B"),
        ("The answer is A because Paris is the capital.", "A"),
        ("Rome", "B"),
        ("rome.", "B"),
        ("I think Rome", "B"),
        ("It's New York", "D"),
        ("I think it's B", "B"),
        ("B because Rome", "B"),
        ("Rome (B)", "B"),
        ("A. Paris\nB. Rome\nThe answer is B", "B"),
        ("Option A is wrong, so the answer is B.", "B"),
        ("Option C is correct", "C"),
        ("The best choice is (D)", "D"),
        ("Let me see. A is wrong. B is wrong. The answer is C.", "C"),
        ("The answer is A. Final answer: C", "C"),
        (r"So \boxed{D}", "D"),
        ("I'll go with C", "C"),
        ("E", "E"),
        ("The answer is a city: Rome", "B"),
        ("A city on seven hills: Rome", "B"),
    ],
)
def test_choice_extraction(answer: str, letter: str) -> None:
    extraction = extract_choice(answer, CAPITALS)
    assert extraction.letter == letter, extraction


@pytest.mark.parametrize(
    ("answer", "candidates"),
    [
        ("A or B", ("A", "B")),
        ("Answer: A or B", ("A", "B")),
        ("A) Paris is wrong. B) Rome is right.", ("A", "B")),
        ("The capital is Rome, not Paris", ("A", "B")),
        ("The answer is A. No wait, the answer is C.", ("A", "C")),
    ],
)
def test_choice_ambiguous_answers_are_wrong(answer: str, candidates: tuple[str, ...]) -> None:
    assert extract_choice(answer, CAPITALS).candidates == candidates
    verdict = judge("choice", answer, "B", choices=CAPITALS)
    assert verdict.reward == 0
    assert verdict.metrics == {"correct": 0, "extracted": 0}
    assert verdict.feedback.startswith("Your answer was ambiguous: it names ")
    assert verdict.details["candidates"] == list(candidates)


@pytest.mark.parametrize("target", ["B", "b", "(B)", 1, "Rome", " rome "])
def test_choice_target_forms(target: Any) -> None:
    verdict = judge("choice", "Answer: B", target, choices=CAPITALS)
    assert verdict.reward == 1
    assert verdict.metrics == {"correct": 1, "extracted": 1}
    assert verdict.details["expected"] == "B"
    assert verdict.details["chosen_text"] == "Rome"


def test_choice_a_whole_answer_equal_to_an_option_beats_a_substring_option() -> None:
    assert extract_choice("York", (*CAPITALS, "York")).letter == "E"
    assert extract_choice("I love New York", (*CAPITALS, "York")).letter == "D"


@pytest.mark.parametrize(
    ("answer", "feedback", "extracted"),
    [
        ("C", "Your answer C is not the correct option.", 1),
        ("The answer is F", "Your answer F is not one of the options A–D.", 1),
        (
            "I have no idea",
            "No option letter was found in your answer; reply with one letter (A–D).",
            0,
        ),
        ("   ", "Your answer was empty.", 0),
    ],
)
def test_choice_wrong_answers(answer: str, feedback: str, extracted: int) -> None:
    verdict = judge("choice", answer, "B", choices=CAPITALS)
    assert verdict.reward == 0
    assert verdict.feedback == feedback
    assert verdict.metrics == {"correct": 0, "extracted": extracted}
    assert "Rome" not in verdict.feedback


@pytest.mark.parametrize(
    ("target", "choices", "fragment"),
    [
        ("B", (), "the task has no choices"),
        (4, CAPITALS, "target index 4 is out of range for 4 choices"),
        (True, CAPITALS, "target True is not a letter A–D"),
        ("E", CAPITALS, "target 'E' is not a letter A–D, a 0-based index or the text"),
        ("B", tuple(str(n) for n in range(27)), "at most 26 choices"),
    ],
)
def test_choice_cannot_judge(target: Any, choices: tuple[str, ...], fragment: str) -> None:
    verdict = judge("choice", "B", target, choices=choices)
    assert verdict.error is not None
    assert verdict.error.startswith("choice verifier: ")
    assert fragment in verdict.error


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
