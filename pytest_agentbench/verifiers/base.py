"""What a verifier is: a kind name, a schema for its options, a verify function, and
(optionally) a collection-time check of a task's setup."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from pytest_agentbench.core.durations import seconds_text
from pytest_agentbench.core.fastclass import dataclass
from pytest_agentbench.core.jsontypes import JsonObject, JsonValue
from pytest_agentbench.core.stream import EventSink
from pytest_agentbench.errors import AgentbenchError
from pytest_agentbench.suites.task import Task

if TYPE_CHECKING:
    from pytest_agentbench.environments.container import Container


@dataclass(frozen=True)
class Verdict:
    """A verifier's answer.

    ``reward`` is in [0, 1]. ``metrics`` are numbers worth showing in a failure line
    (``reward`` itself excluded); ``details`` is free-form JSON for the record;
    ``feedback`` is the text a repair round shows the model; ``error`` is set when the
    verifier could not judge (bad options, crash) — then reward is 0 and the error is the
    failure reason.
    """

    reward: float
    metrics: Mapping[str, float] = field(default_factory=dict)
    details: Mapping[str, JsonValue] = field(default_factory=dict)
    feedback: str = ""
    error: str | None = None


@dataclass(frozen=True)
class Check:
    """Everything a verifier may look at for one attempt. ``workspace`` is the agent's
    workspace directory when the attempt ran in one (code verifiers then judge it as the
    agent left it); None for a plain answer. ``deadline`` and ``watch`` bound a model a
    verifier calls (the judge's stream is watched for loops like the model's)."""

    answer: str
    task: Task
    options: Mapping[str, JsonValue]
    verifier_dir: Path | None = None
    workspace: Path | None = None
    #: the task's deadline (``time.monotonic()``), for a verifier that calls a model
    deadline: float | None = None
    #: a fresh loop watch for a model stream the verifier reads (a judge's), or None
    watch: Callable[[], EventSink] | None = None
    #: the rollout's container when the task has an environment: the agent worked
    #: there and the verifier runs there (None otherwise)
    container: Container | None = None


def number_option(options: Mapping[str, JsonValue], name: str, default: float) -> float:
    """``float(options.get(name, default))``: the suite's schema has made the option a
    number; another value fails as ``float`` would (TypeError, or ValueError for a string
    that is no number)."""
    value = options.get(name, default)
    if isinstance(value, int | float | str):
        return float(value)
    raise TypeError(f"option {name!r} must be a number, not {type(value).__name__}")


@dataclass(frozen=True)
class ConfigProblem:
    """Why a verifier cannot judge a task whatever the answer, found at collection.

    ``at`` says where the fault is: ``("options", "<name>")`` for one of the verifier's
    options, ``("target",)`` or ``("choices",)`` for the task's own key, ``()`` for the
    setup as a whole. ``text`` completes a sentence whose subject is that place
    (``is not a valid regular expression: missing ) at position 2``).
    """

    at: tuple[str, ...]
    text: str


def out_of_time(limit_s: float | None, label: str | None = None) -> str:
    """The judge error of a judge that did not finish grading within its time limit."""
    limit = f" of {seconds_text(limit_s)} s" if limit_s is not None else ""
    who = f"judge {label}" if label else "the judge"
    return (
        f"{who} did not finish within its own time limit{limit} (not the task's: "
        "--agentbench-judge-timeout, or the judge table's timeout_s)"
    )


@runtime_checkable
class OwnTimeLimit(Protocol):
    """A verifier whose time is its own, not the answer's (the judge): the rollout bounds
    its verification by ``time_limit_s`` (None: by the task's deadline) and does not
    count that time against the task's deadline; a verification that overruns it is a
    harness error of the verifier, never the task's timeout."""

    def time_limit_s(self, options: Mapping[str, JsonValue]) -> float | None:
        """Seconds one verification with these options may take."""


class Verifier(Protocol):
    """A verifier family. ``options_schema`` is a JSON Schema for the suite's options
    (checked when the suite loads, so a typo is a collection error, not a failed task).

    A verifier may also define ``check_task(task) -> Iterable[ConfigProblem]``: called
    once per task at collection, after its options passed the schema, with the task fully
    resolved (``task.verifier.options``, ``task.target``, ``task.choices``). Each problem
    it yields becomes a collection error naming the file, the task and the place, so a
    setup no answer could pass (a bad pattern, a target outside the choices) never costs
    a model request nor reads as the model's failure. Raising VerifierError there is one
    problem of the whole setup. Every built-in defines it; it is optional for plugins.
    """

    @property
    def kind(self) -> str:
        """The ``verifier.kind`` a suite names this family by."""

    @property
    def options_schema(self) -> Mapping[str, JsonValue]:
        """The JSON Schema of the options a suite may give (read-only: a frozen record or
        a plain class attribute both satisfy it)."""

    def verify(self, check: Check) -> Verdict: ...


@dataclass(frozen=True)
class FunctionVerifier:
    """A verifier made from a plain function ``(Check) -> Verdict``."""

    kind: str
    function: Callable[[Check], Verdict]
    options_schema: JsonObject = field(default_factory=lambda: {"type": "object"})
    task_check: Callable[[Task], Iterable[ConfigProblem]] | None = None

    def verify(self, check: Check) -> Verdict:
        return self.function(check)

    def check_task(self, task: Task) -> Iterable[ConfigProblem]:
        """The problems ``task_check`` finds in the task's setup (none without one)."""
        return () if self.task_check is None else self.task_check(task)


class JudgeError(AgentbenchError):
    """A judge (a model grading an answer) gave no usable verdict: its model failed, or
    its reply was still unusable after one retry. A harness error of its own kind
    (``judge_error``), never the model's failure; ``record`` is what the judging cost
    and found (the task record's ``judge`` table). Here, not in verifiers/judge.py, so
    that a rollout catches it without importing the judge."""

    def __init__(self, message: str, *, record: JsonObject | None = None) -> None:
        super().__init__(message)
        self.record = record


class LazyVerifier:
    """A verifier family whose module is imported only when a task first uses it (its
    schema, its checks, a verification): a run that never names the family pays nothing
    for it (tests/package/test_lazy_imports.py). ``load`` returns the real verifier, once
    whatever the thread (every time when not ``keep``); ``resolve`` is it."""

    def __init__(self, kind: str, load: Callable[[], Verifier], keep: bool = True) -> None:
        import threading

        self.kind = kind
        self._load = load
        self._keep = keep
        self._real: Verifier | None = None
        self._lock = threading.Lock()

    def resolve(self) -> Verifier:
        if not self._keep:  # (a module-level one: pytester may import the module anew)
            return self._load()
        real = self._real
        if real is None:
            with self._lock:
                if self._real is None:
                    self._real = self._load()
                real = self._real
        return real

    @property
    def options_schema(self) -> Mapping[str, JsonValue]:
        return self.resolve().options_schema

    def verify(self, check: Check) -> Verdict:
        return self.resolve().verify(check)

    def check_task(self, task: Task) -> Iterable[ConfigProblem]:
        check = getattr(self.resolve(), "check_task", None)
        return check(task) if check is not None else ()


def resolved(verifier: Verifier | None) -> Verifier | None:
    """``verifier`` itself, or the real one behind a LazyVerifier (imported now)."""
    return verifier.resolve() if isinstance(verifier, LazyVerifier) else verifier
