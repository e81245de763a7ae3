"""The ``python_checks`` program compiled for the runner (``inner_checks.py``): the cases
the task's code defines, each assert's source, and the code itself, marshalled.

In ``check`` mode every ``assert`` statement inside ``check`` is one case (``check line
N``, ``check line N.2`` for a second on one line), in source order, then the call itself
(``check``); each assert is wrapped in the runner's two probe calls (``ENTER(k)``,
``PASS(k)``). In ``asserts`` mode each line is one case (``assert_1``, …).

Standard library only, so it is used from two places: the harness compiles the program
for a fresh sandboxed run (sparing it the import of ``ast``, which costs more than the
checks of a HumanEval task) and hands it over marshalled; a fork server's child, whose
server has ``ast`` loaded already, loads this file by path and compiles the program
itself, off the harness's own process. Either way the code is the task's own and is
compiled before any solution code runs.
"""

from __future__ import annotations

import ast
import marshal
from collections.abc import Iterator, Sequence

#: The fields of a node that hold statements, directly or (handlers, match cases) through
#: nodes whose ``body`` does.
_BLOCKS, _HOLDERS = ("body", "orelse", "finalbody"), ("handlers", "cases")


def _blocks(node: ast.AST) -> Iterator[tuple[ast.AST, str, list[ast.stmt]]]:
    """Every statement list in ``node`` (its own and nested ones) as (owner, field, list):
    asserts are statements, so only statements are visited, never expressions."""
    for field in _BLOCKS:
        block = getattr(node, field, None)
        if isinstance(block, list):
            yield node, field, block
            for item in block:
                if isinstance(item, ast.stmt):
                    yield from _blocks(item)
    for field in _HOLDERS:
        for holder in getattr(node, field, None) or ():
            yield from _blocks(holder)


def _asserts_of(function: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.Assert]:
    found = [
        item for _, _, block in _blocks(function) for item in block if isinstance(item, ast.Assert)
    ]
    return sorted(found, key=lambda node: (node.lineno, node.col_offset))


def check_function(tree: ast.Module, name: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The last top-level definition of ``name`` in ``tree`` (the one Python keeps)."""
    found = None
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == name:
            found = node
    return found


def assertion_names(tree: ast.Module, name: str) -> list[str]:
    """The cases ``check`` mode reports for test code ``tree``: one per assert statement in
    function ``name`` (``check line N``, ``check line N.2`` for a second on one line), in
    source order, then the call itself (``check``)."""
    function = check_function(tree, name)
    return _names(_asserts_of(function) if function is not None else [], name)


def _names(asserts: list[ast.Assert], name: str) -> list[str]:
    names: list[str] = []
    seen: dict[int, int] = {}
    for node in asserts:
        seen[node.lineno] = seen.get(node.lineno, 0) + 1
        count = seen[node.lineno]
        names.append(f"{name} line {node.lineno}" + (f".{count}" if count > 1 else ""))
    return [*names, name]


def _probed(node: ast.Assert, index: int, probes: tuple[str, str]) -> list[ast.stmt]:
    """``ENTER(index)``, the assert, ``PASS(index)`` (``probes``: the two names); the
    probes at the assert's place."""
    made: list[ast.stmt] = []
    for probe in probes:
        constant = ast.Constant(index)
        call = ast.Call(ast.Name(probe, ast.Load()), [constant], [])
        statement = ast.Expr(call)
        for new in (statement, call, call.func, constant):
            ast.copy_location(new, node)
        made.append(statement)
    return [made[0], node, made[1]]


def _instrument(
    function: ast.FunctionDef | ast.AsyncFunctionDef,
    asserts: list[ast.Assert],
    probes: tuple[str, str],
) -> None:
    """Wrap each of ``asserts`` (numbered in that order) in the probes, wherever in
    ``function`` it stands (any block: if, for, with, try, a nested def)."""
    order = {id(node): index for index, node in enumerate(asserts)}
    for owner, field, block in list(_blocks(function)):
        if any(id(item) in order for item in block):
            wrapped: list[ast.stmt] = []
            for item in block:
                if isinstance(item, ast.Assert) and id(item) in order:
                    wrapped += _probed(item, order[id(item)], probes)
                else:
                    wrapped.append(item)
            setattr(owner, field, wrapped)


def compiled_checks(
    setup: str, test: str | None, asserts: Sequence[str], name: str, probes: tuple[str, str]
) -> tuple[bytes, list[str], list[str]]:
    """The runner's program: ``setup`` and the check code (``test`` with its probes, or one
    code object per assert line) marshalled, the case names, and each case's source (an
    assert's text, for a failure without a message)."""
    setup_code = compile(setup, "setup", "exec")
    if test is not None:
        tree = ast.parse(test, "checks.py")
        function = check_function(tree, name)
        nodes = _asserts_of(function) if function is not None else []
        names = _names(nodes, name)
        sources = [f"assert {ast.unparse(node.test)}" for node in nodes]
        if function is not None:
            _instrument(function, nodes, probes)
        code = compile(tree, "checks.py", "exec")
        return marshal.dumps((setup_code, code)), names, sources
    sources = [text.strip() for text in asserts]
    names = [f"assert_{n}" for n in range(1, len(sources) + 1)]
    codes = [compile(text, f"assert_{n}", "exec") for n, text in enumerate(sources, start=1)]
    return marshal.dumps((setup_code, codes)), names, sources
