"""Benchmark: where one serial task's CPU goes, part by part, against the floor's test.

Run: .venv/bin/python bench/serial_parts.py [--tasks 600]

Two in-process pytest runs against ``bench/floor_server.py``: ``pytest --agentbench
--agentbench-concurrency 1`` over ``--tasks`` tasks, and the floor's plain test file
(``bench/throughput.py``'s, one streamed httpx request per test). In each, the CPU time
of the running thread (``time.thread_time``: user and system, so the kernel's work for
the task's files counts) is added up per part: pytest's whole item protocol, our
``run_task_item`` and what it calls (the rollout, the request, writing the files, the
record), the end-of-run reports and collection; for the floor, the protocol and the test
body. Printed per task, with what the file system's calls cost alone (``mkdir``, a new
file, a rename). One run each: the parts' proportions are what to read, since the
machine's load moves every figure.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from throughput import FLOOR_TEST, MODEL_ARGS, NO_DEV, start_server, suite_text

PROBE = """
import collections, sys, time
import pytest
import pytest_agentbench.session.execution as ex
import pytest_agentbench.session.finish as fin
import pytest_agentbench.models.http as http

spent = collections.Counter()


def wrap(owner, name, label):
    inner = getattr(owner, name)

    def timed(*args, **kwargs):
        started = time.thread_time()
        try:
            return inner(*args, **kwargs)
        finally:
            spent[label] += time.thread_time() - started

    setattr(owner, name, timed)


for name in ("run_task_item", "run_rollout", "write_rollout", "write_result", "task_record",
             "with_sample", "redact", "task_dir"):
    wrap(ex, name, name)
wrap(http.ProtocolClient, "generate", "request (client.generate)")
wrap(fin, "write_reports", "end-of-run reports")


class Phases:
    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item):
        started = time.thread_time()
        try:
            return (yield)
        finally:
            spent["item protocol (all of it)"] += time.thread_time() - started

    @pytest.hookimpl(wrapper=True)
    def pytest_pyfunc_call(self, pyfuncitem):
        started = time.thread_time()
        try:
            return (yield)
        finally:
            spent["test body"] += time.thread_time() - started

    @pytest.hookimpl(wrapper=True)
    def pytest_collection(self, session):
        started = time.thread_time()
        try:
            return (yield)
        finally:
            spent["collection"] += time.thread_time() - started


count = int(sys.argv[1])
pytest.main(sys.argv[2:], plugins=[Phases()])
for label, seconds in sorted(spent.items(), key=lambda kv: -kv[1]):
    print(f"RESULT {label}\\t{seconds / count * 1e6:.0f}")
"""


def measure(folder: Path, count: int, *args: str) -> dict[str, float]:
    env = {**os.environ, "OPENAI_API_KEY": "x"}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    command = [sys.executable, "-c", PROBE, str(count), "-q", "-p", "no:cacheprovider"]
    out = subprocess.run(
        [*command, *NO_DEV, *args], cwd=folder, env=env, capture_output=True, text=True
    ).stdout
    parts = [line[7:].split("\t") for line in out.splitlines() if line.startswith("RESULT ")]
    return {label: float(value) for label, value in parts}


def inodes(count: int) -> dict[str, float]:
    """Microseconds of thread CPU per ``mkdir``, per ``open(O_CREAT)`` of a new file and
    per ``rename`` over it, ``count`` of each in a fresh folder."""
    spent = dict.fromkeys(("mkdir", "open a new file", "write 2 KB", "rename"), 0.0)
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
    with tempfile.TemporaryDirectory(prefix="agentbench-inodes-") as root:
        for i in range(count):
            folder = f"{root}/t{i}"
            started = time.thread_time()
            os.mkdir(folder)
            made = time.thread_time()
            fd = os.open(f"{folder}/.r.tmp", flags, 0o644)
            opened = time.thread_time()
            os.write(fd, b"x" * 2048)
            os.close(fd)
            written = time.thread_time()
            os.replace(f"{folder}/.r.tmp", f"{folder}/result.json")
            renamed = time.thread_time()
            spent["mkdir"] += made - started
            spent["open a new file"] += opened - made
            spent["write 2 KB"] += written - opened
            spent["rename"] += renamed - written
    return {label: seconds / count * 1e6 for label, seconds in spent.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=600)
    args = parser.parse_args()
    server, url = start_server()
    try:
        with tempfile.TemporaryDirectory(prefix="agentbench-parts-") as tmp:
            ours, floor = Path(tmp, "ours"), Path(tmp, "floor")
            ours.mkdir()
            floor.mkdir()
            (ours / "bench_tp.toml").write_text(suite_text(args.tasks))
            (floor / "test_plain.py").write_text(FLOOR_TEST.format(url=url, count=args.tasks))
            serial = ("--agentbench-concurrency", "1")
            mine = measure(ours, args.tasks, *MODEL_ARGS, "--agentbench-base-url", url, *serial)
            theirs = measure(floor, args.tasks)
    finally:
        server.terminate()
        server.wait()
    print(f"CPU of the running thread per task, {args.tasks} serial tasks, microseconds:")
    for title, parts in (("ours", mine), ("floor", theirs)):
        print(title)
        for label, value in parts.items():
            print(f"  {label:<32}{value:>8.0f}")
    print("file system alone, per call (what a task's folder and files cost the kernel):")
    for label, value in inodes(args.tasks).items():
        print(f"  {label:<32}{value:>8.0f}")
    own = mine.get("item protocol (all of it)", 0) - mine.get("run_task_item", 0)
    print(f"pytest's own part of our item protocol: {own:.0f} us; the floor's:", end=" ")
    print(f"{theirs.get('item protocol (all of it)', 0) - theirs.get('test body', 0):.0f} us")


if __name__ == "__main__":
    main()
