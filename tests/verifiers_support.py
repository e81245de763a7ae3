"""Judging with one built-in verifier the way the runner does, and what every verdict owes
the artifacts and the failure-line miner."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import jsonschema

from pytest_agentbench.suites.task import Task, VerifierConfig
from pytest_agentbench.verifiers.base import Check, Verdict
from pytest_agentbench.verifiers.builtin import BUILTIN_VERIFIERS

VERIFIERS = {v.kind: v for v in BUILTIN_VERIFIERS}
CAPITALS = ("Paris", "Rome", "Madrid", "New York")


def judge(
    kind: str,
    answer: str,
    target: Any = None,
    *,
    choices: tuple[str, ...] = (),
    **options: Any,
) -> Verdict:
    """Run one built-in verifier the way the runner does: options checked by its schema."""
    verifier = VERIFIERS[kind]
    jsonschema.validate(options, verifier.options_schema)
    task = Task(
        suite="unit",
        id="t1",
        index=0,
        path=Path("bench_unit.toml"),
        input="question",
        prompt="question",
        target=target,
        choices=choices,
        verifier=VerifierConfig(kind, options),
    )
    verdict = verifier.verify(Check(answer=answer, task=task, options=options))
    assert_well_formed(verdict)
    return verdict


def assert_well_formed(verdict: Verdict) -> None:
    """What every verdict owes the artifacts and the failure-line miner."""
    assert 0.0 <= verdict.reward <= 1.0
    json.dumps(dict(verdict.details), allow_nan=False)
    for name, value in verdict.metrics.items():
        assert isinstance(value, int | float) and not isinstance(value, bool), name
        assert math.isfinite(value), name
        if name.endswith("_found"):
            assert name.removesuffix("_found") + "_total" in verdict.metrics
    if verdict.error is not None:
        assert verdict.reward == 0.0
        assert verdict.error.split(" ")[1] == "verifier:"
    elif verdict.reward < 1.0:
        assert verdict.feedback.endswith(".")
    else:
        assert verdict.feedback == ""
