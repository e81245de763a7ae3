"""What tests need to check a run's files against the published schemas
(pytest_agentbench/schemas/): every JSON file under a run folder validated, and two small
suites (answers with a repair, code tasks) whose runs write a varied set of files."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from pytest_agentbench import schemas

ANSWERS = """
[suite]
name = "answers"
verifier = { kind = "number" }
repairs = 1

[[task]]
id = "right"
input = "2 + 2?"
target = 4
scripted = ["4"]

[[task]]
id = "repaired"
input = "3 + 4?"
target = 7
scripted = ["8", "7"]

[[task]]
id = "wrong"
input = "5 + 5?"
target = 10
scripted = ["11", "12"]
"""

CODE = '''
[suite]
name = "code"
verifier = { kind = "python_tests" }

[[task]]
id = "add-ok"
input = "Write add(a, b)."
target = """
from solution import add

def test_small():
    assert add(1, 2) == 3
"""
scripted = ["```python\\ndef add(a, b):\\n    return a + b\\n```"]

[[task]]
id = "add-bad"
input = "Write add(a, b)."
target = """
from solution import add

def test_small():
    assert add(1, 2) == 3

def test_zero():
    assert add(0, 0) == 0
"""
scripted = ["```python\\ndef add(a, b):\\n    return a - b\\n```"]
'''


def run_files(run: Path) -> list[Path]:
    return sorted(p for p in run.rglob("*.json") if p.is_file())


def validate_run(run: Path) -> dict[str, int]:
    """Validate every JSON file under ``run``; return how many of each schema were seen."""
    seen: dict[str, int] = {}
    unmapped = []
    for path in run_files(run):
        name = schemas.schema_for(path.relative_to(run))
        if name is None:
            unmapped.append(str(path.relative_to(run)))
            continue
        data = json.loads(path.read_text(encoding="utf-8"))
        try:
            schemas.validate(name, data)
        except jsonschema.ValidationError as exc:
            pytest.fail(f"{path.relative_to(run)} does not match schema {name!r}: {exc.message}")
        seen[name] = seen.get(name, 0) + 1
    assert not unmapped, f"JSON files with no schema mapped to them: {unmapped}"
    return seen
