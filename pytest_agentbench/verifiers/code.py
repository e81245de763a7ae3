"""The ``python_tests`` verifier: the answer's code against the task's pytest tests.

HumanEval / MBPP style. The answer's code (its longest fenced ``python`` block, else its
only fenced block, else the whole answer) is written to ``solution.py`` and the task's
tests to ``test_solution.py``; pytest runs them in the sandbox. The reward is proven by
test results only: the inner pytest carries our CTRF writer (``inner_ctrf.py``), which
reports through a file descriptor of an unlinked file, stamped with a nonce the code under
test never sees on disk, in its environment or in its arguments. A run that exits early,
kills its parent, prints a fake summary, writes a fake report or patches pytest scores
nothing more than the tests it really passed (docs/sandbox.md has the threat model).
"""

from __future__ import annotations

import hmac
import io
import json
import re
import secrets
import sys
import tempfile
from pathlib import Path
from typing import Any

from pytest_agentbench.errors import SandboxError, VerifierError
from pytest_agentbench.sandbox import CommandResult, Workspace
from pytest_agentbench.suites.task import Task
from pytest_agentbench.verifiers import inner_ctrf
from pytest_agentbench.verifiers.base import Check, ConfigProblem, FunctionVerifier, Verdict
from pytest_agentbench.verifiers.expected import ExpectedTests, base_name, expected_tests
from pytest_agentbench.verifiers.sandboxed import (
    REPORT_LIMIT,
    SANDBOX_OPTIONS,
    check_workspace,
    clear_artifacts,
    discard_foreign_files,
    forkable_files,
    limits_from,
    run_forked,
    run_sandboxed,
    write_artifact,
)
from pytest_agentbench.verifiers.text import cannot_judge, excerpt, unusable

_FENCE = re.compile(r"```[ \t]*([\w+-]*)[^\n]*\n(.*?)(?:```|\Z)", re.DOTALL)
_PYTHON_TAGS = ("python", "py", "python3")
_PLUGIN_MODULE = "agentbench_inner_ctrf"
_RUNNER_MODULE = "agentbench_inner_pytest"
# Runs as ``python -I -B -c``: reads its orders from the first line of stdin (then stdin is
# /dev/null), loads our plugin by path, arms it and hands it to pytest before any test code
# is imported.
_BOOTSTRAP = """\
import importlib.util, json, os, sys
orders = json.loads(sys.stdin.readline())
null = os.open(os.devnull, os.O_RDONLY)
os.dup2(null, 0)
os.close(null)
spec = importlib.util.spec_from_file_location(orders["module"], orders["plugin"])
plugin = importlib.util.module_from_spec(spec)
sys.modules[orders["module"]] = plugin
spec.loader.exec_module(plugin)
plugin.arm(orders.pop("nonce"), orders["fd"])
import pytest
args = orders["args"]
del orders, spec, null
raise SystemExit(pytest.main(args, plugins=[plugin]))
"""


def extract_code(answer: str) -> tuple[str, str]:
    """The code in an answer and how it was found."""
    blocks = [(tag.lower(), body) for tag, body in _FENCE.findall(answer)]
    python = [body for tag, body in blocks if tag in _PYTHON_TAGS]
    if python:
        return max(python, key=len), "longest ```python block"
    if len(blocks) == 1:
        return blocks[0][1], "the fenced block"
    return answer, "whole answer"


def tests_source(check: Check, module: str) -> str:
    """The task's test code: ``options.tests`` (pytest code, or a list of assert
    statements that become one test each), else a string target."""
    tests = check.options.get("tests", check.task.target)
    if isinstance(tests, str) and tests.strip():
        return tests
    if isinstance(tests, list) and tests and all(isinstance(t, str) for t in tests):
        parts = [f"from {module} import *  # noqa: F403\n"]
        for number, snippet in enumerate(tests, start=1):
            body = "\n".join(f"    {line}" for line in snippet.strip().splitlines()) or "    pass"
            parts.append(f"\ndef test_{number}():\n{body}\n")
        return "".join(parts)
    raise VerifierError(
        "python_tests verifier: set options.tests (pytest code, or a list of assert "
        f"statements) or make the target the test code (target is {type(tests).__name__})"
    )


def read_report(
    channel: Any, nonce: str, key: str = inner_ctrf.EXTRA_KEY
) -> tuple[dict[str, Any] | None, str]:
    """The inner run's report when its ``extra[key]`` carries ``nonce``; else None and why."""
    channel.seek(0)
    raw = channel.read(REPORT_LIMIT + 1)
    if not raw:
        return None, "the test run ended before reporting any result"
    if len(raw) > REPORT_LIMIT:
        return None, "the test report is too large to trust"
    try:
        report = json.loads(raw)
        stamp = report["results"]["extra"][key]
        tests = report["results"]["tests"]
        signed = isinstance(stamp["nonce"], str) and hmac.compare_digest(stamp["nonce"], nonce)
    except (ValueError, KeyError, TypeError):
        return None, "the test report is not readable"
    if not signed or not isinstance(tests, list):
        return None, "the test report does not come from our test run"
    return report, ""


_PYTEST_ARGS = ["-q", "-p", "no:cacheprovider", "--noconftest", "-c", "/dev/null"]


def run_tests(workspace: Workspace, test_file: str, check: Check) -> tuple[CommandResult, Any, str]:
    """Run pytest on ``test_file``; the result, the trusted report (or None) and why not.
    Where the fork server may take the run (``sandboxed.forkable_files``), a child of a
    server that has pytest imported already runs it (``inner_pytest.py``); else a fresh
    sandboxed ``python -I -B``."""
    nonce = secrets.token_hex(16)
    plugin = str(Path(inner_ctrf.__file__).resolve())
    files = forkable_files(workspace, check)
    if files is not None:
        forked: dict[str, Any] = {
            "plugin": plugin,
            "plugin_module": _PLUGIN_MODULE,
            "args": _PYTEST_ARGS,
            "test_file": test_file,
            "solution": test_file,
        }
        runner = Path(__file__).with_name("inner_pytest.py").resolve()
        result, raw = run_forked(workspace, files, runner, _RUNNER_MODULE, forked, nonce, check)
        report, problem = read_report(io.BytesIO(raw), nonce)
        return result, report, problem
    with tempfile.TemporaryFile() as channel:
        orders = {
            "module": _PLUGIN_MODULE,
            "plugin": plugin,
            "nonce": nonce,
            "fd": channel.fileno(),
            "args": [*_PYTEST_ARGS, "--rootdir", str(workspace.path), test_file],
        }
        result = run_sandboxed(
            workspace,
            [sys.executable, "-I", "-B", "-c", _BOOTSTRAP],
            limits=limits_from(check.options),
            stdin=json.dumps(orders) + "\n",
            env={"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"},
            pass_fds=(channel.fileno(),),
        )
        report, problem = read_report(channel, nonce)
    return result, report, problem


_STATUSES = ("passed", "failed", "skipped", "pending", "other")


def _ctrf_test(test: dict[str, Any]) -> dict[str, Any]:
    """A reported test with only the CTRF fields we write, each of the right type."""
    status = test.get("status")
    duration = test.get("duration")
    clean: dict[str, Any] = {
        "name": str(test["name"]),
        "status": status if status in _STATUSES else "other",
        "duration": duration if isinstance(duration, int) and duration >= 0 else 0,
    }
    for key in ("rawStatus", "message", "trace", "filePath"):
        if isinstance(test.get(key), str):
            clean[key] = test[key]
    return clean


def _not_run(nodeid: str, reason: str) -> dict[str, Any]:
    return {
        "name": nodeid,
        "status": "failed",
        "duration": 0,
        "rawStatus": "not_run",
        "message": f"did not run: {reason}",
    }


def score(
    expected: ExpectedTests, reported: list[dict[str, Any]], test_file: str, why_missing: str
) -> tuple[int, int, list[dict[str, Any]]]:
    """(passed, total, the CTRF tests to keep): every expected case counts, a case that
    did not run fails, results for tests the task did not write are left out."""
    by_name: dict[str, list[dict[str, Any]]] = {}
    for test in reported:
        if isinstance(test, dict) and isinstance(test.get("name"), str):
            by_name.setdefault(base_name(test["name"]), []).append(test)
    passed = total = 0
    kept: list[dict[str, Any]] = []
    for name, count in expected.items():
        results = by_name.get(name, [])
        cases = count if count is not None else max(1, len(results))
        results = results[:cases]
        passed += sum(1 for test in results if test.get("status") == "passed")
        total += cases
        kept.extend(_ctrf_test(test) for test in results)
        missing = _not_run(f"{test_file}::{name}", why_missing)
        kept.extend(dict(missing) for _ in range(cases - len(results)))
    return passed, total, kept


def _ctrf(report: dict[str, Any] | None, tests: list[dict[str, Any]]) -> dict[str, Any]:
    counts = dict.fromkeys(_STATUSES, 0)
    for test in tests:
        counts[test["status"]] += 1
    summary = (report or {}).get("results", {}).get("summary", {})
    start = summary.get("start") if isinstance(summary.get("start"), int) else 0
    stop = summary.get("stop") if isinstance(summary.get("stop"), int) else start
    version = ((report or {}).get("results", {}).get("tool") or {}).get("version")
    tool = {"name": "pytest", **({"version": version} if isinstance(version, str) else {})}
    return {
        "reportFormat": "CTRF",
        "specVersion": "0.0.0",
        "generatedBy": "pytest-agentbench python_tests",
        "results": {
            "tool": tool,
            "summary": {"tests": len(tests), **counts, "start": start, "stop": max(start, stop)},
            "tests": tests,
        },
    }


def killed_verifier(result: CommandResult) -> str | None:
    """``signal 9`` when the verifier's own process (the sandbox shim that is the test
    run's parent) was killed from inside the sandbox; None otherwise. Such a run proves
    nothing: whatever it reported before the kill does not count."""
    killed_by = result.killed_by or ""
    return killed_by.removeprefix("parent ") if killed_by.startswith("parent signal") else None


def outcome_words(result: CommandResult) -> str:
    if result.killed_by == "timeout":
        return f"timed out after {result.elapsed_s:.1f}s"
    if result.killed_by:
        return f"stopped by {result.killed_by} after {result.elapsed_s:.1f}s"
    return f"exit status {result.exit_code}"


def check_python_tests(task: Task) -> list[ConfigProblem]:
    """The tests (options.tests, else the target) must parse and define at least one."""
    options = task.verifier.options
    module = str(options.get("module", "solution"))
    try:
        expected_tests(tests_source(Check("", task, options), module), f"test_{module}.py")
    except VerifierError as exc:
        return [unusable(("options", "tests") if "tests" in options else ("target",), exc)]
    return []


def verify_python_tests(check: Check) -> Verdict:
    """Reward = tests passed / tests the task defines (``scoring = "all"``: 1 or 0)."""
    module = str(check.options.get("module", "solution"))
    test_file = f"test_{module}.py"
    code, extraction = extract_code(check.answer)
    got = excerpt(check.answer)
    try:
        source = tests_source(check, module)
        expected = expected_tests(source, test_file)
    except VerifierError as exc:
        return cannot_judge(exc, got=got, extraction=extraction)
    clear_artifacts(check, "ctrf.json", "test-stdout.txt")
    answer_file = None if check.workspace is not None else (f"{module}.py", code)
    try:
        with check_workspace(check, answer_file) as workspace:
            workspace.write_file(test_file, source)
            result, report, problem = run_tests(workspace, test_file, check)
            containment = workspace.containment()
    except SandboxError as exc:
        return cannot_judge(VerifierError(f"python_tests verifier: {exc}"), got=got)
    stamp = report["results"]["extra"][inner_ctrf.EXTRA_KEY] if report else {}
    errors = [e for e in stamp.get("collection_errors", []) if isinstance(e, dict)]
    if errors:
        why = f"the tests could not be collected: {errors[0].get('message', '')}"
    elif result.killed_by == "timeout":
        why = f"the test run {outcome_words(result)}"
    elif problem:
        why = f"{problem} ({outcome_words(result)})"
    else:
        why = f"the test run ended early ({outcome_words(result)})"
    reported = [] if report is None else report["results"]["tests"]
    passed, total, tests = score(expected, reported, test_file, why)
    tampered = [str(t) for t in stamp.get("tampered", [])]
    killed = killed_verifier(result) or (
        "its parent process died" if stamp.get("orphaned") else None
    )
    if tampered or killed:
        passed = 0
        raw = "tampered" if tampered else "verifier_killed"
        message = (
            f"not trusted: the run changed {', '.join(tampered)}"
            if tampered
            else f"not judged: the verifier was killed ({killed})"
        )
        tests = [{**t, "status": "failed", "rawStatus": raw, "message": message} for t in tests]
    discard_foreign_files(check)
    write_artifact(check, "ctrf.json", _ctrf(report, tests))
    write_artifact(check, "test-stdout.txt", result.stdout + result.stderr)
    fraction = passed / total if total else 0.0
    all_or_nothing = check.options.get("scoring", "fraction") == "all"
    reward = (1.0 if passed == total else 0.0) if all_or_nothing else fraction
    failing = [test for test in tests if test.get("status") != "passed"]
    names = list(dict.fromkeys(base_name(str(test["name"])) for test in failing))
    details: dict[str, Any] = {
        "got": got,
        "extraction": extraction,
        "module": module,
        "tests_file": test_file,
        "failed_tests": names,
        "failures": {base_name(str(t["name"])): t.get("message", "") for t in failing},
        "report": "complete" if stamp.get("complete") else (problem or why),
        "tampered": tampered,
        "verifier_killed": killed,
        "exit_code": result.exit_code,
        "killed_by": result.killed_by,
        "elapsed_s": round(result.elapsed_s, 3),
        "containment": containment,
    }
    if tampered:
        feedback = "The test run was tampered with (pytest internals changed); no test counts."
    elif killed:
        feedback = f"The test run was killed ({killed}: its parent process died); no test counts."
    elif report is None or errors:
        feedback = f"No test result was recorded: {why}."
    elif names:
        feedback = f"{len(failing)} of {total} tests failed: {', '.join(names[:10])}."
    else:
        feedback = ""
    return Verdict(
        reward=reward,
        metrics={"tests_passed": passed, "tests_total": total},
        details=details,
        feedback=feedback,
    )


PYTHON_TESTS = FunctionVerifier(
    kind="python_tests",
    function=verify_python_tests,
    task_check=check_python_tests,
    options_schema={
        "type": "object",
        "properties": {
            "tests": {
                "description": "pytest code importing from the module, or a list of "
                "assert statements (one test each); default: the task's target.",
                "oneOf": [
                    {"type": "string", "minLength": 1},
                    {"type": "array", "items": {"type": "string"}, "minItems": 1},
                ],
            },
            "module": {
                "type": "string",
                "pattern": "^[A-Za-z_][A-Za-z0-9_]*$",
                "default": "solution",
                "description": "The module name the answer's code is saved as.",
            },
            "scoring": {
                "enum": ["fraction", "all"],
                "default": "fraction",
                "description": "fraction: passed / total; all: 1 only when every test passes.",
            },
            **SANDBOX_OPTIONS,
        },
        "additionalProperties": False,
    },
)
