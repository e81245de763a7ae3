"""The ``number`` verifier: the answer's final number against a numeric target.

Models wrap the number in prose, currency, percent signs, thousands separators and
answer markers. The number that counts is the one after the strongest marker present —
``#### 42`` (GSM8K), then ``\\boxed{42}``, then "answer is 42" / "Answer: 42" — else the
last number in the text. Values are compared as decimals, so ``0.1`` is exactly ``0.1``
and big integers keep every digit.
"""

from __future__ import annotations

import decimal
import math
import re
from decimal import Decimal

from pytest_agentbench.core.fastclass import dataclass
from pytest_agentbench.core.jsontypes import JsonObject
from pytest_agentbench.errors import VerifierError
from pytest_agentbench.suites.task import Task
from pytest_agentbench.verifiers.base import (
    Check,
    ConfigProblem,
    FunctionVerifier,
    Verdict,
    number_option,
)
from pytest_agentbench.verifiers.text import cannot_judge, excerpt, unusable

# Not glued to a word or a decimal point ("x2", "v1.2.3", the 4 of "3/4" stay out); a
# sign only when directly before the digits; "/digits" after a number makes a fraction.
_NUMBER = re.compile(
    r"(?<![\w./])"
    r"(?P<sign>[-+−]?)[$€£¥]?(?P<sign2>[-−]?)"
    r"(?P<digits>(?:\d{1,3}(?:,\d{3})+(?!\d)|\d+)(?:\.\d+)?|\.\d+)"
    r"(?P<exponent>[eE][-+]?\d+(?!\w))?"
    r"(?P<over>/\d+)?"
)
# "3/4 = 0.75": the fraction is converted right away, so only the decimal counts.
_CONVERTED = re.compile(r"\s*[=≈]\s*[-+$€£¥]?[.\d]")
_GSM8K = re.compile(r"####")
_BOXED = re.compile(r"\\boxed\s*\{")
_ANSWER = re.compile(r"\banswer\b\s*(?:is|:|=|would\s+be|will\s+be|should\s+be)", re.IGNORECASE)
_LATEX_NOISE = re.compile(r"\\[,!;: ]|\{,\}|\\\$|\\%|\\(?:left|right)|\\(?:text|mathrm)\{|\}")
# Wide enough that a difference of any two parsed numbers is exact.
_CONTEXT = decimal.Context(prec=80, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN)


@dataclass(frozen=True)
class NumberToken:
    """A number as written in the answer; ``value`` is None for a fraction like 3/4."""

    text: str
    value: Decimal | None


@dataclass(frozen=True)
class NumberExtraction:
    """The number that counts in an answer (None when there is none) and how it was found."""

    token: NumberToken | None
    method: str


def _tokens(text: str) -> list[NumberToken]:
    tokens = []
    text = text.replace("−", "-")
    for match in _NUMBER.finditer(text):
        if match.group("over"):
            if not _CONVERTED.match(text, match.end()):
                tokens.append(NumberToken(match.group(0), None))
            continue
        negative = "-" in (match.group("sign") + match.group("sign2"))
        digits = match.group("digits").replace(",", "") + (match.group("exponent") or "")
        value = Decimal(digits)
        tokens.append(NumberToken(match.group(0), -value if negative else value))
    return tokens


def _boxed_content(text: str, start: int) -> str:
    """The text inside ``\\boxed{…}`` whose opening brace ends at ``start``."""
    depth = 1
    for position in range(start, len(text)):
        if text[position] == "{":
            depth += 1
        elif text[position] == "}":
            depth -= 1
            if depth == 0:
                return text[start:position]
    return text[start:]


def extract_number(answer: str) -> NumberExtraction:
    """The final number of an answer: after ``####``, inside the last ``\\boxed{}``, after
    the last "answer is" / "answer:", else the last number in the text."""
    gsm8k = list(_GSM8K.finditer(answer))
    if gsm8k:
        tokens = _tokens(answer[gsm8k[-1].end() :])
        if tokens:
            return NumberExtraction(tokens[0], "after ####")
    boxed = list(_BOXED.finditer(answer))
    if boxed:
        content = _boxed_content(answer, boxed[-1].end())
        if "frac{" in content:
            return NumberExtraction(NumberToken(content.strip(), None), "inside \\boxed{}")
        tokens = _tokens(_LATEX_NOISE.sub("", content))
        if tokens:
            return NumberExtraction(tokens[-1], "inside \\boxed{}")
    markers = list(_ANSWER.finditer(answer))
    if markers:
        tokens = _tokens(answer[markers[-1].end() :])
        if tokens:
            return NumberExtraction(tokens[0], "after the last 'answer' marker")
    tokens = _tokens(answer)
    if tokens:
        return NumberExtraction(tokens[-1], "last number in the answer")
    return NumberExtraction(None, "no number found")


def _target_value(target: object) -> Decimal:
    """The target as a decimal; raises VerifierError when it is not one number."""
    if isinstance(target, int) and not isinstance(target, bool):
        return Decimal(target)
    if isinstance(target, float) and math.isfinite(target):
        return Decimal(repr(target))
    if isinstance(target, str):
        tokens = _tokens(target.strip())
        if len(tokens) == 1 and tokens[0].value is not None:
            rest = target.strip().replace("−", "-").replace(tokens[0].text, "", 1)
            if rest in ("", "%"):
                return tokens[0].value
    raise VerifierError(
        f"number verifier: target {excerpt(repr(target), 80)} is not a number; "
        'write it as a number or a numeric string such as "42" or "-3.5"'
    )


def check_number(task: Task) -> list[ConfigProblem]:
    """The target must be one number."""
    try:
        _target_value(task.target)
    except VerifierError as exc:
        return [unusable(("target",), exc)]
    return []


def _plain(value: Decimal) -> float | str:
    """A decimal for JSON: a float when that is finite, else its exact string."""
    as_float = float(value)
    return as_float if math.isfinite(as_float) else str(value)


def verify_number(check: Check) -> Verdict:
    """Reward 1 when the extracted number is within the allowed error of the target."""
    try:
        expected = _target_value(check.task.target)
    except VerifierError as exc:
        return cannot_judge(exc, got=excerpt(check.answer))
    tolerance = Decimal(repr(number_option(check.options, "tolerance", 0)))
    relative = Decimal(repr(number_option(check.options, "relative", 0)))
    allowed = max(tolerance, _CONTEXT.multiply(relative, abs(expected)))
    extraction = extract_number(check.answer)
    token = extraction.token
    details: JsonObject = {
        "expected": check.task.target,
        "got": excerpt(check.answer),
        "extraction": extraction.method,
        "extracted": None if token is None else excerpt(token.text, 80),
        "allowed_error": _plain(allowed),
    }
    if token is None or token.value is None:
        if token is not None:
            feedback = (
                f"Your answer gives a fraction ({excerpt(token.text, 40)}); "
                "write the number in decimal form."
            )
        elif check.answer.strip():
            feedback = "No number was found in your answer; end it with the number alone."
        else:
            feedback = "Your answer was empty."
        return Verdict(
            reward=0.0, metrics={"correct": 0, "extracted": 0}, details=details, feedback=feedback
        )
    error = abs(_CONTEXT.subtract(token.value, expected))
    correct = error <= allowed
    details["value"] = _plain(token.value)
    metrics: dict[str, float] = {"correct": int(correct), "extracted": 1}
    if math.isfinite(float(error)):
        metrics["abs_error"] = float(error)
    feedback = (
        "" if correct else f"Your answer {excerpt(token.text, 40)} is not the expected number."
    )
    return Verdict(reward=float(correct), metrics=metrics, details=details, feedback=feedback)


NUMBER = FunctionVerifier(
    kind="number",
    function=verify_number,
    task_check=check_number,
    options_schema={
        "type": "object",
        "properties": {
            "tolerance": {
                "type": "number",
                "minimum": 0,
                "default": 0,
                "description": "Largest absolute difference still counted as correct.",
            },
            "relative": {
                "type": "number",
                "minimum": 0,
                "default": 0,
                "description": "Largest difference as a fraction of the target (0.01 = 1%).",
            },
        },
        "additionalProperties": False,
    },
)
