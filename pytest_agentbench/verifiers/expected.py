"""Which tests a task's test code defines, read from its syntax tree, never by running it.

The count is what ``python_tests`` scores against: a run that reports fewer results (it
crashed, exited, was cut short, or had tests removed from under it) cannot score more, and
results for tests the task did not write (say, ``test_*`` functions a solution smuggled in
through ``from solution import *``) do not count. Tests follow pytest's default naming:
``test*`` functions at module level and in ``Test*`` classes without ``__init__``.
``@pytest.mark.parametrize`` with a literal list multiplies a test into that many cases;
any other argument list makes the count unknown (None): then the run's own count of that
test's cases is taken, at least one.
"""

from __future__ import annotations

import ast

from pytest_agentbench.errors import VerifierError

#: Test name (``test_add``, ``TestStack::test_pop``) → number of cases, None when unknown.
ExpectedTests = dict[str, int | None]


def _parametrize_cases(decorator: ast.expr) -> tuple[bool, int | None]:
    """Whether ``decorator`` is a ``parametrize`` call, and the cases it makes (None when
    its argument list is not a literal)."""
    if not isinstance(decorator, ast.Call):
        return False, None
    func = decorator.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    if name != "parametrize":
        return False, None
    values = decorator.args[1] if len(decorator.args) > 1 else None
    for keyword in decorator.keywords:
        if keyword.arg == "argvalues":
            values = keyword.value
    if isinstance(values, ast.List | ast.Tuple) and not any(
        isinstance(item, ast.Starred) for item in values.elts
    ):
        return True, len(values.elts)
    return True, None


def _cases(decorators: list[ast.expr]) -> int | None:
    total: int | None = 1
    for decorator in decorators:
        is_parametrize, cases = _parametrize_cases(decorator)
        if is_parametrize:
            total = _times(total, cases)
    return total


def _times(a: int | None, b: int | None) -> int | None:
    return None if a is None or b is None else a * b


def expected_tests(source: str, filename: str = "tests") -> ExpectedTests:
    """The tests ``source`` defines, in file order. Raises VerifierError when the source
    does not parse or defines no test."""
    try:
        tree = ast.parse(source, filename=filename)
    except SyntaxError as exc:
        raise VerifierError(
            f"python_tests verifier: the task's tests are not valid Python "
            f"(line {exc.lineno}: {exc.msg})"
        ) from None
    found: ExpectedTests = {}
    functions = (ast.FunctionDef, ast.AsyncFunctionDef)
    for node in tree.body:
        if isinstance(node, functions) and node.name.startswith("test"):
            found.pop(node.name, None)
            found[node.name] = _cases(node.decorator_list)
        elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
            members = [item for item in node.body if isinstance(item, functions)]
            if any(item.name == "__init__" for item in members):
                continue
            factor = _cases(node.decorator_list)
            for item in members:
                if item.name.startswith("test"):
                    key = f"{node.name}::{item.name}"
                    found.pop(key, None)
                    found[key] = _times(factor, _cases(item.decorator_list))
    if not found:
        raise VerifierError(
            "python_tests verifier: the task's tests define no test: write test_* functions "
            "(or Test* classes), or give options.tests as a list of assert statements"
        )
    return found


def base_name(nodeid: str) -> str:
    """``test_solution.py::TestStack::test_pop[2]`` → ``TestStack::test_pop``."""
    name = nodeid.split("::", 1)[1] if "::" in nodeid else nodeid
    return name.split("[", 1)[0]
