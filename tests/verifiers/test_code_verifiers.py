"""The code-running verifiers: python_tests (partial credit, every cheat scores 0, the inner
CTRF report) and command (reward.json, reward.txt, exit status, stale files, bad rewards),
through real subprocesses in the sandbox; and a `pytest --agentbench` run of the example
code suite through the scripted provider."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from verifiers_support import verifier_task

from pytest_agentbench.errors import SuiteError
from pytest_agentbench.suites import load_suite
from pytest_agentbench.suites.task import Task
from pytest_agentbench.verifiers.base import Check, Verdict
from pytest_agentbench.verifiers.builtin import BUILTIN_VERIFIERS
from pytest_agentbench.verifiers.code import PYTHON_TESTS, extract_code
from pytest_agentbench.verifiers.command import COMMAND

EXAMPLE = Path(__file__).resolve().parents[2] / "example_suites" / "bench_code.toml"

TESTS = """
import pytest
from solution import add


def test_small():
    assert add(1, 2) == 3


def test_negative():
    assert add(-1, -2) == -3


@pytest.mark.parametrize("a", [0, 5])
def test_double(a):
    assert add(a, a) == 2 * a
"""
RIGHT = "```python\ndef add(a, b):\n    return a + b\n```"


def task(target: Any = TESTS, kind: str = "python_tests", **fields: Any) -> Task:
    return verifier_task(kind, None, target, **fields)


def python_tests(answer: str, tmp_path: Path, **options: Any) -> Verdict:
    options.setdefault("isolation", "auto")
    check = Check(answer, task(), options, tmp_path / "rollout" / "verifier")
    return PYTHON_TESTS.verify(check)


def ctrf(tmp_path: Path) -> dict[str, Any]:
    return json.loads((tmp_path / "rollout" / "verifier" / "ctrf.json").read_text())


# --- python_tests --------------------------------------------------------------------


@pytest.mark.parametrize("isolation", ["basic", "auto"])
def test_right_answer_passes_with_a_ctrf_report(tmp_path: Path, isolation: str) -> None:
    verdict = python_tests(f"Sure:\n\n{RIGHT}\n\nDone.", tmp_path, isolation=isolation)
    assert verdict.error is None and verdict.reward == 1.0
    assert verdict.metrics == {"tests_passed": 4, "tests_total": 4}
    assert verdict.details["report"] == "complete" and verdict.details["failed_tests"] == []
    assert verdict.details["containment"]["level"] in ("strong", "basic")
    report = ctrf(tmp_path)
    assert report["reportFormat"] == "CTRF" and report["specVersion"] == "0.0.0"
    names = [t["name"] for t in report["results"]["tests"]]
    assert names == [
        "test_solution.py::test_small",
        "test_solution.py::test_negative",
        "test_solution.py::test_double[0]",
        "test_solution.py::test_double[5]",
    ]
    assert report["results"]["summary"]["passed"] == 4
    assert "nonce" not in json.dumps(report)
    stdout = (tmp_path / "rollout" / "verifier" / "test-stdout.txt").read_text()
    assert "4 passed" in stdout
    workspace = tmp_path / "rollout" / "workspace"
    assert (workspace / "solution.py").read_text().startswith("def add(a, b):")


def test_partial_credit_names_failures_and_scoring_all(tmp_path: Path) -> None:
    wrong = "```python\ndef add(a, b):\n    return a + b if a >= 0 else 0\n```"
    verdict = python_tests(wrong, tmp_path)
    assert verdict.reward == 0.75 and verdict.metrics == {"tests_passed": 3, "tests_total": 4}
    assert verdict.details["failed_tests"] == ["test_negative"]
    assert "assert 0 == -3" in verdict.details["failures"]["test_negative"]
    assert verdict.feedback == "1 of 4 tests failed: test_negative."
    failed = [t for t in ctrf(tmp_path)["results"]["tests"] if t["status"] == "failed"]
    assert [t["name"] for t in failed] == ["test_solution.py::test_negative"]
    assert python_tests(wrong, tmp_path, scoring="all").reward == 0.0


def test_assert_list_tests_each_count(tmp_path: Path) -> None:
    check = Check(
        "def double(x):\n    return x * 2 if x else 1",
        task(None),
        {"tests": ["assert double(2) == 4", "assert double(0) == 0", "assert double(-1) == -2"]},
        tmp_path / "rollout" / "verifier",
    )
    verdict = PYTHON_TESTS.verify(check)
    assert verdict.metrics == {"tests_passed": 2, "tests_total": 3}
    assert verdict.details["extraction"] == "whole answer"
    assert verdict.details["failed_tests"] == ["test_2"]


CHEATS = {
    "sys.exit at import": "import sys\nsys.exit(0)\ndef add(a, b): return a + b",
    "os._exit at import": "import os\nos._exit(0)",
    "fake summary": "print('4 passed in 0.01s')\nimport os\nos._exit(0)",
    "kill the parent": (
        "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\n"
        "import time\ntime.sleep(1)\ndef add(a, b): return None"
    ),
    "kill the whole group": "import os, signal\nos.killpg(0, signal.SIGKILL)",
    "fake ctrf files": (
        "import json, os\n"
        "fake = {'reportFormat': 'CTRF', 'specVersion': '0.0.0', 'results': {'tool': "
        "{'name': 'pytest'}, 'summary': {'tests': 4, 'passed': 4}, 'tests': []}}\n"
        "for path in ('ctrf.json', 'verifier/ctrf.json', '../verifier/ctrf.json'):\n"
        "    try:\n"
        "        os.makedirs(os.path.dirname(path) or '.', exist_ok=True)\n"
        "        open(path, 'w').write(json.dumps(fake))\n"
        "    except OSError:\n"
        "        pass\n"
        "os._exit(0)"
    ),
    "patch runtest": (
        "import _pytest.python\n_pytest.python.Function.runtest = lambda self: None\n"
        "def add(a, b): return None"
    ),
    "patch report outcome": (
        "import _pytest.reports\n_pytest.reports.BaseReport.passed = property(lambda s: True)\n"
        "def add(a, b): return None"
    ),
    "register a hook": (
        "import gc, pytest, _pytest.config\n"
        "class Always:\n"
        "    @pytest.hookimpl(wrapper=True)\n"
        "    def pytest_runtest_makereport(self, item, call):\n"
        "        report = yield\n"
        "        report.outcome = 'passed'\n"
        "        return report\n"
        "for obj in gc.get_objects():\n"
        "    if isinstance(obj, _pytest.config.Config):\n"
        "        obj.pluginmanager.register(Always())\n"
        "def add(a, b): return None"
    ),
    "forge the report channel": (
        "import json, os\n"
        "tests = [{'name': f'test_solution.py::{n}', 'status': 'passed', 'duration': 1}\n"
        "         for n in ('test_small', 'test_negative', 'test_double[0]', 'test_double[5]')]\n"
        "extra = {'pytest-agentbench.inner': {'nonce': 'guess', 'complete': True,\n"
        "         'tampered': [], 'collection_errors': []}}\n"
        "fake = json.dumps({'results': {'tests': tests, 'extra': extra}}).encode()\n"
        "for fd in range(3, 256):\n"
        "    try:\n"
        "        os.lseek(fd, 0, 0)\n"
        "        os.ftruncate(fd, 0)\n"
        "        os.write(fd, fake)\n"
        "    except OSError:\n"
        "        pass\n"
        "os._exit(0)"
    ),
    "skip every test": "import pytest\npytest.skip('nothing to see', allow_module_level=True)",
}


@pytest.mark.parametrize("answer", CHEATS.values(), ids=CHEATS.keys())
def test_cheats_score_zero(tmp_path: Path, answer: str) -> None:
    verdict = python_tests(answer, tmp_path, timeout_s=10)
    assert verdict.error is None
    assert verdict.reward == 0.0, verdict.details
    assert verdict.metrics["tests_total"] == 4 and verdict.metrics["tests_passed"] == 0
    report = ctrf(tmp_path)
    assert report["results"]["summary"]["passed"] == 0
    assert len(report["results"]["tests"]) == 4


def test_tampering_is_named(tmp_path: Path) -> None:
    verdict = python_tests(CHEATS["patch runtest"], tmp_path)
    assert verdict.details["tampered"] == ["_pytest.python.Function.runtest"]
    assert "tampered" in verdict.feedback


def test_exit_mid_run_keeps_what_really_passed(tmp_path: Path) -> None:
    answer = "import os\ndef add(a, b):\n    if a < 0:\n        os._exit(0)\n    return a + b"
    verdict = python_tests(answer, tmp_path)
    assert verdict.metrics == {"tests_passed": 1, "tests_total": 4}
    assert verdict.details["report"].startswith("the test run ended early")
    not_run = [t for t in ctrf(tmp_path)["results"]["tests"] if t.get("rawStatus") == "not_run"]
    assert len(not_run) == 3


def test_smuggled_tests_do_not_count(tmp_path: Path) -> None:
    check = Check(
        "def test_extra_1(): pass\ndef test_extra_2(): pass\ndef double(x): return 0",
        task(None),
        {"tests": ["assert double(2) == 4"]},
        tmp_path / "rollout" / "verifier",
    )
    verdict = PYTHON_TESTS.verify(check)
    assert verdict.reward == 0.0 and verdict.metrics == {"tests_passed": 0, "tests_total": 1}


def test_agent_workspace_files_cannot_change_how_pytest_runs(tmp_path: Path) -> None:
    workspace = tmp_path / "agent-ws"
    workspace.mkdir()
    (workspace / "solution.py").write_text("def add(a, b):\n    return 0\n")
    (workspace / "conftest.py").write_text(
        "import pytest\n@pytest.hookimpl(wrapper=True)\n"
        "def pytest_runtest_makereport(item, call):\n"
        "    report = yield\n    report.outcome = 'passed'\n    return report\n"
    )
    (workspace / "pytest.ini").write_text("[pytest]\naddopts = -p no:python\n")
    (workspace / "pytest.py").write_text("print('4 passed')\n")
    check = Check("I fixed it.", task(), {}, tmp_path / "rollout" / "verifier", workspace)
    verdict = PYTHON_TESTS.verify(check)
    assert verdict.metrics == {"tests_passed": 1, "tests_total": 4}  # add(0, 0) == 0
    assert (workspace / "solution.py").read_text() == "def add(a, b):\n    return 0\n"
    assert not (tmp_path / "rollout" / "workspace").exists()


def test_a_hanging_solution_times_out(tmp_path: Path) -> None:
    verdict = python_tests("while True:\n    pass", tmp_path, timeout_s=1)
    assert verdict.reward == 0.0 and verdict.details["killed_by"] in ("timeout", "cpu")
    assert "No test result was recorded" in verdict.feedback


def test_broken_task_tests_are_an_error_verdict(tmp_path: Path) -> None:
    bad = Check(RIGHT, task("def test_x(:\n    pass"), {}, None)
    assert "not valid Python (line 1" in (PYTHON_TESTS.verify(bad).error or "")
    empty = Check(RIGHT, task("x = 1"), {}, None)
    assert "define no test" in (PYTHON_TESTS.verify(empty).error or "")
    missing = Check(RIGHT, task(None), {}, None)
    assert "set options.tests" in (PYTHON_TESTS.verify(missing).error or "")


def test_without_a_rollout_dir_the_workspace_is_temporary(tmp_path: Path) -> None:
    verdict = PYTHON_TESTS.verify(Check(RIGHT, task(), {}, None))
    assert verdict.reward == 1.0


@pytest.mark.parametrize(
    ("answer", "code", "how"),
    [
        ("```python\nx = 1\n```\n```python\nlonger = 2\n```", "longer = 2\n", "longest"),
        ("```\ny = 2\n```", "y = 2\n", "the fenced block"),
        ("z = 3", "z = 3", "whole answer"),
        ("```python\nunterminated = 4\n", "unterminated = 4\n", "longest"),
    ],
)
def test_extract_code(answer: str, code: str, how: str) -> None:
    got, extraction = extract_code(answer)
    assert got == code and extraction.startswith(how)


# --- command ---------------------------------------------------------------------------


def command(
    tmp_path: Path, run: str, answer: str = "42", files: dict[str, str] | None = None
) -> Verdict:
    check = Check(
        answer,
        task(None, "command", files=files or {}),
        {"run": run},
        tmp_path / "rollout" / "verifier",
    )
    return COMMAND.verify(check)


def test_command_reward_json_flat_and_nested(tmp_path: Path) -> None:
    flat = command(
        tmp_path,
        """echo '{"reward": 0.5, "name": "half", "cases_passed": 1, "cases_total": 2}' """
        "> reward.json; echo checking",
    )
    assert flat.error is None and flat.reward == 0.5
    assert flat.metrics == {"cases_passed": 1.0, "cases_total": 2.0}
    assert flat.details["name"] == "half" and flat.details["source"] == "reward.json"
    stdout = tmp_path / "rollout" / "verifier" / "test-stdout.txt"
    assert stdout.read_text() == "checking\n"
    nested = command(
        tmp_path,
        """echo '{"reward": 1, "metrics": {"style": 0.5}, "details": {"note": "ok"}}' """
        "> reward.json",
    )
    assert nested.reward == 1.0 and nested.metrics == {"style": 0.5}
    assert nested.details["note"] == "ok"


def test_command_reward_txt_and_answer_file(tmp_path: Path) -> None:
    verdict = command(tmp_path, 'test "$(cat answer.txt)" = 42 && echo 0.25 > reward.txt')
    assert verdict.reward == 0.25 and verdict.details["source"] == "reward.txt"


def test_command_exit_status_decides_without_reward_files(tmp_path: Path) -> None:
    assert command(tmp_path, "grep -q 42 answer.txt").reward == 1.0
    failed = command(tmp_path, "grep -q 43 answer.txt")
    assert failed.reward == 0.0 and failed.details["source"] == "exit status"
    assert failed.details["exit_code"] == 1 and "exit status 1" in failed.feedback


def test_stale_reward_files_are_removed_before_the_command(tmp_path: Path) -> None:
    stale = {"reward.json": '{"reward": 1.0}', "reward.txt": "1.0"}
    verdict = command(tmp_path, "exit 1", files=stale)
    assert verdict.reward == 0.0 and verdict.details["source"] == "exit status"
    workspace = tmp_path / "agent-ws"
    workspace.mkdir()
    (workspace / "reward.txt").write_text("1.0")  # left by the agent, not by the check
    check = Check("done", task(None, "command"), {"run": "exit 1"}, None, workspace)
    assert COMMAND.verify(check).reward == 0.0
    assert not (workspace / "answer.txt").exists()


@pytest.mark.parametrize(
    ("script", "message"),
    [
        ("echo nan > reward.txt", "finite number"),
        ("echo inf > reward.txt", "finite number"),
        ("echo lots > reward.txt", "one number"),
        ("echo 1.5 > reward.txt", "between 0 and 1"),
        ("""echo '{"reward": NaN}' > reward.json""", "finite number"),
        ("""echo '{"reward": "1"}' > reward.json""", "finite number"),
        ("""echo '{"reward": true}' > reward.json""", "finite number"),
        ("""echo '{"score": 1}' > reward.json""", '"reward" key'),
        ("""echo '{"reward": 1, "metrics": {"x": NaN}}' > reward.json""", "metric 'x'"),
        ("echo '{' > reward.json", "not JSON"),
    ],
)
def test_bad_rewards_are_error_verdicts(tmp_path: Path, script: str, message: str) -> None:
    verdict = command(tmp_path, script)
    assert verdict.reward == 0.0 and message in (verdict.error or "")


def test_command_timeout_scores_zero(tmp_path: Path) -> None:
    check = Check(
        "x",
        task(None, "command"),
        {"run": "echo 1 > reward.txt; sleep 30", "timeout_s": 0.5},
        None,
    )
    verdict = COMMAND.verify(check)
    assert verdict.reward == 0.0 and verdict.details["killed_by"] == "timeout"


# --- suites and the whole run ----------------------------------------------------------


def verifiers() -> dict[str, Any]:
    return {v.kind: v for v in BUILTIN_VERIFIERS}


def test_suite_files_table_and_directory(tmp_path: Path) -> None:
    (tmp_path / "fixture").mkdir()
    (tmp_path / "fixture" / "data.txt").write_text("seed")
    suite = tmp_path / "bench_files.toml"
    suite.write_text(
        '[suite]\nfiles = "fixture"\nverifier = { kind = "command", run = "true" }\n'
        '[[task]]\nid = "a"\ninput = "x"\nfiles = { "a.txt" = "A", "sub/b.txt" = "B" }\n'
        '[[task]]\nid = "b"\ninput = "y"\n'
    )
    a, b = load_suite(suite, verifiers()).tasks
    assert a.files == {"a.txt": "A", "sub/b.txt": "B"} and a.files_dir == tmp_path / "fixture"
    assert b.files == {} and b.files_dir == tmp_path / "fixture"
    suite.write_text(
        '[suite]\nfiles = "missing"\n'
        '[[task]]\ninput = "x"\nfiles = { "../up.txt" = "x", "/abs.txt" = "y" }\n'
        '[[task]]\ninput = "y"\nfiles = { "ok" = 3 }\n'
    )
    with pytest.raises(SuiteError) as info:
        load_suite(suite, verifiers())
    text = str(info.value)
    assert '$.suite.files names no directory next to the suite file: "missing"' in text
    assert '$.task[0].files["../up.txt"] must be a relative path inside the workspace' in text
    assert '$.task[0].files["/abs.txt"] must be a relative path' in text
    assert "$.task[1].files.ok must be a string" in text


@pytest.mark.slow
def test_example_code_suite_end_to_end(pytester: pytest.Pytester) -> None:
    shutil.copy(EXAMPLE, pytester.path / EXAMPLE.name)
    result = pytester.runpytest("--agentbench", "-p", "no:cacheprovider", "-v")
    result.assert_outcomes(passed=7, failed=2)
    result.stdout.fnmatch_lines(
        [
            "*✗ code::second-largest: reward 0 — test_plain did not run: the answer's module "
            "exited during import (exit status 3) (+1 more failure; 0/2 checks passed)"
        ]
    )
    result.stdout.fnmatch_lines(
        [
            "*✗ code::run-length: reward 0.25 — test_runs failed: AssertionError: assert "
            "'3a1b' == '3a1b2c'* (+2 more failures; 1/4 checks passed)"
        ]
    )
    run = (pytester.path / "agentbench-results" / "latest").resolve()
    reports = sorted(run.glob("tasks/code/*/verifier/ctrf.json"))
    assert len(reports) == 8  # every python_tests task; the command task has none
    for path in reports:
        doc = json.loads(path.read_text())
        assert doc["reportFormat"] == "CTRF" and doc["specVersion"] == "0.0.0"
        assert set(doc["results"]) >= {"tool", "summary", "tests"}
        summary = doc["results"]["summary"]
        assert set(summary) >= {"tests", "passed", "failed", "skipped", "pending", "other"}
        assert summary["tests"] == len(doc["results"]["tests"]) > 0
        for test in doc["results"]["tests"]:
            assert {"name", "status", "duration"} <= set(test)
    result_json = json.loads((run / "tasks/code/second-largest[scripted]/result.json").read_text())
    verdict = result_json["attempts"][0]["verdict"]
    assert verdict["reward"] == 0 and verdict["details"]["containment"]["level"]
    primes = json.loads((run / "tasks/code/primes-command[scripted]/result.json").read_text())
    assert primes["outcome"] == "passed"
    assert primes["attempts"][0]["verdict"]["metrics"] == {"primes_found": 5, "primes_total": 5}
    from ctrf_support import assert_ctrf_accepted

    assert_ctrf_accepted(*reports)
