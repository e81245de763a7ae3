"""The ``choice`` verifier: multiple-choice tasks whose options are rendered A., B., …

Models answer in many shapes ("B", "(B)", "Answer: B", "**B) Rome**", "Rome"), so the
chosen letter is extracted in tiers, clearest shape first; the first tier that names
anything decides. When that tier names two different options the answer is ambiguous
and scores 0: a hedge must never count as a pick.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from pytest_agentbench.core.fastclass import dataclass
from pytest_agentbench.core.jsontypes import JsonObject
from pytest_agentbench.errors import VerifierError
from pytest_agentbench.suites.choice_target import LETTERS, expected_index
from pytest_agentbench.suites.choice_target import fold as _fold
from pytest_agentbench.suites.task import Task
from pytest_agentbench.verifiers.base import Check, ConfigProblem, FunctionVerifier, Verdict
from pytest_agentbench.verifiers.text import cannot_judge, excerpt, unusable

_EMPHASIS = re.compile(r"\*\*|__|\*|`")
_WHOLE_LETTER = re.compile(r"\s*[\(\[]?([A-Za-z])[\)\]]?[.:!]?\s*")
# A letter after a marker: "(b)", "B" (not "I think"), or a lowercase letter ending a line.
_LETTER = (
    r"(?:[\(\[]([A-Za-z])[\)\]]"
    r"|(?!I\s+(?:think|believe|guess|would|will|am)\b)([A-Z])(?![\w'’])"
    r"|([a-z])(?=[.!)\]]?[ \t]*$))"
)
_SEPARATOR = r"\s*(?:(?i:is|would\s+be|should\s+be|must\s+be|=|:|-)\s*)?(?:(?i:option|choice)\s+)?"
_FINAL = (
    re.compile(r"\\boxed\{\s*(?:\\text(?:bf)?\{\s*)?([A-Za-z])\s*\}"),
    re.compile(r"(?i:\bfinal\s+(?:answer|choice)\b)" + _SEPARATOR + _LETTER, re.MULTILINE),
)
_MARKERS = (
    re.compile(r"(?i:\banswer\b)" + _SEPARATOR + _LETTER, re.MULTILINE),
    re.compile(
        r"(?i:\b(?:i\s+(?:choose|pick|select)|i['’]?ll\s+(?:go\s+with|choose|pick)|go\s+with))"
        r"\s+(?:(?i:option|choice)\s+)?" + _LETTER,
        re.MULTILINE,
    ),
)
_OPTION_MARKER = re.compile(r"(?i:\b(?:option|choice)\b)" + _SEPARATOR + _LETTER, re.MULTILINE)
_ALSO = re.compile(r"\s*(?:or|and|/|,|&)\s*[\(\[]?([A-Z])(?![\w'’])")
_LABELS = (
    re.compile(r"(?<![\w'’])[\(\[]?([A-Z])(?:[\)\]]|[.:](?=\s|$))"),
    re.compile(r"[\(\[]([A-Z])[\)\]]"),
)
# "A" and "I" followed by a lowercase word read as English ("A city", "I think"), not as
# a pick, unless the word is one that follows a letter pick ("A is right", "A or B").
_BARE = re.compile(
    r"(?<![\w'’])(?![AI]\s+(?!(?:is|or|and|was|because|since|as)\b)[a-z])([A-Z])(?![\w'’])"
)


@dataclass(frozen=True)
class ChoiceExtraction:
    """What an answer picked: ``letter`` is None when nothing or several were named
    (then ``candidates`` lists the several); ``method`` names the tier that decided."""

    letter: str | None
    method: str
    candidates: tuple[str, ...] = ()


def _letters(match: re.Match[str]) -> str:
    return next(group for group in match.groups() if group).upper()


def _decide(candidates: list[str], method: str) -> ChoiceExtraction | None:
    distinct = tuple(dict.fromkeys(candidates))
    if not distinct:
        return None
    if len(distinct) == 1:
        return ChoiceExtraction(distinct[0], method)
    return ChoiceExtraction(None, f"{method} (ambiguous)", distinct)


def _marker_letters(text: str, patterns: Sequence[re.Pattern[str]]) -> list[str]:
    found = []
    for pattern in patterns:
        for match in pattern.finditer(text):
            found.append(_letters(match))
            end = match.end()
            while also := _ALSO.match(text, end):
                found.append(also.group(1))
                end = also.end()
    return found


def _option_mentions(text: str, choices: Sequence[str]) -> list[str]:
    folded = " ".join(text.split()).casefold()
    named = {}
    for index, choice in enumerate(choices):
        option = _fold(choice)
        if not option:
            continue
        left = r"\b" if option[0].isalnum() else ""
        right = r"\b" if option[-1].isalnum() else ""
        if re.search(left + re.escape(option) + right, folded):
            named[option] = LETTERS[index]
    # "York" inside "New York" is not a second mention.
    return [
        letter
        for option, letter in named.items()
        if not any(option != other and option in other for other in named)
    ]


def extract_choice(answer: str, choices: Sequence[str]) -> ChoiceExtraction:
    """The option an answer picked, trying the clearest answer shapes first."""
    text = _EMPHASIS.sub("", answer).strip()
    count = len(choices)
    whole = _WHOLE_LETTER.fullmatch(text)
    if whole:
        return ChoiceExtraction(whole.group(1).upper(), "whole answer is a letter")
    same = [LETTERS[i] for i, choice in enumerate(choices) if _fold(choice) == _fold(text)]
    tiers = (
        (lambda: same, "whole answer is an option's text"),
        (lambda: _marker_letters(text, _FINAL), "final answer marker"),
        (lambda: _marker_letters(text, _MARKERS), "answer marker"),
        (lambda: _marker_letters(text, (_OPTION_MARKER,)), "option marker"),
        (lambda: [m.group(1) for p in _LABELS for m in p.finditer(text)], "option label"),
        (
            lambda: [m.group(1) for m in _BARE.finditer(text) if m.group(1) in LETTERS[:count]],
            "lone letter",
        ),
        (lambda: _option_mentions(text, choices), "option text mentioned"),
    )
    for candidates, method in tiers:
        decided = _decide(candidates(), method)
        if decided:
            return decided
    return ChoiceExtraction(None, "no choice found")


def check_choice(task: Task) -> list[ConfigProblem]:
    """The task must have choices, and its target must name one of them."""
    try:
        expected_index(task.target, task.choices)
    except VerifierError as exc:
        return [unusable(("target",) if task.choices else ("choices",), exc)]
    return []


def verify_choice(check: Check) -> Verdict:
    """Reward 1 when the extracted letter is the target's letter."""
    choices = check.task.choices
    try:
        index = expected_index(check.task.target, choices)
    except VerifierError as exc:
        return cannot_judge(exc, got=excerpt(check.answer))
    expected = LETTERS[index]
    extraction = extract_choice(check.answer, choices)
    chosen = extraction.letter
    valid = chosen is not None and chosen in LETTERS[: len(choices)]
    details: JsonObject = {
        "expected": expected,
        "expected_text": choices[index],
        "chosen": chosen,
        "chosen_text": choices[LETTERS.index(chosen)] if valid and chosen else None,
        "extraction": extraction.method,
        "got": excerpt(check.answer),
    }
    if extraction.candidates:
        details["candidates"] = list(extraction.candidates)
    correct = chosen == expected
    metrics = {"correct": int(correct), "extracted": int(chosen is not None)}
    span = f"A–{LETTERS[len(choices) - 1]}"
    if correct:
        feedback = ""
    elif extraction.candidates:
        feedback = (
            f"Your answer was ambiguous: it names {', '.join(extraction.candidates)}; "
            "reply with the letter of exactly one option."
        )
    elif chosen is None:
        feedback = (
            "Your answer was empty."
            if not check.answer.strip()
            else f"No option letter was found in your answer; reply with one letter ({span})."
        )
    elif not valid:
        feedback = f"Your answer {chosen} is not one of the options {span}."
    else:
        feedback = f"Your answer {chosen} is not the correct option."
    return Verdict(reward=float(correct), metrics=metrics, details=details, feedback=feedback)


CHOICE = FunctionVerifier(
    kind="choice",
    function=verify_choice,
    task_check=check_choice,
    options_schema={"type": "object", "properties": {}, "additionalProperties": False},
)
