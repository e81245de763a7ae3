"""The parts a task record holds, each a small frozen record: the repair settings, the
loop evidence, the verdict, each round's reward and tokens, an earlier run of a rerun
task and a control's table; and the reading of JSON into them.

Each part writes the JSON it was read from (``to_json`` / ``from_json``); the shapes are
those of ``schemas/task_record.schema.json``. ``from_json`` is the JSON edge: it takes
what ``json.loads`` gave (``object``), checks each field and raises ValueError naming it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field
from typing import Literal, cast

from pytest_agentbench.core.fastclass import dataclass
from pytest_agentbench.core.jsontypes import JsonObject, JsonValue
from pytest_agentbench.core.usage import Usage

# --- reading JSON: one checked getter per JSON type ---------------------------------------

Obj = Mapping[str, object]


def json_object(data: object, where: str) -> Obj:
    """``data`` as a JSON object; ValueError naming ``where`` when it is not one."""
    if not isinstance(data, Mapping):
        raise ValueError(f"{where}: expected a JSON object, got {type(data).__name__}")
    return data


def read_field(obj: Obj, key: str, where: str) -> object:
    """The value of the required field ``key``, whatever its type."""
    if key not in obj:
        raise ValueError(f"{where}: the required field {key!r} is missing")
    return obj[key]


def _bad(where: str, key: str, expected: str, value: object) -> ValueError:
    return ValueError(f"{where}.{key}: expected {expected}, got {type(value).__name__}")


def read_str(obj: Obj, key: str, where: str) -> str:
    value = read_field(obj, key, where)
    if not isinstance(value, str):
        raise _bad(where, key, "str", value)
    return value


def read_int(obj: Obj, key: str, where: str) -> int:
    value = read_field(obj, key, where)
    if not isinstance(value, int) or isinstance(value, bool):
        raise _bad(where, key, "int", value)
    return value


def read_bool(obj: Obj, key: str, where: str) -> bool:
    value = read_field(obj, key, where)
    if not isinstance(value, bool):
        raise _bad(where, key, "bool", value)
    return value


def read_number(obj: Obj, key: str, where: str) -> float:
    """A JSON number, kept as it was written (an int stays an int)."""
    value = read_field(obj, key, where)
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise _bad(where, key, "int or float", value)
    return value


def read_json_object(obj: Obj, key: str, where: str) -> JsonObject:
    value = read_field(obj, key, where)
    if not isinstance(value, dict):
        raise _bad(where, key, "object", value)
    return cast(JsonObject, value)  # read by json.loads: JSON all the way down


def read_list(obj: Obj, key: str, where: str) -> list[object]:
    value = read_field(obj, key, where)
    if not isinstance(value, list):
        raise _bad(where, key, "list", value)
    return cast(list[object], value)


def nullable_str(obj: Obj, key: str, where: str) -> str | None:
    """A field that must be there, null or a string (``maybe_*``: one that may be left out)."""
    return None if read_field(obj, key, where) is None else read_str(obj, key, where)


def nullable_int(obj: Obj, key: str, where: str) -> int | None:
    return None if read_field(obj, key, where) is None else read_int(obj, key, where)


def nullable_number(obj: Obj, key: str, where: str) -> float | None:
    return None if read_field(obj, key, where) is None else read_number(obj, key, where)


def maybe_str(obj: Obj, key: str, where: str) -> str | None:
    return None if obj.get(key) is None else read_str(obj, key, where)


def maybe_int(obj: Obj, key: str, where: str) -> int | None:
    return None if obj.get(key) is None else read_int(obj, key, where)


def maybe_number(obj: Obj, key: str, where: str) -> float | None:
    return None if obj.get(key) is None else read_number(obj, key, where)


def maybe_bool(obj: Obj, key: str, where: str) -> bool | None:
    return None if obj.get(key) is None else read_bool(obj, key, where)


def maybe_json_object(obj: Obj, key: str, where: str) -> JsonObject | None:
    return None if obj.get(key) is None else read_json_object(obj, key, where)


# --- the parts ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RepairSettings:
    """The repair settings a task ran with: how many repair rounds it was allowed, the
    ``mode`` (conversation or stateless) and the ``feedback`` level. A task that never
    ran has none (all None, written ``{}``)."""

    repairs: int | None = None
    mode: str | None = None
    feedback: str | None = None

    def to_json(self) -> JsonObject:
        data: JsonObject = {}
        if self.repairs is not None:
            data["repairs"] = self.repairs
        if self.mode is not None:
            data["mode"] = self.mode
        if self.feedback is not None:
            data["feedback"] = self.feedback
        return data

    @classmethod
    def from_json(cls, data: object, where: str = "repair") -> RepairSettings:
        obj = json_object(data, where)
        return cls(
            repairs=maybe_int(obj, "repairs", where),
            mode=maybe_str(obj, "mode", where),
            feedback=maybe_str(obj, "feedback", where),
        )


#: The loop evidence's fields, in the order they are written (each only when set).
_LOOP_NUMBERS = ("score", "detected_s", "killed_s", "held_s")


@dataclass(frozen=True, slots=True)
class LoopRecord:
    """The loop evidence worth reporting for a task: a killed loop (``channel``
    thinking, answer or tools; its ``period`` and ``repetitions``, ``score``, when it was
    detected and killed, the ``rule`` that killed it, an ``excerpt``) or a thinking loop
    the model ``recovered`` from. ``attempt`` is the attempt it happened in (1-based).
    ``more`` keeps any other field as written."""

    channel: str | None = None
    period: int | None = None
    repetitions: float | None = None
    numeric: bool | None = None
    score: float | None = None
    detected_s: float | None = None
    killed_s: float | None = None
    held_s: float | None = None
    chars: int | None = None
    calls: int | None = None
    excerpt: str | None = None
    rule: str | None = None
    attempt: int | None = None
    recovered: bool = False
    more: JsonObject = field(default_factory=dict)

    def to_json(self) -> JsonObject:
        data: JsonObject = {"recovered": True} if self.recovered else {}
        for name, value in (
            ("channel", self.channel),
            ("period", self.period),
            ("repetitions", self.repetitions),
            ("numeric", self.numeric),
            ("score", self.score),
            ("detected_s", self.detected_s),
            ("killed_s", self.killed_s),
            ("held_s", self.held_s),
            ("chars", self.chars),
            ("calls", self.calls),
            ("excerpt", self.excerpt),
            ("rule", self.rule),
            ("attempt", self.attempt),
        ):
            if value is not None:
                data[name] = value
        data.update(self.more)
        return data

    @classmethod
    def from_json(cls, data: object, where: str = "loop") -> LoopRecord:
        obj = json_object(data, where)
        known = set(_LOOP_FIELDS)
        numbers = {name: maybe_number(obj, name, where) for name in _LOOP_NUMBERS}
        numeric = obj.get("numeric")
        return cls(
            channel=maybe_str(obj, "channel", where),
            period=maybe_int(obj, "period", where),
            repetitions=maybe_number(obj, "repetitions", where),
            numeric=numeric if isinstance(numeric, bool) else None,
            score=numbers["score"],
            detected_s=numbers["detected_s"],
            killed_s=numbers["killed_s"],
            held_s=numbers["held_s"],
            chars=maybe_int(obj, "chars", where),
            calls=maybe_int(obj, "calls", where),
            excerpt=maybe_str(obj, "excerpt", where),
            rule=maybe_str(obj, "rule", where),
            attempt=maybe_int(obj, "attempt", where),
            recovered=obj.get("recovered") is True,
            more={k: cast(JsonValue, v) for k, v in obj.items() if k not in known},
        )


_LOOP_FIELDS = (
    "recovered",
    "channel",
    "period",
    "repetitions",
    "numeric",
    *_LOOP_NUMBERS,
    "chars",
    "calls",
    "excerpt",
    "rule",
    "attempt",
)


@dataclass(frozen=True, slots=True)
class VerdictRecord:
    """The last verdict a task reached, as the reports need it: its ``reward``, the
    verifier's ``metrics`` (its own JSON) and its ``error`` (None when it judged)."""

    reward: float | None
    metrics: JsonObject
    error: str | None

    def to_json(self) -> JsonObject:
        return {"reward": self.reward, "metrics": self.metrics, "error": self.error}

    @classmethod
    def from_json(cls, data: object, where: str = "verdict") -> VerdictRecord:
        obj = json_object(data, where)
        return cls(
            reward=nullable_number(obj, "reward", where),
            metrics=read_json_object(obj, "metrics", where),
            error=nullable_str(obj, "error", where),
        )


@dataclass(frozen=True, slots=True)
class Round:
    """One attempt of a task (round 0 is the first try): its reward (None without a
    verdict) and its total tokens (None when unknown). The repair curve's input."""

    reward: float | None
    tokens: int | None

    def to_json(self) -> JsonObject:
        return {"reward": self.reward, "tokens": self.tokens}

    @classmethod
    def from_json(cls, data: object, where: str = "round") -> Round:
        obj = json_object(data, where)
        return cls(
            reward=nullable_number(obj, "reward", where),
            tokens=nullable_int(obj, "tokens", where),
        )


@dataclass(frozen=True, slots=True)
class Rerun:
    """An earlier run of a task run again in the same session (pytest-rerunfailures, an
    xdist crash retry): what the reports list of it, never counted as a task."""

    outcome: str | None = None
    reward: float | None = None
    message: str | None = None
    error: str | None = None
    start_ms: int | None = None
    duration_ms: int | None = None
    attempts: int | None = None
    usage: Usage | None = None

    def to_json(self) -> JsonObject:
        return {
            "outcome": self.outcome,
            "reward": self.reward,
            "message": self.message,
            "error": self.error,
            "start_ms": self.start_ms,
            "duration_ms": self.duration_ms,
            "attempts": self.attempts,
            "usage": None if self.usage is None else self.usage.to_json(),
        }

    @classmethod
    def from_json(cls, data: object, where: str = "rerun") -> Rerun:
        obj = json_object(data, where)
        usage = obj.get("usage")
        return cls(
            outcome=maybe_str(obj, "outcome", where),
            reward=maybe_number(obj, "reward", where),
            message=maybe_str(obj, "message", where),
            error=maybe_str(obj, "error", where),
            start_ms=maybe_int(obj, "start_ms", where),
            duration_ms=maybe_int(obj, "duration_ms", where),
            attempts=maybe_int(obj, "attempts", where),
            usage=None if usage is None else Usage.from_json(usage),
        )


ControlExpect = Literal["pass", "fail"]


@dataclass(frozen=True, slots=True)
class ControlRecord:
    """A control's table (artifacts/controls.py): which control, whether its answer was
    known-good (``expect`` pass) or must fail, where the answer came from, whether it is
    a canary, whether it ``behaved`` (None: no verdict to judge, or it never ran) and why
    it is ``missing`` (None when it ran)."""

    name: str
    expect: ControlExpect
    source: str
    canary: bool
    behaved: bool | None
    missing: str | None
    #: a person's label of the answer (a calibration item of a judge), else None
    label: JsonValue = None

    @property
    def calibration(self) -> bool:
        """True for a labelled answer judged to calibrate a judge (never a control)."""
        return self.name.startswith("label-")

    def to_json(self) -> JsonObject:
        data: JsonObject = {
            "name": self.name,
            "expect": self.expect,
            "source": self.source,
            "canary": self.canary,
            "behaved": self.behaved,
            "missing": self.missing,
        }
        if self.label is not None:
            data["label"] = self.label
        return data

    @classmethod
    def from_json(cls, data: object, where: str = "control") -> ControlRecord:
        obj = json_object(data, where)
        expect = obj.get("expect")
        if expect != "pass" and expect != "fail":
            raise ValueError(f"{where}.expect: expected pass or fail, got {expect!r}")
        return cls(
            name=read_str(obj, "name", where),
            expect=expect,
            source=read_str(obj, "source", where),
            canary=read_bool(obj, "canary", where),
            behaved=maybe_bool(obj, "behaved", where),
            missing=maybe_str(obj, "missing", where),
            label=_label(obj.get("label")),
        )


def _label(value: object) -> JsonValue:
    """A calibration label as read back: a string, number or bool; None otherwise."""
    return value if isinstance(value, str | int | float | bool) else None
