"""Benchmark the sandbox: what one code task costs on top of running its tests.

Run: .venv/bin/python bench/sandbox.py [rounds]

Measured in this one run, wall clock, median of ``rounds`` (default 7), in a rotating order
so machine noise spreads over every variant:

- ``bare python``: ``subprocess.run([python, "-c", "pass"])``, the floor of any Python run;
- ``sandbox run, <mode>``: a workspace made and ``python -c pass`` run in it, per isolation;
- ``python_tests, <mode>``: the whole verifier on a one-test task (workspace, files, the
  inner pytest with our CTRF plugin, report checks), per isolation.

Ratios are against the bare run, and strong against basic. ``strong`` rows appear only
where bubblewrap works; the header says what this machine gives.
"""

from __future__ import annotations

import statistics
import subprocess
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


def bare_python() -> None:
    subprocess.run([sys.executable, "-c", "pass"], check=True)


def sandbox_run(mode: str, scratch: Path) -> Callable[[], None]:
    counter = iter(range(10**9))

    def run() -> None:
        workspace = Workspace.create(scratch / f"{mode}-{next(counter)}", isolation=mode)
        result = workspace.run([sys.executable, "-c", "pass"])
        assert result.exit_code == 0, result

    return run


def python_tests(mode: str, scratch: Path) -> Callable[[], None]:
    path = Path("bench_sandbox.toml")
    task = Task(suite="bench", id="add", index=0, path=path, input="", prompt="", target=TESTS)
    counter = iter(range(10**9))

    def run() -> None:
        verifier_dir = scratch / f"tests-{mode}-{next(counter)}" / "verifier"
        verdict = PYTHON_TESTS.verify(Check(ANSWER, task, {"isolation": mode}, verifier_dir))
        assert verdict.reward == 1.0, verdict

    return run


def main(rounds: int) -> None:
    strong = containment()["level"] == "strong"
    print(f"containment (auto): {containment()['detail']}")
    modes = ["basic"] + (["strict"] if strong else [])
    labels = {"basic": "basic", "strict": "strong"}
    with tempfile.TemporaryDirectory(prefix="agentbench-bench-") as name:
        scratch = Path(name)
        variants: dict[str, Callable[[], None]] = {"bare python": bare_python}
        for mode in modes:
            variants[f"sandbox run, {labels[mode]}"] = sandbox_run(mode, scratch)
        for mode in modes:
            variants[f"python_tests, {labels[mode]}"] = python_tests(mode, scratch)
        for run in variants.values():  # warm up: probes, imports, page cache
            run()
        times = rotating_times(variants, rounds)
    median = {label: statistics.median(values) for label, values in times.items()}
    bare = median["bare python"]
    print(f"\n{'variant':<26}{'median':>10}{'× bare':>9}")
    for label, value in median.items():
        print(f"{label:<26}{value * 1000:>8.1f}ms{value / bare:>8.1f}×")
    if strong:
        for kind in ("sandbox run", "python_tests"):
            ratio = median[f"{kind}, strong"] / median[f"{kind}, basic"]
            print(f"{kind}: strong isolation costs {ratio:.2f}× basic")
    else:
        print("strong isolation unavailable here: install bubblewrap to compare")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 7)
