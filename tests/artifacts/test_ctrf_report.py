"""The run's CTRF report is accepted by the independent checker in ../shared/ctrf."""

from __future__ import annotations

import ast
import json
import shutil
from pathlib import Path

import pytest
from ctrf_support import check_ctrf

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "example_suites"


def test_example_run_report_is_accepted_by_check_ctrf(pytester: pytest.Pytester) -> None:
    for suite in EXAMPLES.glob("bench_*"):
        shutil.copy(suite, pytester.path / suite.name)
    result = pytester.runpytest("--agentbench", "-p", "no:cacheprovider")
    assert result.ret == 1  # the examples include failures on purpose
    report = (pytester.path / "agentbench-results" / "latest" / "ctrf.json").resolve()
    doc = json.loads(report.read_text())
    assert doc["results"]["tool"]["name"] == "pytest-agentbench"
    assert doc["specVersion"] == "0.0.0"
    tests = doc["results"]["tests"]
    assert {t["status"] for t in tests} >= {"passed", "failed"}
    for test in tests:
        assert test["duration"] >= 0
        extra = test["extra"]["pytest-agentbench.rollout"]
        assert extra["outcome"] == test["rawStatus"]
        assert Path(extra["rollout_dir"]).is_dir()
    checked = check_ctrf(report)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "0 warning(s)" in checked.stdout, checked.stdout


def test_check_ctrf_rejects_a_report_whose_counts_lie(tmp_path: Path) -> None:
    """Negative control: the checker really checks (so the test above can fail)."""
    bad = {
        "reportFormat": "CTRF",
        "specVersion": "0.0.0",
        "results": {
            "tool": {"name": "pytest-agentbench"},
            "summary": {
                "tests": 2,
                "passed": 2,
                "failed": 0,
                "skipped": 0,
                "pending": 0,
                "other": 0,
                "start": 1,
                "stop": 2,
            },
            "tests": [{"name": "a", "status": "failed", "duration": 1}],
        },
    }
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(bad))
    assert check_ctrf(path).returncode == 1


def _called(node: ast.AST, name: str) -> bool:
    return any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == name
        for n in ast.walk(node)
    )


def test_the_checker_is_the_last_step() -> None:
    """Without the checker beside the checkout only its own part may skip: every test
    that asks it (``assert_ctrf_accepted``) does so as its last statement, after all its
    own assertions; ``check_ctrf`` itself is for the checker's tests here."""
    misplaced = []
    for path in sorted(ROOT.joinpath("tests").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for func in ast.walk(tree):
            if not isinstance(func, ast.FunctionDef) or func.name in (
                "assert_ctrf_accepted",
                "check_ctrf",
            ):
                continue
            where = f"{path.name}::{func.name}"
            if path.name != "test_ctrf_report.py" and _called(func, "check_ctrf"):
                misplaced.append(f"{where} calls check_ctrf (use assert_ctrf_accepted, last)")
            body = func.body
            if any(_called(stmt, "assert_ctrf_accepted") for stmt in body[:-1]):
                misplaced.append(f"{where} asserts more after assert_ctrf_accepted")
    assert misplaced == []
