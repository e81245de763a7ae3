"""Benchmark the figures of issue 34 with an older revision in the same rounds: rollouts in
flight (64 and 128) against plain threads, CPU per rollout, start-up, memory per task.

Run: .venv/bin/python bench/paired.py [--against REV] [--rounds 3] [--flight-tasks 384]
     [--memory 1000,5000] [--only flight,start,memory] [--results-dir /dev/shm]

What ``bench/throughput.py`` measures, on a shared machine: each round runs every side of
every figure one after the other (ours, ``REV``'s copy of the package put first on
``PYTHONPATH``, and the floor), so a busy moment hits every side alike; each figure is the
best of ``--rounds``. Every agentbench run is a real ``pytest --agentbench`` against
``bench/floor_server.py`` in its own process, and is checked (N passed in ctrf.json).

- in flight: 200 ms per request; efficiency is plain threads' span (first request to
  last reply, one httpx client per thread) over the run phase (first rollout's start to
  last one's end, from ctrf.json); goal >= 0.9 at 64, >= 0.8 at 128. Beside it, the
  run's wall past its start-up and that phase: work moved out of the phase rather than
  saved shows there, larger than the other side's. CPU per rollout is
  the run's CPU (user + sys, wait4) less a one-task run's, per task: it should not grow
  with the number in flight. Each task writes its files (two folders, three files); on
  a disk where many files were deleted in the last minutes (a shared machine running
  test suites) ext4 spends much of its time finding a free inode for each
  (docs/scale.md, "The fifth pass"): ``--results-dir /dev/shm`` puts the in-flight runs'
  folders on a tmpfs, which shows the rest without that cost.
- start-up: CPU and wall of ``pytest --agentbench`` with one task over plain pytest with
  one test; goal <= 1.3x (wall, as ``throughput.py`` gives it; CPU beside it, steadier).
  Beside it, over plain pytest whose one test imports httpx and streams one request from
  the same server: what a task cannot do without.
- memory: peak RSS growth per task between the two ``--memory`` sizes, less plain
  pytest's per trivial test; goal <= 0.7 KiB. Peak RSS moves by a megabyte or two from
  run to run whatever the size: between 500 and 2 000 tasks that was up to a KiB a task
  (the same code 0.70 and 0.93 KiB in two quiet runs); between 1 000 and 5 000 (the
  default) it is a third of that.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sys
import tempfile
from pathlib import Path

from serial_cost import checkout
from throughput import (
    FLOOR_TEST,
    HERE,
    LATENCY_S,
    MODEL_ARGS,
    Run,
    plain,
    run_pytest,
    start_server,
    suite_text,
    threaded_floor,
)

IGNORED = shutil.ignore_patterns("__pycache__")
MEMORY_TEST = (
    "import pytest\n\n@pytest.mark.parametrize('i', range({size}))\n"
    "def test_nothing(i):\n    pass\n"
)


def side_run(root: Path, side: str, path: str | None, url: str, count: int, *args: str) -> Run:
    """One ``pytest --agentbench`` of ``count`` tasks, the package from ``path`` (None: the
    installed one); checked: every task passed."""
    import os

    named = list(args)
    if "--agentbench-out" in named:  # (a path: not part of the folder's name)
        at = named.index("--agentbench-out")
        del named[at : at + 2]
    folder = root / f"{side}-{count}-{'-'.join(named) or 'default'}"
    if not folder.exists():
        folder.mkdir(parents=True)
        (folder / "bench_tp.toml").write_text(suite_text(count))
    old = os.environ.get("PYTHONPATH")
    if path:
        os.environ["PYTHONPATH"] = path
    try:
        run = run_pytest(folder, *MODEL_ARGS, "--agentbench-base-url", url, *args)
    finally:
        if old is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = old
    log = (folder / "pytest.log").read_text()
    if f"{count} passed" not in log:
        raise SystemExit(f"{side}: expected {count} passed:\n{log[-1500:]}")
    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--against", help="a git revision to measure in the same rounds")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--flight-tasks", type=int, default=384)
    parser.add_argument("--memory", default="1000,5000", help="two sizes for memory per task")
    parser.add_argument("--only", default="flight,start,memory")
    parser.add_argument(
        "--results-dir",
        help="write the in-flight runs' result folders here (e.g. /dev/shm: a tmpfs, to "
        "see what the disk's file system costs: docs/scale.md, 'The fifth pass')",
    )
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # so the servers are stopped
    only = set(args.only.split(","))
    fast, fast_url = start_server()
    slow, slow_url = start_server("--latency-s", str(LATENCY_S))
    results: dict[str, list[Run | float]] = {}
    stamp = f"agentbench-paired-{os.getpid()}"  # names this bench's folders in --results-dir

    def take(key: str, value: Run | float) -> None:
        results.setdefault(key, []).append(value)

    try:
        with tempfile.TemporaryDirectory(prefix="agentbench-paired-") as tmp:
            root = Path(tmp)
            # ours as it is now, copied: the working tree may change while the rounds run
            mine = root / "ours" / "pytest_agentbench"
            shutil.copytree(HERE.parent / "pytest_agentbench", mine, ignore=IGNORED)
            sides: list[tuple[str, str | None]] = [("ours", str(mine.parent))]
            if args.against:
                sides.append((args.against, checkout(args.against, root / "old")))
            mem_sizes = [int(size) for size in args.memory.split(",")]
            for number in range(args.rounds):
                print(f"round {number + 1}", file=sys.stderr, flush=True)
                for side, path in sides:
                    one = ("--agentbench-concurrency", "1")
                    take(f"start {side}", side_run(root, side, path, fast_url, 1, *one))
                    if "flight" in only:
                        for flight in (64, 128):
                            out: tuple[str, ...] = ()
                            if args.results_dir:
                                place = Path(args.results_dir) / f"{stamp}-{side}-{flight}"
                                out = ("--agentbench-out", str(place))
                            run = side_run(
                                root,
                                side,
                                path,
                                slow_url,
                                args.flight_tasks,
                                "--agentbench-concurrency",
                                str(flight),
                                *out,
                            )
                            take(f"flight {flight} {side}", run)
                    if "memory" in only:
                        for size in mem_sizes:
                            take(f"mem {size} {side}", side_run(root, side, path, fast_url, size))
                take("start floor", plain(root, "start", "def test_one():\n    pass\n"))
                # what one task cannot do without: an HTTP client imported, one request
                request = FLOOR_TEST.format(url=fast_url, count=1)
                take("start floor-request", plain(root, "start-request", request))
                if "flight" in only:
                    for flight in (64, 128):
                        take(
                            f"flight {flight} floor",
                            threaded_floor(slow_url, args.flight_tasks, 1, flight),
                        )
                if "memory" in only:
                    for size in mem_sizes:
                        source = MEMORY_TEST.format(size=size)
                        take(f"mem {size} floor", plain(root, f"mem{size}", source))
    finally:
        for process in (fast, slow):
            process.terminate()
            process.wait()
        if args.results_dir:  # the run folders kept there until now (see run_pytest)
            for place in Path(args.results_dir).glob(f"{stamp}-*"):
                shutil.rmtree(place, ignore_errors=True)
    report(results, [side for side, _ in sides], args)


def _runs(results: dict[str, list[Run | float]], key: str) -> list[Run]:
    return [run for run in results[key] if isinstance(run, Run)]


def report(
    results: dict[str, list[Run | float]], sides: list[str], args: argparse.Namespace
) -> None:
    print(
        f"\nbest of {args.rounds} rounds; {args.flight_tasks} tasks in flight at "
        f"{LATENCY_S * 1000:.0f} ms; memory at {args.memory} tasks\n"
    )
    start_floors = {
        "plain pytest": _runs(results, "start floor"),
        "plain pytest + httpx + one streamed request": _runs(results, "start floor-request"),
    }
    for side in sides:
        print(f"{side}:")
        starts = _runs(results, f"start {side}")
        wall = min(run.wall_s for run in starts)
        cpu = min(run.cpu_s for run in starts)
        for name, floor in start_floors.items():
            floor_wall = min(run.wall_s for run in floor)
            floor_cpu = min(run.cpu_s for run in floor)
            goal = "   goal <= 1.3x" if name == "plain pytest" else ""
            print(
                f"  start-up ÷ {name}: wall {wall / floor_wall:.2f}x ({wall:.3f} s against "
                f"{floor_wall:.3f} s), CPU {cpu / floor_cpu:.2f}x ({cpu:.3f} s against "
                f"{floor_cpu:.3f} s){goal}"
            )
        for flight in (64, 128):
            key = f"flight {flight} {side}"
            if key not in results:
                continue
            runs = _runs(results, key)
            floors = [
                value for value in results[f"flight {flight} floor"] if isinstance(value, float)
            ]
            phase = min(run.phase_s for run in runs)
            cheapest = min(runs, key=lambda run: run.cpu_s)
            per = (cheapest.cpu_s - cpu) / args.flight_tasks
            user = (cheapest.user_s - min(run.user_s for run in starts)) / args.flight_tasks
            switches = cheapest.switches / args.flight_tasks
            ideal = args.flight_tasks * LATENCY_S / flight
            # the run's wall past its start-up and its rollouts: the reports and whatever
            # work a change moved out of the phase (files written later, say)
            after = min(run.wall_s - run.phase_s for run in runs) - wall
            whole = min(run.wall_s for run in runs) - wall  # what a user waits, past start-up
            print(
                f"  {flight} in flight: efficiency ÷ plain threads {min(floors) / phase:.2f} "
                f"(ours {ideal / phase:.2f} of ideal, threads {ideal / min(floors):.2f}); "
                f"CPU per rollout {per * 1000:.2f} ms (user {user * 1000:.2f} ms), "
                f"{switches:.0f} voluntary context switches per rollout; "
                f"{after:.2f} s of the run's wall past start-up and the rollouts; the whole "
                f"run {whole:.2f} s past start-up"
            )
        sizes = [int(size) for size in args.memory.split(",")]
        if f"mem {sizes[0]} {side}" in results:
            grow = [
                (
                    min(run.rss_kib for run in _runs(results, f"mem {sizes[1]} {who}"))
                    - min(run.rss_kib for run in _runs(results, f"mem {sizes[0]} {who}"))
                )
                / (sizes[1] - sizes[0])
                for who in (side, "floor")
            ]
            print(
                f"  memory per task above pytest's own: {grow[0] - grow[1]:.2f} KiB "
                f"(ours {grow[0]:.2f}, pytest {grow[1]:.2f} KiB per test)   goal <= 0.7 KiB"
            )
    print(
        json.dumps({k: [getattr(v, "cpu_s", v) for v in vs] for k, vs in results.items()}),
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()
