"""``Any`` only at the JSON edge (issue 13): a ratchet on every module's count.

Today the package holds none: even the JSON edge hands ``json.loads``' result on as a
``JsonValue`` at once, so both tables below are empty and any ``Any`` fails the test.

``json.loads`` gives ``Any``; the modules that turn files, requests and replies into
values (the JSON edge, ``EDGE`` below, each with its reason) may hold it. Every other
module types what it holds: a record of its own, or ``core/jsontypes.JsonValue`` /
``JsonObject`` for JSON it passes through. ``BUDGET`` lists the modules not there yet
with their current count: a count may only go down, and the test asks for the budget to
follow it down (so a gain is never lost). A new module starts at zero.

Counted: every ``Any`` name in the module's code and in string annotations (not the
import itself).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest_agentbench

PACKAGE = Path(pytest_agentbench.__file__).parent

#: Modules at the JSON edge: ``Any`` allowed, with the reason.
EDGE: dict[str, str] = {}

#: Modules not yet at zero, with the count they may not exceed. Remove a line at zero.
BUDGET: dict[str, int] = {}


def count_any(source: str) -> int:
    """The ``Any`` names in ``source``'s code and string annotations."""
    tree = ast.parse(source)
    count = 0
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id == "Any":
            count += 1
        elif isinstance(node, ast.Attribute) and node.attr == "Any":
            count += isinstance(node.value, ast.Name) and node.value.id == "typing"
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and "Any" in node.value:
            try:
                inner = ast.parse(node.value, mode="eval")
            except SyntaxError:
                continue
            count += sum(isinstance(n, ast.Name) and n.id == "Any" for n in ast.walk(inner))
    return count


def counts() -> dict[str, int]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        n = count_any(path.read_text(encoding="utf-8"))
        if n:
            found[path.relative_to(PACKAGE).as_posix()] = n
    return found


def test_any_only_at_the_json_edge() -> None:
    found = counts()
    over = [
        f"{name}: {n} Any, budget {BUDGET.get(name, 0)}"
        for name, n in found.items()
        if name not in EDGE and n > BUDGET.get(name, 0)
    ]
    assert not over, (
        "Any outside the JSON edge (type it: a record, or core/jsontypes.JsonValue):\n"
        + "\n".join(over)
    )


def test_budgets_follow_the_counts_down() -> None:
    found = counts()
    loose = [
        f"{name}: budget {limit}, now {found.get(name, 0)}"
        for name, limit in BUDGET.items()
        if found.get(name, 0) < limit
    ]
    assert not loose, "lower these budgets in tests/package/test_any_edge.py:\n" + "\n".join(loose)


def test_edge_and_budget_name_existing_modules() -> None:
    stale = [name for name in (*EDGE, *BUDGET) if not (PACKAGE / name).is_file()]
    assert not stale, f"no such module: {stale}"
    both = sorted(set(EDGE) & set(BUDGET))
    assert not both, f"a module is either at the edge or on a budget: {both}"


def test_the_counter_sees_every_form() -> None:
    source = (
        "import typing\nfrom typing import Any\n"
        "x: Any = 1\ny: 'dict[str, Any]' = {}\nz: typing.Any = 2\n"
    )
    assert count_any(source) == 3
