"""Which option a multiple-choice task's target names: a letter, a 0-based index or the
option's text. Loading (controls, perturbations) and the ``choice`` verifier read a target
the same way, so it lives here, below both."""

from __future__ import annotations

import re
import string
from collections.abc import Sequence

from pytest_agentbench.errors import VerifierError

LETTERS = string.ascii_uppercase


def fold(text: str) -> str:
    """An option's text as compared: whitespace collapsed, edge punctuation and case off."""
    return " ".join(text.split()).strip(" .,;:!?\"'").casefold()


def expected_index(target: object, choices: Sequence[str]) -> int:
    """The 0-based index of the right option; raises VerifierError saying what to fix."""
    count = len(choices)
    if count == 0:
        raise VerifierError("choice verifier: the task has no choices; list the options")
    if count > len(LETTERS):
        raise VerifierError(f"choice verifier: at most 26 choices (A–Z), the task has {count}")
    if isinstance(target, int) and not isinstance(target, bool):
        if 0 <= target < count:
            return target
        raise VerifierError(
            f"choice verifier: target index {target} is out of range for {count} choices "
            "(indexes start at 0)"
        )
    if isinstance(target, str):
        letter = re.fullmatch(r"[\(\[]?([A-Za-z])[\)\].]?", target.strip())
        if letter and letter.group(1).upper() in LETTERS[:count]:
            return LETTERS.index(letter.group(1).upper())
        for index, choice in enumerate(choices):
            if fold(choice) == fold(target):
                return index
    shown = repr(target)
    if len(shown) > 80:
        shown = f"{shown[:80]}… [{len(shown) - 80} more characters]"
    raise VerifierError(
        f"choice verifier: target {shown} is not a letter A–"
        f"{LETTERS[count - 1]}, a 0-based index or the text of one of the {count} choices"
    )
