"""The verifiers that ship with pytest-agentbench, registered through the same hook a
third-party plugin uses."""

from __future__ import annotations

from pytest_agentbench.verifiers.base import LazyVerifier, Verifier
from pytest_agentbench.verifiers.checks import PYTHON_CHECKS
from pytest_agentbench.verifiers.choice import CHOICE
from pytest_agentbench.verifiers.code import PYTHON_TESTS
from pytest_agentbench.verifiers.command import COMMAND
from pytest_agentbench.verifiers.harbor import HARBOR_VERIFIER
from pytest_agentbench.verifiers.json_schema import JSON_SCHEMA
from pytest_agentbench.verifiers.number import NUMBER
from pytest_agentbench.verifiers.text import EXACT, INCLUDES, REGEX


def _judge() -> Verifier:
    from pytest_agentbench.verifiers.judge import JUDGE

    return JUDGE


#: The judge (a model grading the answer), imported when a task names it.
LAZY_JUDGE = LazyVerifier("judge", _judge, keep=False)

#: Every built-in verifier, one per kind.
BUILTIN_VERIFIERS: tuple[Verifier, ...] = (
    EXACT,
    INCLUDES,
    REGEX,
    CHOICE,
    NUMBER,
    JSON_SCHEMA,
    PYTHON_TESTS,
    PYTHON_CHECKS,
    COMMAND,
    LAZY_JUDGE,
    HARBOR_VERIFIER,
)
