"""Benchmark the HTML report of a large run: its size, the time to build it, and the time
headless Chromium takes to open it, filter the table and open a task panel.

Run: .venv/bin/python bench/html_report.py [--tasks 5000] [--keep DIR]

A real ``pytest --agentbench`` run (scripted model, ``exact`` verifier, one repair round;
a quarter of the tasks answer wrong first, some answer at length) makes the run folder;
``python -m pytest_agentbench report`` then rebuilds its page, timed. The browser part
needs Playwright and a Chromium (``AGENTBENCH_CHROMIUM`` or ``chromium`` on PATH) and is
skipped, saying so, without them. Times are wall-clock on this machine, one run each;
the report's CPU time and peak RSS are its process's own (wait4).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def suite(tasks: int) -> str:
    lines = ['[suite]\nname = "big"\nverifier = { kind = "exact" }\nrepairs = 1\n']
    for i in range(tasks):
        first = "wrong" if i % 4 == 0 else str(i)
        if i % 50 == 1:
            first = ("A longer answer that goes on. " * 40) + str(i)
        lines.append(
            f'[[task]]\nid = "t{i:05d}"\ninput = "Reply with {i}."\ntarget = "{i}"\n'
            f'scripted = [{json.dumps(first)}, "{i}"]\n'
        )
    return "\n".join(lines)


#: The floor of the report's memory: the interpreter with the modules ``report`` imports
#: (the page's, and the run's for the names of the secrets to redact).
FLOOR = (
    "import pytest_agentbench.__main__, pytest_agentbench.report.html_report, "
    "pytest_agentbench.session.run, pytest_agentbench.core.urls"
)


def waited(command: list[str]) -> tuple[int, resource.struct_rusage]:
    """Run ``command`` (output discarded); its exit status and its own resource usage
    (wait4: CPU and peak RSS of that process alone)."""
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(child.pid, 0)
    return os.waitstatus_to_exitcode(status), usage


def browse(path: Path, tasks: int) -> None:
    chromium = os.environ.get("AGENTBENCH_CHROMIUM") or shutil.which("chromium")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        print("browser: skipped (playwright is not installed)")
        return
    if chromium is None:
        print("browser: skipped (no chromium)")
        return
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium)
        page = browser.new_page()
        t0 = time.perf_counter()
        page.goto(path.as_uri(), wait_until="load")
        page.wait_for_selector("body.js")
        loaded = time.perf_counter() - t0
        t0 = time.perf_counter()
        page.fill("#f-text", f"t{max(0, tasks - 10):05d}"[:-1])  # ten tasks or fewer
        page.wait_for_function("document.querySelectorAll('#task-table tbody tr').length < 20")
        filtered = time.perf_counter() - t0
        t0 = time.perf_counter()
        page.click("#task-table tbody tr td:nth-child(4)")
        page.wait_for_selector("#panel:not([hidden])")
        opened = time.perf_counter() - t0
        browser.close()
    print(f"browser: open {loaded:.2f} s, filter {filtered:.3f} s, task panel {opened:.3f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=5000)
    parser.add_argument("--keep", type=Path, default=None, help="make the run here and keep it")
    args = parser.parse_args()
    folder = args.keep or Path(tempfile.mkdtemp(prefix="html-bench-"))
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "bench_big.toml").write_text(suite(args.tasks), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}
    t0 = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "pytest", "--agentbench", "-q", "-p", "no:cacheprovider",
         "--agentbench-out", "out", "bench_big.toml"],
        cwd=folder, env=env, capture_output=True, check=False,
    )  # fmt: skip
    print(f"run: {args.tasks} tasks in {time.perf_counter() - t0:.1f} s")
    run_dir = (folder / "out" / "latest").resolve()
    t0 = time.perf_counter()
    status, usage = waited([sys.executable, "-m", "pytest_agentbench", "report", str(run_dir)])
    built = time.perf_counter() - t0
    cpu = usage.ru_utime + usage.ru_stime
    if status != 0:
        sys.exit(f"report failed: exit status {status}")
    _, floor = waited([sys.executable, "-c", FLOOR])
    page = run_dir / "report.html"
    size = page.stat().st_size
    print(
        f"report: built in {built:.2f} s wall, {cpu:.2f} s CPU (process start included), "
        f"{size / 1e6:.1f} MB; peak RSS {usage.ru_maxrss / 1024:.1f} MB (floor: the "
        f"interpreter with the modules it imports, {floor.ru_maxrss / 1024:.1f} MB)"
    )
    browse(page, args.tasks)
    if args.keep is None:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
