"""The verifiers that ship with pytest-agentbench, registered through the same hook a
third-party plugin uses. The text checks (exact, includes, regex) are loaded with the
registry; every other family is a LazyVerifier, imported when a task first names it, so a
run pays at start-up only for the verifiers its tasks use (tests/package/
test_lazy_imports.py lists what a plain run imports)."""

from __future__ import annotations

from pytest_agentbench.verifiers.base import LazyVerifier, Verifier
from pytest_agentbench.verifiers.text import EXACT, INCLUDES, REGEX


def _choice() -> Verifier:
    from pytest_agentbench.verifiers.choice import CHOICE

    return CHOICE


def _number() -> Verifier:
    from pytest_agentbench.verifiers.number import NUMBER

    return NUMBER


def _json_schema() -> Verifier:
    from pytest_agentbench.verifiers.json_schema import JSON_SCHEMA

    return JSON_SCHEMA


def _python_tests() -> Verifier:
    from pytest_agentbench.verifiers.code import PYTHON_TESTS

    return PYTHON_TESTS


def _python_checks() -> Verifier:
    from pytest_agentbench.verifiers.checks import PYTHON_CHECKS

    return PYTHON_CHECKS


def _command() -> Verifier:
    from pytest_agentbench.verifiers.command import COMMAND

    return COMMAND


def _harbor() -> Verifier:
    from pytest_agentbench.verifiers.harbor import HARBOR_VERIFIER

    return HARBOR_VERIFIER


def _judge() -> Verifier:
    from pytest_agentbench.verifiers.judge import JUDGE

    return JUDGE


#: The judge (a model grading the answer), imported when a task names it; loaded anew
#: each time (a module-level one: pytester may import the module anew).
LAZY_JUDGE = LazyVerifier("judge", _judge, keep=False)

#: Every built-in verifier, one per kind.
BUILTIN_VERIFIERS: tuple[Verifier, ...] = (
    EXACT,
    INCLUDES,
    REGEX,
    LazyVerifier("choice", _choice),
    LazyVerifier("number", _number),
    LazyVerifier("json_schema", _json_schema),
    LazyVerifier("python_tests", _python_tests),
    LazyVerifier("python_checks", _python_checks),
    LazyVerifier("command", _command),
    LAZY_JUDGE,
    LazyVerifier("harbor", _harbor),
)
