"""What the suite loading tests share: stand-in verifiers (the loader only needs their kinds
and option schemas), file writing, the problems of a broken file, and a manifest example."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pytest_agentbench.errors import SuiteError
from pytest_agentbench.suites import load_suite
from pytest_agentbench.verifiers.base import Check, FunctionVerifier, Verdict


def _judge(check: Check) -> Verdict:
    return Verdict(1.0 if check.answer == str(check.task.target) else 0.0)


def _verifier(kind: str, properties: dict[str, Any], required: tuple[str, ...] = ()) -> Any:
    schema = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        schema["required"] = list(required)
    return FunctionVerifier(kind, _judge, schema)


VERIFIERS = {
    v.kind: v
    for v in (
        _verifier("number", {"tolerance": {"type": "number", "minimum": 0}}),
        _verifier("exact", {"case_sensitive": {"type": "boolean"}}),
        _verifier("includes", {}),
        _verifier("choice", {}),
        _verifier("regex", {"pattern": {"type": "string"}}, ("pattern",)),
    )
}
KINDS = "choice, exact, includes, number, regex"


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def problems(path: Path, verifiers: Any = None, **kwargs: Any) -> list[str]:
    """Load a broken suite; return its problems after checking the message names the file."""
    with pytest.raises(SuiteError) as info:
        load_suite(path, VERIFIERS if verifiers is None else verifiers, **kwargs)
    error = info.value
    assert error.path == str(path)
    assert str(error).startswith(f"{path}: invalid suite")
    assert all(f"  - {problem}\n" in f"{error}\n" for problem in error.problems)
    assert "Traceback" not in str(error)
    return error.problems


HUMANEVAL = [
    {
        "task_id": "HumanEval/0",
        "prompt": "def add(a, b):\n",
        "canonical": "a + b",
        "entry_point": "add",
    },
    {"task_id": "HumanEval/1", "prompt": "def neg(a):\n", "canonical": "-a", "entry_point": "neg"},
]
MANIFEST = """
[suite]
name = "humaneval"
dataset = "data/humaneval.jsonl"
fields = { id = "task_id", input = "prompt", target = "canonical", vars = ["entry_point"] }
template = "Complete {entry_point}:\\n{input}"
verifier = { kind = "exact" }
marks = ["code"]
"""
