"""``Any`` only at the JSON edge (issue 13): a ratchet on every module's count.

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
BUDGET: dict[str, int] = {
    # --- (glue)
    "builtins.py": 1,
    "collector.py": 1,
    "errors.py": 2,
    "execution.py": 1,
    "hookspecs.py": 1,
    "inflight.py": 7,
    "items.py": 9,
    "model_fixture.py": 5,
    "model_list.py": 8,
    "plugin.py": 17,
    "plugin_hooks.py": 10,
    "pytest_compat.py": 17,
    "python_tasks.py": 6,
    "run.py": 4,
    "services.py": 2,
    "settings.py": 26,
    "timeouts.py": 3,
    "workers.py": 12,
    # --- artifacts
    "artifacts/baseline.py": 1,
    "artifacts/coverage.py": 2,
    "artifacts/jsonio.py": 5,
    "artifacts/lineup.py": 4,
    "artifacts/merge.py": 2,
    "artifacts/rollout_files.py": 8,
    "artifacts/summary.py": 1,
    # --- core
    "core/records.py": 10,
    "core/sampling.py": 9,
    "core/stats.py": 1,
    "core/stream.py": 5,
    # --- models
    "models/anthropic.py": 15,
    "models/anthropic_format.py": 7,
    "models/base.py": 7,
    "models/chat_format.py": 14,
    "models/http.py": 23,
    "models/openai_chat.py": 6,
    "models/openai_responses.py": 26,
    "models/overflow.py": 3,
    "models/ratelimit.py": 2,
    "models/ratelimit_remote.py": 1,
    "models/retry.py": 3,
    "models/sampling_wire.py": 3,
    "models/scripted.py": 3,
    "models/slots.py": 1,
    "models/sse.py": 15,
    "models/usage.py": 5,
    # --- report
    "report/compare.py": 1,
    "report/ctrf_scan.py": 7,
    "report/gate.py": 1,
    "report/html_data.py": 41,
    "report/html_page.py": 16,
    "report/html_report.py": 9,
    "report/html_svg.py": 4,
    "report/live.py": 1,
    "report/markdown.py": 6,
    "report/probes.py": 1,
    # --- runner
    "runner/agent.py": 21,
    "runner/loopguard.py": 4,
    "runner/pool.py": 7,
    "runner/repair.py": 3,
    "runner/rollout.py": 6,
    "runner/tools.py": 9,
    # --- sandbox
    "sandbox/forkserver.py": 4,
    "sandbox/isolation.py": 2,
    "sandbox/workspace.py": 1,
    # --- schemas
    "schemas/__init__.py": 4,
    # --- scripted
    "scripted/__init__.py": 1,
    "scripted/book.py": 3,
    "scripted/script.py": 11,
    "scripted/server.py": 23,
    "scripted/usage.py": 9,
    "scripted/wire.py": 16,
    "scripted/wire_anthropic.py": 39,
    "scripted/wire_chat.py": 24,
    "scripted/wire_responses.py": 31,
    # --- suites
    "suites/__init__.py": 1,
    "suites/controls.py": 10,
    "suites/dataset.py": 25,
    "suites/fit.py": 3,
    "suites/load.py": 26,
    "suites/perturb.py": 3,
    "suites/read.py": 6,
    "suites/task.py": 6,
    "suites/validate.py": 7,
    # --- verifiers
    "verifiers/base.py": 4,
    "verifiers/checks.py": 15,
    "verifiers/choice.py": 2,
    "verifiers/code.py": 13,
    "verifiers/command.py": 7,
    "verifiers/inner_checks.py": 11,
    "verifiers/inner_ctrf.py": 3,
    "verifiers/inner_pytest.py": 1,
    "verifiers/json_schema.py": 13,
    "verifiers/number.py": 2,
    "verifiers/sandboxed.py": 6,
    "verifiers/stamped.py": 14,
    "verifiers/text.py": 8,
}


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
    assert not loose, "lower these budgets in tests/test_any_edge.py:\n" + "\n".join(loose)


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
