"""What ``suites/load.py`` hands ``TaskBuilder`` (``build.py``): the suite's defaults
(``SuiteDefaults``: the settings a task takes from its suite, ``TASK_SETTINGS``), one
task's table before defaults (``RawTask``), and the readers that narrow a value the
structure check has passed to the type the schema gives it."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TypeVar

from pytest_agentbench.core.fastclass import dataclass
from pytest_agentbench.core.jsontypes import JsonObject, JsonValue
from pytest_agentbench.core.sampling import Sampling
from pytest_agentbench.suites.validate import Parts

#: Settings a task takes from the suite unless it sets its own, with their defaults.
TASK_SETTINGS: JsonObject = {
    "system": None,
    "repairs": 0,
    "repair_mode": "conversation",
    "feedback": "names",
    "timeout_s": None,
    "max_tokens": None,
    "pass_threshold": 1.0,
    "mode": "answer",
    "max_turns": 20,
    "tools": None,
    "max_tool_output": 10_000,
    "agent": None,
    "environment": None,
}


@dataclass(frozen=True)
class SuiteDefaults:
    """What the suite table gives its tasks: its well-formed values (a broken one reads
    as unset, its problem already recorded) and what its checks found."""

    name: str
    description: str
    #: The TASK_SETTINGS the suite sets, as written.
    settings: JsonObject
    sampling: Sampling
    files: dict[str, str]
    files_dir: Path | None
    min_score: float | None
    epochs: int
    reducer: str
    #: The suite's template (None when broken), where it is written ("" for the default)
    #: and the problems no task could fix (said once, of the suite).
    template: str | None
    template_path: str
    template_problems: list[str]
    #: False when the suite's vars are broken: no task's prompt is rendered.
    renderable: bool
    vars: JsonObject
    marks: list[str]
    #: The suite's verifier table, None when unset or broken (``verifier_ok`` tells).
    verifier: JsonObject | None
    verifier_ok: bool


@dataclass(frozen=True)
class RawTask:
    """A task's table before defaults: the paths already found broken in it, and how to
    print a path inside it (a path in the suite file, or in a dataset record)."""

    index: int
    data: Mapping[str, JsonValue]
    bad: frozenset[Parts]
    locate: Callable[[Parts], str]


# -- reading a value the schema has checked -----------------------------------------------------
# Each raises TypeError for a value of another type: a bug (the schema and this code
# disagree), never a user's mistake, which the structure check has already reported.

W = TypeVar("W", bound=str)


def _wrong(value: JsonValue, expected: str) -> TypeError:
    return TypeError(f"expected {expected} (the suite schema checked it), got {value!r}")


def as_text(value: JsonValue) -> str:
    if isinstance(value, str):
        return value
    raise _wrong(value, "a string")


def as_optional_text(value: JsonValue) -> str | None:
    return None if value is None else as_text(value)


def as_number(value: JsonValue) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    raise _wrong(value, "a number")


def as_whole(value: JsonValue) -> int:
    """An integer (JSON Schema's ``integer`` takes 2.0 too)."""
    return int(as_number(value))


def as_items(value: JsonValue) -> list[JsonValue]:
    if isinstance(value, list):
        return value
    raise _wrong(value, "an array")


def as_texts(value: JsonValue) -> list[str]:
    return [as_text(item) for item in as_items(value)]


def as_table(value: JsonValue) -> JsonObject:
    if isinstance(value, dict):
        return value
    raise _wrong(value, "an object")


def as_word(value: JsonValue, words: tuple[W, ...]) -> W:
    """The word of a closed set (its ``Literal``) that ``value`` is."""
    for one in words:
        if value == one:
            return one
    raise _wrong(value, f"one of {', '.join(words)}")
