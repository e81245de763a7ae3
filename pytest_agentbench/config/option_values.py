"""Reading one option's value: the command line's, else the ini file's, checked and typed.

pytest hands options and ini keys over untyped (a string from the ini file, whatever
``type=`` made of the command line's); each reader here takes that ``object`` and returns
the typed value ``Settings`` holds, or raises AgentbenchError naming the option and what
it expected. Nothing here knows a particular option but its name.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from pytest_agentbench.errors import AgentbenchError

#: How settings read an option (``config.getoption``) or an ini key (``config.getini``).
OptionReader = Callable[[str], object]

#: The largest number any numeric option takes (a day in seconds, ten million tokens,
#: megabytes, requests per minute): far beyond it the clock arithmetic overflows and a
#: task ends in an OverflowError instead of an outcome.
MAX_OPTION_NUMBER = 10_000_000

N = TypeVar("N", int, float)
#: A closed set's word (each set is a ``Literal`` of ``core/choices.py``).
W = TypeVar("W", bound=str)


def first(*values: object) -> object:
    """The first value given (not None, not empty); None when none is."""
    for value in values:
        if value is not None and value != "" and value != []:
            return value
    return None


def text(value: object) -> str | None:
    """A value given as text (paths, URLs, names); None when not given."""
    return None if value is None else str(value)


def number(
    name: str,
    value: object,
    kind: Callable[[str | float], N],
    minimum: float,
    maximum: float = MAX_OPTION_NUMBER,
) -> N:
    """``value`` as ``kind`` (int or float) within ``minimum`` and ``maximum``."""
    try:
        if not isinstance(value, str | int | float):
            raise TypeError(value)
        found = kind(value)
    except (TypeError, ValueError, OverflowError):
        raise AgentbenchError(f"{name}: expected a number, got {value!r}") from None
    if found < minimum:
        raise AgentbenchError(f"{name}: expected a number >= {minimum}, got {value!r}")
    if not found <= maximum:  # NaN too
        raise AgentbenchError(f"{name}: expected a number <= {maximum:g}, got {value!r}")
    return found


def fraction(name: str, value: object) -> float:
    """A score from 0 to 1."""
    found = number(name, value, float, 0.0)
    if found > 1:
        raise AgentbenchError(f"{name}: expected a score from 0 to 1, got {value!r}")
    return found


def int_option(
    option: OptionReader, ini: OptionReader, name: str, default: int, low: int, high: int
) -> int:
    """The option or ini key ``name`` as a whole number from ``low`` to ``high``."""
    value = first(option(name), ini(name))
    if value is None:
        return default
    found = number(name.replace("_", " "), value, int, low)
    if found > high:
        raise AgentbenchError(f"{name.replace('_', ' ')}: expected {low} to {high}, got {value!r}")
    return found


def optional_int(option: OptionReader, ini: OptionReader, name: str, low: int) -> int | None:
    """The option or ini key ``name`` as a whole number of at least ``low``, or None."""
    value = first(option(name), ini(name))
    if value is None:
        return None
    return number(name.replace("_", " "), value, int, low, 2**63 - 1)


def choice(name: str, value: object, choices: tuple[W, ...]) -> W | None:
    """``value`` as the word of ``choices`` it is (its ``Literal`` type), None when not
    given; AgentbenchError listing the words for any other value."""
    if value is None:
        return None
    for word in choices:
        if value == word:
            return word
    raise AgentbenchError(f"{name}: expected one of {', '.join(choices)}, got {value!r}")


def shard(value: object) -> tuple[int, int] | None:
    """``K/N`` (1 <= K <= N) as a pair, None when not given."""
    if value is None:
        return None
    k, sep, n = str(value).partition("/")
    if sep and k.strip().isdigit() and n.strip().isdigit():
        one, total = int(k), int(n)
        if 1 <= one <= total:
            return one, total
    raise AgentbenchError(f"agentbench shard: expected K/N with 1 <= K <= N, got {value!r}")


def task_range(value: object) -> tuple[int | None, int | None] | None:
    """``N`` (the first N tasks) or ``START:STOP`` (0-based, STOP excluded, either may be
    left out) as a pair, None when not given."""
    if value is None:
        return None
    written = str(value).strip()
    start, _, stop = written.rpartition(":") if ":" in written else ("", "", written)
    parts = [part.strip() for part in (start, stop)]
    if all(not part or part.isdigit() for part in parts) and any(parts):
        low, high = (int(part) if part else None for part in parts)
        if low is None or high is None or low <= high:
            return low, high
    raise AgentbenchError(
        f"agentbench limit: expected N or START:STOP (0-based, STOP excluded), got {value!r}"
    )


def range_text(limit: tuple[int | None, int | None] | None) -> str | None:
    """A range as ``START:STOP`` (an end left out when open), None for no range."""
    if limit is None:
        return None
    start, stop = ("" if end is None else str(end) for end in limit)
    return f"{start}:{stop}"


def perturbations(value: object) -> tuple[str, ...]:
    """The perturbation names of ``--agentbench-perturb`` (comma-separated)."""
    if value is None:
        return ()
    from pytest_agentbench.suites.perturb import parse_perturbations

    try:
        return parse_perturbations(str(value))
    except ValueError as exc:
        raise AgentbenchError(f"--agentbench-perturb: {exc}") from None
