"""The built-in verifiers: right, wrong, malformed and edge answers, the errors for tasks
they cannot judge, and the shapes of metrics, details and feedback."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest
from verifiers_support import CAPITALS, VERIFIERS, judge

from pytest_agentbench.verifiers.builtin import BUILTIN_VERIFIERS
from pytest_agentbench.verifiers.choice import extract_choice

# --- the registry -----------------------------------------------------------------------


def test_builtin_kinds_are_unique_and_schemas_are_strict() -> None:
    kinds = ["choice", "command", "exact", "harbor", "includes", "json_schema", "judge", "number"]
    kinds += ["python_checks", "python_tests"]
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
