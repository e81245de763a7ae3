"""A failed code task's one-line reason names what went wrong, from the verifier's own
files: the first failing test and its assertion, the timeout, the tampering, never just a
count like ``tests passed 0/1``. Real `pytest --agentbench` runs through the scripted
model, and the miner on real files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from records_support import make_record

from pytest_agentbench.report.evidence import failure_reason

TESTS = (
    "from solution import add\\n"
    "def test_small():\\n    assert add(1, 2) == 3, 'one and two make three'\\n"
    "def test_zero():\\n    assert add(0, 0) == 0\\n"
)


def run_suite(
    pytester: pytest.Pytester, answer: str, timeout_s: float = 30, repairs: int = 0
) -> pytest.RunResult:
    pytester.makefile(
        ".toml",
        bench_code=(
            "[suite]\n"
            f'verifier = {{ kind = "python_tests", tests = "{TESTS}", timeout_s = {timeout_s} }}\n'
            f"repairs = {repairs}\n"
            "[[task]]\n"
            'id = "add"\n'
            'input = "Write add(a, b)."\n'
            f"scripted = [{json.dumps(answer)}, {json.dumps(answer)}]\n"
        ),
    )
    return pytester.runpytest_subprocess("--agentbench", "-p", "no:cacheprovider", timeout=300)


@pytest.mark.slow
def test_the_line_names_the_first_failing_test_and_its_assertion(
    pytester: pytest.Pytester,
) -> None:
    result = run_suite(pytester, "def add(a, b):\n    return a * b\n")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "✗ code::add: reward 0.5 — test_small failed: AssertionError: one and two make "
            "three assert 2 == 3* (1/2 checks passed)"
        ]
    )
    assert "tests passed" not in result.stdout.str()


@pytest.mark.slow
def test_after_repairs_the_line_still_names_the_assertion(pytester: pytest.Pytester) -> None:
    result = run_suite(pytester, "def add(a, b):\n    return a * b\n", repairs=1)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "✗ code::add: reward 0.5 — repairs exhausted (1): test_small failed: AssertionError: "
            "one and two make three* (1/2 checks passed)"
        ]
    )


@pytest.mark.slow
def test_the_line_names_the_timeout(pytester: pytest.Pytester) -> None:
    answer = "import time\ndef add(a, b):\n    time.sleep(600)\n"
    result = run_suite(pytester, answer, timeout_s=3)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "✗ code::add: reward 0 — test_small did not run: the test run timed out after "
            "3.*s (+1 more failure; 0/2 checks passed)"
        ]
    )


@pytest.mark.slow
def test_the_line_names_the_tampering(pytester: pytest.Pytester) -> None:
    answer = (
        "import _pytest.python\n"
        "_pytest.python.Function.runtest = lambda self: None\n"
        "def add(a, b):\n    return 0\n"
    )
    result = run_suite(pytester, answer)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "✗ code::add: reward 0 — test_small not trusted: the run changed "
            "_pytest.python.Function.runtest (+1 more failure; 0/2 checks passed)"
        ]
    )


def write_ctrf(directory: Path, tests: list[dict]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    report = {"results": {"summary": {"tests": len(tests)}, "tests": tests}}
    (directory / "ctrf.json").write_text(json.dumps(report))


def test_the_inner_ctrf_beats_the_metric_count(tmp_path: Path) -> None:
    """The verdict's metrics only count; the inner report names the failure."""
    write_ctrf(
        tmp_path / "verifier",
        [
            {"name": "test_a.py::test_ok", "status": "passed", "duration": 1},
            {"name": "test_a.py::test_x", "status": "failed", "message": "assert 1 == 2"},
        ],
    )
    record = make_record(
        outcome="failed",
        reward=0.5,
        verdict={"reward": 0.5, "metrics": {"tests_passed": 1, "tests_total": 2}},
        verifier_dir=str(tmp_path / "verifier"),
    )
    assert failure_reason(record) == "reward 0.5 — test_x failed: assert 1 == 2 (1/2 checks passed)"


def test_without_a_failure_in_the_ctrf_the_metrics_still_speak(tmp_path: Path) -> None:
    write_ctrf(tmp_path / "verifier", [{"name": "t.py::test_ok", "status": "passed"}])
    record = make_record(
        outcome="failed",
        reward=0.4,
        verdict={"reward": 0.4, "metrics": {"cases_passed": 2, "cases_total": 5}},
        verifier_dir=str(tmp_path / "verifier"),
    )
    assert failure_reason(record) == "reward 0.4 — cases passed 2/5"


@pytest.mark.slow
@pytest.mark.parametrize(
    ("run", "line"),
    [
        ("echo checking; echo 'expected 5, got 4' >&2; exit 1", "exit status 1: expected 5, got 4"),
        ("sleep 60", "the check did not finish: stopped by timeout"),
    ],
    ids=["exit-status", "timeout"],
)
def test_a_failed_command_check_says_why(pytester: pytest.Pytester, run: str, line: str) -> None:
    """Without a reward file the exit status decides; the line gives it and the last
    output line (or the limit that stopped the check), not the verdict's bookkeeping."""
    pytester.makefile(
        ".toml",
        bench_cmd=(
            "[suite]\n"
            f'verifier = {{ kind = "command", run = {json.dumps(run)}, timeout_s = 3 }}\n'
            "[[task]]\n"
            'id = "check"\n'
            'input = "Say something."\n'
            'scripted = ["something"]\n'
        ),
    )
    result = pytester.runpytest_subprocess("--agentbench", "-p", "no:cacheprovider", timeout=300)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [f"✗ cmd::check: reward 0 — check failed: {line}* (0/1 checks passed)"]
    )


EXITS_AT_IMPORT = {
    "sys.exit(3)": ("import sys\nsys.exit(3)\n", "exit status 3", "SystemExit: 3"),
    "os._exit(3)": ("import os\nos._exit(3)\n", "exit status 3", "exit status 3"),
    "raise SystemExit": ("raise SystemExit('bye')\n", "exit status 3", "SystemExit: bye"),
}


@pytest.mark.parametrize("how", list(EXITS_AT_IMPORT))
def test_an_answer_that_exits_at_import_is_said_to(how: str) -> None:
    """Not "the test run ended early": the answer's own module ended the run while it was
    being imported, under python_tests (pytest collecting) and python_checks alike."""
    from verifiers_support import judge

    code, tests_why, checks_why = EXITS_AT_IMPORT[how]
    answer = f"```python\n{code}def add(a, b):\n    return a + b\n```"
    tests = "from solution import add\n\ndef test_add():\n    assert add(1, 2) == 3\n"
    verdict = judge("python_tests", answer, tests, isolation="basic")
    assert verdict.reward == 0.0
    assert verdict.details["failures"] == {
        "test_add": f"did not run: the answer's module exited during import ({tests_why})"
    }
    check = "def check(candidate):\n    assert candidate(1, 2) == 3\n"
    verdict = judge("python_checks", answer, check, isolation="basic", entry_point="add")
    assert verdict.details["failures"]["check"] == (
        f"did not run: the answer's module exited during import ({checks_why})"
    )


@pytest.mark.slow
def test_the_line_says_the_answer_exited_at_import(pytester: pytest.Pytester) -> None:
    result = run_suite(pytester, "import sys\nsys.exit(3)\ndef add(a, b):\n    return a + b\n")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "✗ code::add: reward 0 — test_small did not run: the answer's module exited "
            "during import (exit status 3)*"
        ]
    )
    assert "ended early" not in result.stdout.str()


def test_a_hang_is_placed_in_the_import_or_after_it() -> None:
    """A limit that stops the run says whether the answer's module was still importing."""
    from verifiers_support import judge

    check = "def check(candidate):\n    assert candidate(1, 2) == 3\n"
    found = {}
    for where, code in {
        "import": "import time\ntime.sleep(60)\n",
        "call": "import time\ndef add(a, b):\n    time.sleep(60)\n",
    }.items():
        verdict = judge(
            "python_checks",
            f"```python\n{code}```",
            check,
            isolation="basic",
            entry_point="add",
            timeout_s=1,
        )
        found[where] = verdict.details["failures"]["check"]
    assert found["import"].startswith(
        "did not run: the answer's module was still importing when the run timed out after"
    )
    assert found["call"].startswith("did not run: the run timed out after")
