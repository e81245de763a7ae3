"""The ``python_checks`` verifier: HumanEval's ``check(candidate)`` or MBPP's assert lines,
run by a small runner of our own in the sandbox instead of pytest.

The answer's code is saved as ``solution.py`` (as for ``python_tests``). The runner
(``inner_checks.py``, loaded by path, standard library only) compiles the checks before any
solution code runs, runs them, and reports each assertion's outcome through a file
descriptor of an unlinked file, stamped with a nonce that arrives on stdin: the same trust
model as ``python_tests`` (docs/sandbox.md), at a fraction of pytest's start-up cost.
"""

from __future__ import annotations

import ast
from pathlib import Path

from pytest_agentbench.core.fastclass import dataclass
from pytest_agentbench.core.jsontypes import JsonObject
from pytest_agentbench.errors import SandboxError, VerifierError
from pytest_agentbench.sandbox import CommandResult, Workspace
from pytest_agentbench.suites.task import Task
from pytest_agentbench.verifiers import checks_program, inner_checks
from pytest_agentbench.verifiers.base import Check, ConfigProblem, FunctionVerifier, Verdict
from pytest_agentbench.verifiers.checks_program import (
    assertion_names,
    check_function,
    compiled_checks,
)
from pytest_agentbench.verifiers.code import extract_code
from pytest_agentbench.verifiers.sandboxed import (
    SANDBOX_OPTIONS,
    check_workspace,
    clear_artifacts,
    discard_foreign_files,
    site_paths,
    write_artifact,
)
from pytest_agentbench.verifiers.stamped import (
    MODULE_OPTION,
    SCORINGS,
    InnerReport,
    ctrf_document,
    exited_at_import,
    run_details,
    run_inner,
    untrusted,
    why_unreported,
)
from pytest_agentbench.verifiers.text import cannot_judge, excerpt, unusable

_RUNNER_MODULE = "agentbench_inner_checks"
_COMPILER = Path(checks_program.__file__).resolve()


@dataclass(frozen=True, slots=True)
class ChecksPlan:
    """What to run: HumanEval's ``test`` code, whose ``check(candidate)`` is given the
    solution's ``entry_point`` (check mode), or MBPP's ``asserts``; ``setup`` runs first."""

    setup: str
    test: str | None = None
    entry_point: str = ""
    asserts: tuple[str, ...] = ()
    #: Code the answer continues (HumanEval's prompt): the solution module is this text
    #: followed by the answer's code, as HumanEval's own evaluator writes its program.
    prompt: str = ""

    def program(self, code: str) -> str:
        """The solution module's text for the answer's ``code``."""
        return self.prompt + code

    def orders(self) -> JsonObject:
        """The plan as the runner's orders (``inner_checks.main``), as source: a fork
        server's child compiles it (``checks_program``, loaded by path)."""
        found: JsonObject = {"setup": self.setup, "compiler": str(_COMPILER)}
        if self.test is not None:
            return found | {
                "test": self.test,
                "entry_point": self.entry_point,
                "check": inner_checks.CHECK_CASE,
            }
        return found | {"asserts": [*self.asserts]}

    def compiled(self) -> JsonObject:
        """The program compiled here (``checks_program``; marshalled, in hex), the case
        names and each one's source: the orders of a fresh run, which then need not
        import ``ast``."""
        probes = (inner_checks.ENTER, inner_checks.PASS)
        code, names, sources = compiled_checks(
            self.setup, self.test, self.asserts, inner_checks.CHECK_CASE, probes
        )
        return {"code": code.hex(), "names": [*names], "sources": [*sources]}


def _plan(check: Check) -> ChecksPlan:
    """What to run (``ChecksPlan``). Raises VerifierError saying what to write."""
    options = check.options
    test = options.get("test")
    asserts = options.get("asserts")
    if test is None and asserts is None:
        target = check.task.target
        if isinstance(target, str):
            test = target
        elif isinstance(target, list):
            asserts = target
    if test is not None and asserts is not None:
        raise VerifierError(
            "python_checks verifier: give options.test or options.asserts, not both"
        )
    setup = options.get("setup", "")
    setup = setup if isinstance(setup, str) else ""
    if setup.strip():  # compiled before the checks (by the harness for a fresh run)
        _parse(setup, "options.setup")
    prompt = options.get("prompt", "")
    prompt = prompt if isinstance(prompt, str) else ""
    if isinstance(test, str) and test.strip():
        entry = options.get("entry_point")
        if not isinstance(entry, str) or not entry.isidentifier():
            raise VerifierError(
                "python_checks verifier: options.entry_point must name the solution's "
                "function that check(candidate) is given"
            )
        tree = _parse(test, "options.test")
        if check_function(tree, inner_checks.CHECK_CASE) is None:
            raise VerifierError(
                "python_checks verifier: the test code defines no function check(candidate)"
            )
        return ChecksPlan(setup, test=test, entry_point=entry, prompt=prompt)
    if isinstance(asserts, list) and asserts and all(isinstance(a, str) for a in asserts):
        lines = [str(a) for a in asserts]
        for number, line in enumerate(lines, start=1):
            _parse(line.strip(), f"assert {number}")
        return ChecksPlan(setup, asserts=tuple(line.strip() for line in lines), prompt=prompt)
    raise VerifierError(
        "python_checks verifier: set options.test (code defining check(candidate), with "
        "options.entry_point) or options.asserts (a list of assert lines), or make the "
        "target one of them"
    )


def _parse(source: str, where: str) -> ast.Module:
    try:
        return ast.parse(source, where)
    except SyntaxError as exc:
        raise VerifierError(
            f"python_checks verifier: {where} is not valid Python (line {exc.lineno}: {exc.msg})"
        ) from None


def expected_cases(plan: ChecksPlan) -> list[str]:
    """The cases the task defines, from its code alone (never from the run)."""
    if plan.test is not None:
        return assertion_names(ast.parse(plan.test), inner_checks.CHECK_CASE)
    return [f"assert_{n}" for n in range(1, len(plan.asserts) + 1)]


def run_checks(
    workspace: Workspace, plan: ChecksPlan, module: str, check: Check
) -> tuple[CommandResult, InnerReport | None, str]:
    """Run the checks in ``python -I -S -B`` (``stamped.run_inner``; ``-S`` skips ``site``, a
    third of a bare start-up, more with editable installs: the runner puts this
    interpreter's site-packages directories on ``sys.path`` itself, without running
    ``.pth`` files); the result, the trusted report (or None) and why not."""
    orders: JsonObject = {
        **plan.orders(),
        "runner_module": _RUNNER_MODULE,
        "module": module,
        "solution": f"{module}.py",
        "paths": [*site_paths()],
    }
    runner = Path(inner_checks.__file__).resolve()
    flags = ("-I", "-S", "-B")
    return run_inner(
        workspace,
        check,
        runner,
        orders,
        key=inner_checks.EXTRA_KEY,
        flags=flags,
        fresh_orders=plan.compiled,
    )


def _case(test: JsonObject, why_missing: str) -> JsonObject:
    """A reported case with only the CTRF fields we write; one the run never got to fails
    with ``why_missing``."""
    status = test.get("status")
    duration = test.get("duration")
    if status not in ("passed", "failed", "skipped"):
        return {
            "name": str(test["name"]),
            "status": "failed",
            "duration": 0,
            "rawStatus": "not_run",
            "message": f"did not run: {why_missing}",
        }
    clean: JsonObject = {
        "name": str(test["name"]),
        "status": status,
        "duration": duration if isinstance(duration, int) and duration >= 0 else 0,
    }
    for key in ("rawStatus", "message"):
        value = test.get(key)
        if isinstance(value, str):
            clean[key] = value
    return clean


def score(
    expected: list[str], report: InnerReport | None, why_missing: str
) -> tuple[int, int, list[JsonObject]]:
    """(passed, total, the CTRF tests): every expected case counts once; a case the run did
    not report fails; ``skipped`` (an assertion a passing check never reached) is left out
    of the total."""
    reported = report.tests if report is not None else []
    by_name = {str(t["name"]): t for t in reported if isinstance(t.get("name"), str)}
    tests: list[JsonObject] = []
    for name in expected:
        tests.append(_case(by_name.get(name) or {"name": name}, why_missing))
    passed = sum(1 for t in tests if t["status"] == "passed")
    total = sum(1 for t in tests if t["status"] != "skipped")
    return passed, total, tests


def _ctrf(report: InnerReport | None, tests: list[JsonObject]) -> JsonObject:
    tool: JsonObject = {"name": "agentbench-checks"}
    return ctrf_document(report, tests, tool, "pytest-agentbench python_checks")


def check_python_checks(task: Task) -> list[ConfigProblem]:
    """The checks (options.test with entry_point, options.asserts, else the target) must
    parse; check mode needs a ``check`` function."""
    options = task.verifier.options
    try:
        plan = _plan(Check("", task, options))
    except VerifierError as exc:
        places = [key for key in ("test", "asserts", "entry_point") if key in options]
        if str(exc).startswith("python_checks verifier: options.setup "):
            places = ["setup"]
        return [unusable(("options", places[0]) if places else ("target",), exc)]
    if plan.prompt and task.mode == "agent":
        return [
            ConfigProblem(
                ("options", "prompt"),
                "is for answer-mode tasks: an agent task's workspace module is run as "
                "the agent left it",
            )
        ]
    return []


def verify_python_checks(check: Check) -> Verdict:
    """Reward (``scoring = "all"``, the default): 1 when every case passed, else 0;
    ``fraction``: cases passed / cases that count."""
    module = str(check.options.get("module", "solution"))
    code, extraction = extract_code(check.answer)
    got = excerpt(check.answer)
    try:
        plan = _plan(check)
    except VerifierError as exc:
        return cannot_judge(exc, got=got, extraction=extraction)
    expected = expected_cases(plan)
    clear_artifacts(check, "ctrf.json", "test-stdout.txt")
    answer_file = None if check.workspace is not None else (f"{module}.py", plan.program(code))
    try:
        with check_workspace(check, answer_file) as workspace:
            result, report, problem = run_checks(workspace, plan, module, check)
            containment = workspace.containment()
    except SandboxError as exc:
        return cannot_judge(VerifierError(f"python_checks verifier: {exc}"), got=got)
    stamp = report.stamp if report is not None else {}
    why = exited_at_import(result, stamp) or why_unreported(result, problem, "the run")
    passed, total, tests = score(expected, report, why)
    tampered, killed, tests = untrusted(result, stamp, tests, shown=5)
    if tampered or killed:
        passed, total = 0, len(tests)
    discard_foreign_files(check)
    write_artifact(check, "ctrf.json", _ctrf(report, tests))
    write_artifact(check, "test-stdout.txt", result.stdout + result.stderr)
    if check.options.get("scoring", "all") == "all":
        reward = 1.0 if total and passed == total else 0.0
    else:
        reward = passed / total if total else 0.0
    failing = [t for t in tests if t["status"] == "failed"]
    failures: JsonObject = {str(t["name"]): t.get("message", "") for t in failing}
    details: JsonObject = {
        "got": got,
        "extraction": extraction,
        "module": module,
        "mode": "check" if plan.test is not None else "asserts",
        "program": "prompt + answer" if plan.prompt else "answer",
        "failed_tests": [t["name"] for t in failing],
        "failures": failures,
        "report": "complete" if stamp.get("complete") else (problem or why),
        "setup_error": stamp.get("setup_error") or None,
        **run_details(result, tampered, killed, containment),
    }
    if tampered:
        feedback = "The run was tampered with (builtins or the runner changed); no check counts."
    elif killed:
        feedback = f"The run was killed ({killed}); no check counts."
    elif report is None:
        feedback = f"No check result was recorded: {why}."
    elif failing:
        first = failing[0]
        message = str(first.get("message", "")).rstrip(".")
        feedback = f"{len(failing)} of {total} checks failed; first: {first['name']}: {message}."
    else:
        feedback = ""
    return Verdict(
        reward=reward,
        metrics={"checks_passed": passed, "checks_total": total},
        details=details,
        feedback=feedback,
    )


PYTHON_CHECKS = FunctionVerifier(
    kind="python_checks",
    function=verify_python_checks,
    task_check=check_python_checks,
    options_schema={
        "type": "object",
        "properties": {
            "test": {
                "type": "string",
                "minLength": 1,
                "description": "HumanEval style: code defining check(candidate); the "
                "solution's entry_point is passed as candidate.",
            },
            "entry_point": {
                "type": "string",
                "pattern": "^[A-Za-z_][A-Za-z0-9_]*$",
                "description": "The solution's function given to check (with test).",
            },
            "asserts": {
                "type": "array",
                "items": {"type": "string", "minLength": 1},
                "minItems": 1,
                "description": "MBPP style: assert lines, each one case, run in the "
                "solution's namespace.",
            },
            "setup": {
                "type": "string",
                "description": "Code run in the solution's namespace before the checks "
                "(MBPP's test_setup_code, imports).",
            },
            "prompt": {
                "type": "string",
                "description": "Code the answer continues (HumanEval's prompt): the "
                "solution module is this text followed by the answer's code, the program "
                "HumanEval's evaluator runs (answer-mode tasks).",
            },
            "module": MODULE_OPTION,
            "scoring": {
                "enum": list(SCORINGS),
                "default": "all",
                "description": "all: 1 only when every case passes; fraction: passed / total.",
            },
            **SANDBOX_OPTIONS,
        },
        "additionalProperties": False,
    },
)
