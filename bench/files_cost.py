"""What the task files cost a run in flight: the same ``pytest --agentbench`` with its
results on this disk and on a tmpfs, in the same rounds.

Run: .venv/bin/python bench/files_cost.py [--rounds 3] [--tasks 384] [--flight 128]
     [--tmpfs /dev/shm] [--perf] [--churn 20000]

Each task writes two folders and three files (the rollout folder's contract). On ext4,
creating a file or a folder looks for a free inode, and passes over the ones freed in the
last minutes (``recently_deleted`` in the kernel): on a machine that deletes many files
(test suites, earlier benches) that search can cost more than the run's own Python. Both
sides are ours (the working tree, copied), against ``bench/floor_server.py`` at 200 ms a
request; every run is checked (N passed). Printed per side, best of the rounds and each
round: the wall past a one-task run's, the CPU and the system CPU per task. With
``--perf`` (needs ``perf``), one more run on disk under ``perf record`` gives the share of
the run's samples in ext4's file and folder creation and in ``recently_deleted``. With
``--churn N``, N small files are made and deleted beside the runs' folders just before
each run on disk (and the perf run): what a machine running test suites does to it.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from paired import IGNORED, side_run
from throughput import HERE, LATENCY_S, MODEL_ARGS, NO_DEV, Run, start_server

SIDES = ("disk", "tmpfs")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tasks", type=int, default=384)
    parser.add_argument("--flight", type=int, default=128)
    parser.add_argument("--tmpfs", default="/dev/shm")
    parser.add_argument("--perf", action="store_true")
    parser.add_argument("--churn", type=int, default=0, help="files deleted before each run")
    args = parser.parse_args()
    fast, fast_url = start_server()
    slow, slow_url = start_server("--latency-s", str(LATENCY_S))
    results: dict[str, list[tuple[Run, Run]]] = {side: [] for side in SIDES}
    shares = ""
    try:
        with (
            tempfile.TemporaryDirectory(prefix="agentbench-files-") as tmp,
            tempfile.TemporaryDirectory(prefix="agentbench-files-", dir=args.tmpfs) as shm,
        ):
            root = Path(tmp)
            mine = root / "ours" / "pytest_agentbench"
            shutil.copytree(HERE.parent / "pytest_agentbench", mine, ignore=IGNORED)
            path = str(mine.parent)
            flight = ("--agentbench-concurrency", str(args.flight))
            for number in range(args.rounds):
                print(f"round {number + 1}", file=sys.stderr, flush=True)
                for side in SIDES:
                    one = side_run(root, side, path, fast_url, 1, "--agentbench-concurrency", "1")
                    out = ("--agentbench-out", f"{shm}/r{number}") if side == "tmpfs" else ()
                    if side == "disk":
                        _churn(root, args.churn)
                    run = side_run(root, side, path, slow_url, args.tasks, *flight, *out)
                    results[side].append((one, run))
            if args.perf:
                _churn(root, args.churn)
                shares = _perf(root, path, slow_url, args.tasks, flight)
    finally:
        for process in (fast, slow):
            process.terminate()
            process.wait()
    churned = f"; {args.churn} files deleted before each run on disk" if args.churn else ""
    print(
        f"\n{args.tasks} tasks at {args.flight} in flight, {LATENCY_S * 1000:.0f} ms a "
        f"request{churned}"
    )
    for side in SIDES:
        rows = [
            (
                run.wall_s - one.wall_s,
                (run.cpu_s - one.cpu_s) / args.tasks * 1000,
                (run.cpu_s - run.user_s - (one.cpu_s - one.user_s)) / args.tasks * 1000,
            )
            for one, run in results[side]
        ]
        walls = ", ".join(f"{wall:.2f}" for wall, _, _ in rows)
        cpus = ", ".join(f"{cpu:.2f}" for _, cpu, _ in rows)
        systems = ", ".join(f"{system:.2f}" for _, _, system in rows)
        print(
            f"  results on {side}: wall past start-up {min(r[0] for r in rows):.2f} s "
            f"({walls}); CPU per task {cpus} ms, of it system {systems} ms"
        )
    if shares:
        print(shares)


def _churn(root: Path, count: int) -> None:
    """Make ``count`` small files beside the runs' folders and delete them."""
    if count:
        churn = root / "churn"
        churn.mkdir(exist_ok=True)
        for index in range(count):
            (churn / f"f{index}").write_bytes(b"x")
        shutil.rmtree(churn)


def _perf(root: Path, path: str, url: str, tasks: int, flight: tuple[str, ...]) -> str:
    """One run on disk under ``perf record``: the share of its samples in ext4's creation
    of files and folders, and in ``recently_deleted`` (the search past freed inodes)."""
    folder = root / f"disk-{tasks}-{'-'.join(flight)}"
    data = root / "perf.data"
    env = {**os.environ, "OPENAI_API_KEY": "x", "PYTHONPATH": path}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *NO_DEV]
    command += [*MODEL_ARGS, "--agentbench-base-url", url, *flight]
    record = ["perf", "record", "-q", "-F", "2000", "-g", "-o", str(data), "--", *command]
    subprocess.run(record, cwd=folder, env=env, check=True, capture_output=True)
    report = subprocess.run(
        ["perf", "report", "-i", str(data), "--children", "--sort", "sym", "--stdio", "-g", "none"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    found = {}
    for line in report.splitlines():
        parts = line.split()
        if len(parts) >= 4 and parts[-1] in ("ext4_create", "ext4_mkdir", "recently_deleted"):
            found[parts[-1]] = float(parts[0].rstrip("%"))
    made = found.get("ext4_create", 0.0) + found.get("ext4_mkdir", 0.0)
    return (
        f"  perf, one more run on disk: {made:.1f} % of its samples in ext4 creating files "
        f"and folders, {found.get('recently_deleted', 0.0):.1f} % in recently_deleted"
    )


if __name__ == "__main__":
    main()
