"""What a verifier is: a kind name, a schema for its options, and a verify function."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from pytest_agentbench.suites.task import Task


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
    details: Mapping[str, Any] = field(default_factory=dict)
    feedback: str = ""
    error: str | None = None


@dataclass(frozen=True)
class Check:
    """Everything a verifier may look at for one attempt. ``workspace`` is the agent's
    workspace directory when the attempt ran in one (code verifiers then judge it as the
    agent left it); None for a plain answer."""

    answer: str
    task: Task
    options: Mapping[str, Any]
    verifier_dir: Path | None = None
    workspace: Path | None = None


class Verifier(Protocol):
    """A verifier family. ``options_schema`` is a JSON Schema for the suite's options
    (checked when the suite loads, so a typo is a collection error, not a failed task)."""

    kind: str
    options_schema: Mapping[str, Any]

    def verify(self, check: Check) -> Verdict: ...


@dataclass(frozen=True)
class FunctionVerifier:
    """A verifier made from a plain function ``(Check) -> Verdict``."""

    kind: str
    function: Callable[[Check], Verdict]
    options_schema: Mapping[str, Any] = field(default_factory=lambda: {"type": "object"})

    def verify(self, check: Check) -> Verdict:
        return self.function(check)
