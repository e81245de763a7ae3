"""Sampling and generation settings: one frozen ``Sampling`` that travels from the ini
file, the command line, a suite and a task to the request, and into every record.

Every field is None when nobody set it; an unset field is never sent, so the provider's
own default applies. ``extra_body`` is kept as canonical JSON text so a ``Sampling`` stays
hashable (the run's settings are hashed for the fingerprint).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import fields, replace
from typing import TypeGuard

from pytest_agentbench.core.choices import REASONING_EFFORTS as REASONING_EFFORTS
from pytest_agentbench.core.choices import ReasoningEffort as ReasoningEffort
from pytest_agentbench.core.fastclass import dataclass
from pytest_agentbench.core.jsontypes import JsonObject, JsonValue

#: The settings, in the order they are documented and recorded.
SAMPLING_FIELDS = (
    "temperature",
    "top_p",
    "top_k",
    "seed",
    "stop",
    "reasoning_effort",
    "thinking_budget",
    "extra_body",
)


#: Keys of a request body that ``extra_body`` may not set: the harness owns them.
RESERVED_BODY_KEYS = (
    "model",
    "messages",
    "input",
    "instructions",
    "system",
    "stream",
    "stream_options",
    "tools",
)

#: Largest seed accepted (a signed 64-bit integer, what the servers take).
MAX_SEED = 2**63 - 1


@dataclass(frozen=True)
class Sampling:
    """The sampling settings of one request; None means not set (not sent)."""

    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    seed: int | None = None
    stop: tuple[str, ...] | None = None
    reasoning_effort: ReasoningEffort | None = None
    thinking_budget: int | None = None
    #: A JSON object as canonical text (sorted keys), merged last into the body.
    extra_body: str | None = None

    def over(self, under: Sampling) -> Sampling:
        """These settings with ``under``'s filling the fields not set here (``under``
        itself when none is set here: tasks share their suite's)."""
        if self == _UNSET:
            return under
        changes = {
            f.name: getattr(under, f.name) for f in fields(self) if getattr(self, f.name) is None
        }
        return replace(self, **changes)

    @property
    def extra(self) -> JsonObject:
        """``extra_body`` as an object ({} when not set)."""
        value: JsonValue = json.loads(self.extra_body) if self.extra_body else {}
        return value if isinstance(value, dict) else {}

    def public(self) -> JsonObject:
        """The fields that are set, as JSON values (what records and reports show), in
        the order of SAMPLING_FIELDS."""
        every: JsonObject = {
            "temperature": self.temperature,
            "top_p": self.top_p,
            "top_k": self.top_k,
            "seed": self.seed,
            "stop": None if self.stop is None else list(self.stop),
            "reasoning_effort": self.reasoning_effort,
            "thinking_budget": self.thinking_budget,
            "extra_body": None if self.extra_body is None else self.extra,
        }
        return {name: value for name, value in every.items() if value is not None}

    @classmethod
    def parse(cls, values: Mapping[str, object]) -> Sampling:
        """Build from a table of settings (a suite's ``sampling``, the options). Raises
        ValueError naming the first bad setting and what it expected."""
        problems = sampling_problems(values)
        if problems:
            key, text = problems[0]
            raise ValueError(f"{key}: {text}")
        # sampling_problems has checked each value's type: these only narrow it
        stop = values.get("stop")
        extra = values.get("extra_body")
        return cls(
            temperature=_float(values.get("temperature")),
            top_p=_float(values.get("top_p")),
            top_k=_int(values.get("top_k")),
            seed=_int(values.get("seed")),
            stop=(stop,) if isinstance(stop, str) else _texts(stop),
            reasoning_effort=_effort(values.get("reasoning_effort")),
            thinking_budget=_int(values.get("thinking_budget")),
            extra_body=None if extra is None else json.dumps(extra, sort_keys=True),
        )


def _float(value: object) -> float | None:
    return float(value) if _is_number(value) else None


def _int(value: object) -> int | None:
    return int(value) if _is_integer(value) else None


def _texts(value: object) -> tuple[str, ...] | None:
    return tuple(str(s) for s in value) if isinstance(value, list | tuple) else None


def _effort(value: object) -> ReasoningEffort | None:
    return next((effort for effort in REASONING_EFFORTS if effort == value), None)


def _is_number(value: object) -> TypeGuard[float]:
    """A finite int or float (not a bool)."""
    if isinstance(value, bool):
        return False
    return isinstance(value, int | float) and math.isfinite(value)


def _is_integer(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def sampling_problems(values: Mapping[str, object]) -> list[tuple[str, str]]:
    """Every bad setting in ``values`` as ``(key, problem)``; unset
    (None) values are fine. The suite schema says the same for suite files."""
    problems: list[tuple[str, str]] = []

    def bad(key: str, expected: str) -> None:
        problems.append((key, f"expected {expected}, got {values[key]!r}"))

    for key in values:
        if key not in SAMPLING_FIELDS:
            problems.append((key, f"unknown setting; expected one of {', '.join(SAMPLING_FIELDS)}"))
    number = values.get("temperature")
    if number is not None and not (_is_number(number) and 0 <= number <= 2):
        bad("temperature", "a number from 0 to 2")
    number = values.get("top_p")
    if number is not None and not (_is_number(number) and 0 <= number <= 1):
        bad("top_p", "a number from 0 to 1")
    number = values.get("top_k")
    if number is not None and not (_is_integer(number) and 1 <= number <= 1_000_000):
        bad("top_k", "an integer from 1 to 1000000")
    number = values.get("seed")
    if number is not None and not (_is_integer(number) and 0 <= number <= MAX_SEED):
        bad("seed", f"an integer from 0 to {MAX_SEED}")
    number = values.get("thinking_budget")
    if number is not None and not (_is_integer(number) and 1 <= number <= 10_000_000):
        bad("thinking_budget", "an integer from 1 to 10000000")
    effort = values.get("reasoning_effort")
    if effort is not None and effort not in REASONING_EFFORTS:
        bad("reasoning_effort", f"one of {', '.join(REASONING_EFFORTS)}")
    stop = values.get("stop")
    if stop is not None and not (
        (isinstance(stop, str) and stop)
        or (isinstance(stop, list | tuple) and stop and all(isinstance(s, str) and s for s in stop))
    ):
        bad("stop", "a non-empty string or a list of them")
    extra = values.get("extra_body")
    if extra is not None:
        if not isinstance(extra, Mapping):
            bad("extra_body", "a table (a JSON object) of provider-specific fields")
        elif reserved := [key for key in extra if key in RESERVED_BODY_KEYS]:
            problems.append(
                ("extra_body", f"may not set {', '.join(reserved)}: the harness sends those")
            )
        else:
            try:
                json.dumps(extra)
            except (TypeError, ValueError) as exc:
                problems.append(("extra_body", f"must hold JSON values only: {exc}"))
    return problems


_UNSET = Sampling()
