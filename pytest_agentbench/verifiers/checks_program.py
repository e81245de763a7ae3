"""The ``python_checks`` program as the harness compiles it for the runner
(``inner_checks.py``): the cases the task's code defines, each assert's source, and the
code itself, compiled here, in the harness, and handed to the runner marshalled.

In ``check`` mode every ``assert`` statement inside ``check`` is one case (``check line
N``, ``check line N.2`` for a second on one line), in source order, then the call itself
(``check``); each assert is wrapped in the runner's two probe calls (``ENTER(k)``,
``PASS(k)``). In ``asserts`` mode each line is one case (``assert_1``, …). Compiling here
rather than in the sandbox spares every fresh run the import of ``ast`` (more than the
checks of a HumanEval task cost); the code is the task's own, so nothing untrusted is
compiled, and the runner still has it all before any solution code runs.
"""

from __future__ import annotations

import ast
import marshal

from pytest_agentbench.verifiers.inner_checks import CHECK_CASE, ENTER, PASS


def _asserts_of(function: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.Assert]:
    found = [node for node in ast.walk(function) if isinstance(node, ast.Assert)]
    return sorted(found, key=lambda node: (node.lineno, node.col_offset))


def check_function(tree: ast.Module, name: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The last top-level definition of ``name`` in ``tree`` (the one Python keeps)."""
    found = None
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == name:
            found = node
    return found


def assertion_names(tree: ast.Module, name: str = CHECK_CASE) -> list[str]:
    """The cases ``check`` mode reports for test code ``tree``: one per assert statement in
    function ``name`` (``check line N``, ``check line N.2`` for a second on one line), in
    source order, then the call itself (``check``)."""
    function = check_function(tree, name)
    names: list[str] = []
    seen: dict[int, int] = {}
    for node in _asserts_of(function) if function is not None else []:
        seen[node.lineno] = seen.get(node.lineno, 0) + 1
        count = seen[node.lineno]
        names.append(f"{name} line {node.lineno}" + (f".{count}" if count > 1 else ""))
    return [*names, name]


class _Probes(ast.NodeTransformer):
    """Wraps each assert of the check function in ``ENTER(k)`` … ``PASS(k)``."""

    def __init__(self, order: dict[int, int]) -> None:
        self.order = order

    def visit_Assert(self, node: ast.Assert) -> list[ast.stmt]:
        index = self.order[id(node)]
        calls = [
            ast.Expr(ast.Call(ast.Name(probe, ast.Load()), [ast.Constant(index)], []))
            for probe in (ENTER, PASS)
        ]
        return [calls[0], node, calls[1]]


def _instrument(tree: ast.Module, name: str) -> None:
    function = check_function(tree, name)
    if function is None:
        return
    order = {id(node): index for index, node in enumerate(_asserts_of(function))}
    _Probes(order).visit(function)
    ast.fix_missing_locations(tree)


def compiled_checks(
    setup: str, test: str | None, asserts: tuple[str, ...], name: str = CHECK_CASE
) -> tuple[bytes, list[str], list[str]]:
    """The runner's program: ``setup`` and the check code (``test`` with its probes, or one
    code object per assert line) marshalled, the case names, and each case's source (an
    assert's text, for a failure without a message)."""
    setup_code = compile(setup, "setup", "exec")
    if test is not None:
        tree = ast.parse(test, "checks.py")
        names = assertion_names(tree, name)
        function = check_function(tree, name)
        nodes = _asserts_of(function) if function is not None else []
        sources = [f"assert {ast.unparse(node.test)}" for node in nodes]
        _instrument(tree, name)
        code = compile(tree, "checks.py", "exec")
        return marshal.dumps((setup_code, code)), names, sources
    sources = [text.strip() for text in asserts]
    names = [f"assert_{n}" for n in range(1, len(sources) + 1)]
    codes = [compile(text, f"assert_{n}", "exec") for n, text in enumerate(sources, start=1)]
    return marshal.dumps((setup_code, codes)), names, sources
