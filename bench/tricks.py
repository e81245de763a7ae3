"""Does a trick earn its place? Each against the plain library way, at a realistic and a
stress size, in one run.

Run: .venv/bin/python bench/tricks.py [--rounds 5]

1. report/ctrf_scan.py (the bounded incremental reader of a verifier's inner ctrf.json)
   against ``json.loads`` of the file read whole up to the same byte cap, walking the
   tests for the first failure and the counts. Realistic: a 200-test report (a task's test
   file); stress: 60 000 tests with long messages (~30 MB), and the same above the cap.
   CPU seconds (best of ``--rounds``) and peak traced memory (tracemalloc) of each.
2. models/ratelimit_remote.py (the run's shared limit served to xdist workers over
   loopback TCP): one acquire + release, in one process and through the service, next to
   what a request costs anyway (a model's reply takes 0.2 s and more).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pytest_agentbench.report.ctrf_scan import CTRF_SCAN_CAP, scan_ctrf


def report(tests: int, message_chars: int) -> dict[str, Any]:
    rows = [
        {
            "name": f"test_case_{i}",
            "status": "failed" if i % 7 == 3 else "passed",
            "duration": 3,
            "message": ("assert add(2, 2) == 5 " * (message_chars // 22)) if i % 7 == 3 else "",
            "trace": "x" * (message_chars // 2),
        }
        for i in range(tests)
    ]
    failed = sum(row["status"] == "failed" for row in rows)
    summary = {"tests": tests, "failed": failed, "passed": tests - failed}
    return {"results": {"tool": {"name": "pytest"}, "summary": summary, "tests": rows}}


def json_whole(path: Path) -> tuple[str, int, int, int] | None:
    """The library way: read at most the cap, decode whole, walk the tests."""
    with path.open("rb") as file:
        if os.fstat(file.fileno()).st_size > CTRF_SCAN_CAP:
            return None  # over the cap: no evidence at all
        data = file.read()
    tests = json.loads(data)["results"]["tests"]
    failures = [t for t in tests if t.get("status") == "failed"]
    if not failures:
        return None
    passed = sum(t.get("status") == "passed" for t in tests)
    return str(failures[0].get("message", ""))[:2048], len(failures), passed, len(tests)


def measure(function: Callable[[Path], Any], path: Path, rounds: int) -> tuple[float, float, Any]:
    best = float("inf")
    for _ in range(rounds):
        started = time.process_time()
        result = function(path)
        best = min(best, time.process_time() - started)
    tracemalloc.start()
    function(path)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return best, peak / 2**20, result


def ctrf(rounds: int) -> None:
    print("1. inner ctrf.json: report/ctrf_scan.py against json.loads with the same cap")
    print("   report                    size MB   scan ms  scan MB   json ms  json MB  json finds")
    with tempfile.TemporaryDirectory() as tmp:
        for label, tests, chars in (
            ("realistic, 200 tests", 200, 300),
            ("stress, 60k tests", 60_000, 660),
            ("above the cap, 60k", 60_000, 1200),
        ):
            path = Path(tmp) / "ctrf.json"
            path.write_text(json.dumps(report(tests, chars)))
            size = path.stat().st_size / 2**20
            scan_s, scan_mb, found = measure(scan_ctrf, path, rounds)
            json_s, json_mb, whole = measure(json_whole, path, rounds)
            assert found is not None and found.first_failure is not None
            finds = (
                "the same"
                if whole and whole[1:] == (found.failures, found.passed, found.total)
                else "nothing"
            )
            scan = f"{scan_s * 1000:8.2f} {scan_mb:8.2f}"
            print(
                f"   {label:<24}{size:9.2f}  {scan}  {json_s * 1000:8.2f} {json_mb:8.2f}  {finds}"
            )


def limit_cost(count: int) -> None:
    from pytest_agentbench.models.ratelimit import SharedLimit
    from pytest_agentbench.models.ratelimit_remote import LimitService, RemoteLimit

    print(f"2. shared limit: {count} acquire + release pairs, one at a time")
    local = SharedLimit(max_connections=64, rpm=10**9)
    started = time.perf_counter()
    for _ in range(count):
        local.release(local.acquire(None), "ok")
    per_local = (time.perf_counter() - started) / count * 1e6
    service = LimitService(SharedLimit(max_connections=64, rpm=10**9))
    remote = RemoteLimit(service.start())
    try:
        started = time.perf_counter()
        for _ in range(count):
            remote.release(remote.acquire(None), "ok")
        per_remote = (time.perf_counter() - started) / count * 1e6
    finally:
        remote.close()
        service.stop()
    print(f"   in one process:               {per_local:7.1f} us per request")
    print(f"   from a worker (loopback TCP): {per_remote:7.1f} us per request")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    ctrf(args.rounds)
    limit_cost(5000)


if __name__ == "__main__":
    main()
