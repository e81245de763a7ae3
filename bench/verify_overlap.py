"""Benchmark: verifications overlapping generation at a low ``--agentbench-concurrency``.

Run: .venv/bin/python bench/verify_overlap.py [tasks] [delay_s] [rounds]

A suite of ``tasks`` (default 12) ``python_tests`` tasks, each answered by the scripted
model after ``delay_s`` (default 0.3 s, a model call waiting on the network), run by
``pytest --agentbench --agentbench-concurrency N`` (default 2) in a subprocess; the wall
clock of the whole run, median of ``rounds`` (default 3). Every task must pass, so a fast wrong run
cannot count. A verifying rollout stands aside from the concurrency limit
(runner/pool.py), so the next task's model call overlaps the verification: the wall
tends to ``tasks × max(delay_s, verification)`` instead of their sum.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TESTS = "from solution import add\\n\\ndef test_add():\\n    assert add(1, 2) == 3\\n"
ANSWER = "```python\\ndef add(a, b):\\n    return a + b\\n```"


def suite(tasks: int, delay_s: float) -> str:
    lines = ["[suite]", f'verifier = {{ kind = "python_tests", tests = "{TESTS}" }}']
    for index in range(tasks):
        lines += [
            "[[task]]",
            f'id = "t{index}"',
            'input = "Write add(a, b)."',
            f'scripted = [{{ text = "{ANSWER}", delay_s = {delay_s} }}]',
        ]
    return "\n".join(lines) + "\n"


def run_once(folder: Path, concurrency: int) -> float:
    start = time.perf_counter()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--agentbench",
            "-q",
            "-p",
            "no:cacheprovider",
            "--agentbench-concurrency",
            str(concurrency),
            "bench_add.toml",
        ],
        cwd=folder,
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.perf_counter() - start
    if done.returncode != 0 or " passed" not in done.stdout or "failed" in done.stdout:
        raise SystemExit(f"the run did not pass every task:\n{done.stdout}\n{done.stderr}")
    return wall


def main() -> None:
    tasks = int(sys.argv[1]) if len(sys.argv) > 1 else 12
    delay_s = float(sys.argv[2]) if len(sys.argv) > 2 else 0.3
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    concurrency = int(sys.argv[4]) if len(sys.argv) > 4 else 2
    with tempfile.TemporaryDirectory() as temp:
        folder = Path(temp)
        (folder / "bench_add.toml").write_text(suite(tasks, delay_s))
        walls = [run_once(folder, concurrency) for _ in range(rounds)]
    print(
        json.dumps(
            {
                "tasks": tasks,
                "delay_s": delay_s,
                "concurrency": concurrency,
                "cores": os.cpu_count(),
                "load_1m": os.getloadavg()[0],
                "walls_s": [round(w, 2) for w in walls],
                "median_s": round(statistics.median(walls), 2),
            }
        )
    )


if __name__ == "__main__":
    main()
