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

import re
from pathlib import Path

from pytest_agentbench.core.jsontypes import JsonObject
from pytest_agentbench.errors import SandboxError, VerifierError
from pytest_agentbench.sandbox import CommandResult, Workspace
from pytest_agentbench.suites.task import Task
from pytest_agentbench.verifiers import inner_ctrf
from pytest_agentbench.verifiers.base import Check, ConfigProblem, FunctionVerifier, Verdict
from pytest_agentbench.verifiers.expected import ExpectedTests, base_name, expected_tests
from pytest_agentbench.verifiers.sandboxed import (
    SANDBOX_OPTIONS,
    check_workspace,
    clear_artifacts,
    discard_foreign_files,
    write_artifact,
)
from pytest_agentbench.verifiers.stamped import (
    MODULE_OPTION,
    SCORINGS,
    STATUSES,
    InnerReport,
    ctrf_document,
    exited_at_import,
    run_details,
    run_inner,
    untrusted,
    why_unreported,
)
from pytest_agentbench.verifiers.text import cannot_judge, excerpt, unusable

_FENCE = re.compile(r"```[ \t]*([\w+-]*)[^\n]*\n(.*?)(?:```|\Z)", re.DOTALL)
_PYTHON_TAGS = ("python", "py", "python3")
_PLUGIN_MODULE = "agentbench_inner_ctrf"
_RUNNER_MODULE = "agentbench_inner_pytest"


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
    snippets = [t for t in tests if isinstance(t, str)] if isinstance(tests, list) else []
    if snippets and isinstance(tests, list) and len(snippets) == len(tests):
        parts = [f"from {module} import *  # noqa: F403\n"]
        for number, snippet in enumerate(snippets, start=1):
            body = "\n".join(f"    {line}" for line in snippet.strip().splitlines()) or "    pass"
            parts.append(f"\ndef test_{number}():\n{body}\n")
        return "".join(parts)
    raise VerifierError(
        "python_tests verifier: set options.tests (pytest code, or a list of assert "
        f"statements) or make the target the test code (target is {type(tests).__name__})"
    )


_PYTEST_ARGS = ["-q", "-p", "no:cacheprovider", "--noconftest", "-c", "/dev/null"]


def run_tests(
    workspace: Workspace, test_file: str, check: Check
) -> tuple[CommandResult, InnerReport | None, str]:
    """Run pytest on ``test_file`` through ``inner_pytest.py`` (``stamped.run_inner``);
    the result, the trusted report (or None) and why not."""
    orders: JsonObject = {
        "runner_module": _RUNNER_MODULE,
        "plugin": str(Path(inner_ctrf.__file__).resolve()),
        "plugin_module": _PLUGIN_MODULE,
        "args": [*_PYTEST_ARGS],
        "test_file": test_file,
        "solution": test_file,
        "module": str(check.options.get("module", "solution")),
    }
    runner = Path(__file__).with_name("inner_pytest.py").resolve()
    env = {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    return run_inner(workspace, check, runner, orders, key=inner_ctrf.EXTRA_KEY, env=env)


def _ctrf_test(test: JsonObject) -> JsonObject:
    """A reported test with only the CTRF fields we write, each of the right type."""
    status = test.get("status")
    duration = test.get("duration")
    clean: JsonObject = {
        "name": str(test["name"]),
        "status": status if status in STATUSES else "other",
        "duration": duration if isinstance(duration, int) and duration >= 0 else 0,
    }
    for key in ("rawStatus", "message", "trace", "filePath"):
        value = test.get(key)
        if isinstance(value, str):
            clean[key] = value
    return clean


def _not_run(nodeid: str, reason: str) -> JsonObject:
    return {
        "name": nodeid,
        "status": "failed",
        "duration": 0,
        "rawStatus": "not_run",
        "message": f"did not run: {reason}",
    }


def score(
    expected: ExpectedTests, reported: list[JsonObject], test_file: str, why_missing: str
) -> tuple[int, int, list[JsonObject]]:
    """(passed, total, the CTRF tests to keep): every expected case counts, a case that
    did not run fails, results for tests the task did not write are left out."""
    by_name: dict[str, list[JsonObject]] = {}
    for test in reported:
        name = test.get("name")
        if isinstance(name, str):
            by_name.setdefault(base_name(name), []).append(test)
    passed = total = 0
    kept: list[JsonObject] = []
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


def _ctrf(report: InnerReport | None, tests: list[JsonObject]) -> JsonObject:
    version = report.tool.get("version") if report is not None else None
    tool: JsonObject = {"name": "pytest"}
    if isinstance(version, str):
        tool["version"] = version
    return ctrf_document(report, tests, tool, "pytest-agentbench python_tests")


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
    stamp = report.stamp if report is not None else {}
    listed = stamp.get("collection_errors", [])
    errors = [e for e in listed if isinstance(e, dict)] if isinstance(listed, list) else []
    if errors:
        why = f"the tests could not be collected: {errors[0].get('message', '')}"
    else:
        why = exited_at_import(result, stamp) or why_unreported(result, problem, "the test run")
    reported = [] if report is None else report.tests
    passed, total, tests = score(expected, reported, test_file, why)
    tampered, killed, tests = untrusted(result, stamp, tests)
    if tampered or killed:
        passed = 0
    discard_foreign_files(check)
    write_artifact(check, "ctrf.json", _ctrf(report, tests))
    write_artifact(check, "test-stdout.txt", result.stdout + result.stderr)
    fraction = passed / total if total else 0.0
    all_or_nothing = check.options.get("scoring", "fraction") == "all"
    reward = (1.0 if passed == total else 0.0) if all_or_nothing else fraction
    failing = [test for test in tests if test.get("status") != "passed"]
    names = list(dict.fromkeys(base_name(str(test["name"])) for test in failing))
    failures: JsonObject = {base_name(str(t["name"])): t.get("message", "") for t in failing}
    details: JsonObject = {
        "got": got,
        "extraction": extraction,
        "module": module,
        "tests_file": test_file,
        "failed_tests": [*names],
        "failures": failures,
        "report": "complete" if stamp.get("complete") else (problem or why),
        **run_details(result, tampered, killed, containment),
    }
    if tampered:
        feedback = "The test run was tampered with (pytest internals changed); no test counts."
    elif killed:
        feedback = f"The test run was killed ({killed}: its parent process died); no test counts."
    elif report is None or errors or not reported:
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
            "module": MODULE_OPTION,
            "scoring": {
                "enum": list(SCORINGS),
                "default": "fraction",
                "description": "fraction: passed / total; all: 1 only when every test passes.",
            },
            **SANDBOX_OPTIONS,
        },
        "additionalProperties": False,
    },
)
