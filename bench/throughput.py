"""Benchmark scale against an independent server: every figure of docs/scale.md, in one run.

Run: .venv/bin/python bench/throughput.py [--tasks 1000] [--flight-tasks 512]
     [--memory 1000,5000] [--rounds 3] [--quick]

Every agentbench run is a real ``pytest --agentbench`` subprocess (``--agentbench-model
openai-compat/x``) over a suite generated in a temp folder, against ``bench/floor_server.py``
in its own process: a standard-library server that does nothing but answer, so its cost
does not hide ours. Every floor meets the same server in the same run; each figure is the
best of ``--rounds`` (ours and the floor alternate, so a busy moment hits both alike).
Both sides run as a user's would: bytecode cached (``PYTHONDONTWRITEBYTECODE`` dropped) and
the project's test-only plugins off (``NO_DEV``).

1. marginal per-task cost: zero latency, streamed, ``--agentbench-concurrency 1``:
   (wall at N tasks - wall at N/10) / (N - N/10), against the same for a plain pytest file
   whose tests each make one streamed httpx request. Target <= 1.25x.
2. efficiency at 64 and 128 in flight, 200 ms per request: the run phase (first rollout's
   start to last one's end, from ctrf.json) against plain threads (one httpx client each)
   making the same requests, timed from their first request to their last reply.
   Target >= 0.9 at 64, >= 0.8 at 128.
3. ``-n 2`` x 32 against two plain processes of 32 threads. Target >= 0.8.
4. start-up: wall of ``pytest --agentbench`` with one task against plain pytest with one
   test. Target <= 1.3x.
5. memory per task: peak RSS growth per task between the two ``--memory`` sizes, minus
   plain pytest's growth per trivial test. Target <= 1 KiB.
6. CPU per task at saturation: CPU seconds (user + sys, from wait4) of the 64-in-flight
   run less those of the one-task run, per task. Target <= 3 ms.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

LATENCY_S = 0.2
HERE = Path(__file__).resolve().parent
MODEL_ARGS = ("--agentbench", "--agentbench-model", "openai-compat/x")
#: The project's test-only plugins (its dev extra, pytest-randomly among them: it
#: imports numpy and reseeds every test), off on both sides: a user's pytest
#: need not have them. xdist stays (``-n 2``), and anyio's plugin comes with httpx.
NO_DEV: tuple[str, ...] = ("-p", "no:hypothesispytest", "-p", "no:rerunfailures")
NO_DEV += ("-p", "no:pytest-split", "-p", "no:timeout", "-p", "no:randomly")


@dataclass(frozen=True)
class Run:
    wall_s: float
    cpu_s: float
    rss_kib: float
    phase_s: float
    #: the user part of ``cpu_s`` (the rest is system time: file creation above all)
    user_s: float = float("nan")
    #: voluntary context switches (``wait4``): a thread that blocked, on I/O or the GIL
    switches: int = 0


def rotating_times(
    variants: Mapping[str, Callable[[], None]],
    rounds: int,
    repeat: Mapping[str, int] | None = None,
) -> dict[str, list[float]]:
    """Wall seconds of each variant per round, the order rotating each round (so a busy
    moment of the machine spreads over all); a variant with a ``repeat`` count runs that
    many times a round, averaged."""
    times: dict[str, list[float]] = {label: [] for label in variants}
    order = list(variants)
    for round_ in range(rounds):
        for label in order[round_ % len(order) :] + order[: round_ % len(order)]:
            count = (repeat or {}).get(label, 1)
            start = time.perf_counter()
            for _ in range(count):
                variants[label]()
            times[label].append((time.perf_counter() - start) / count)
    return times


def start_server(*args: str) -> tuple[subprocess.Popen[str], str]:
    server = subprocess.Popen(
        [sys.executable, str(HERE / "floor_server.py"), *args], stdout=subprocess.PIPE, text=True
    )
    assert server.stdout is not None
    return server, server.stdout.readline().rsplit(" ", 1)[-1].strip()


def suite_text(count: int) -> str:
    tasks = "".join(f'[[task]]\nid = "t{i}"\ninput = "q"\ntarget = "a"\n' for i in range(count))
    return '[suite]\nname = "tp"\nverifier = { kind = "exact" }\n' + tasks


FLOOR_TEST = """
import httpx
import pytest

URL = {url!r}
CLIENT = httpx.Client(trust_env=False, timeout=60)
BODY = {{"model": "x", "messages": [{{"role": "user", "content": "q"}}], "stream": True}}


@pytest.mark.parametrize("i", range({count}))
def test_request(i):
    with CLIENT.stream("POST", URL + "/chat/completions", json=BODY) as response:
        assert response.status_code == 200
        for _ in response.iter_lines():
            pass
"""

FLOOR_THREADS = """
import sys, threading, time
from concurrent.futures import ThreadPoolExecutor
import httpx

url, count, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
tls = httpx.create_ssl_context()
local = threading.local()
body = {"model": "x", "messages": [{"role": "user", "content": "q"}], "stream": True}


def one(_):
    client = getattr(local, "client", None)
    if client is None:
        client = local.client = httpx.Client(trust_env=False, timeout=60, verify=tls)
    with client.stream("POST", url + "/chat/completions", json=body) as response:
        for _ in response.iter_lines():
            pass


sys.stdin.readline()  # start together
started = time.time()
with ThreadPoolExecutor(threads) as pool:
    list(pool.map(one, range(count)))
print(started, time.time())
"""


def threaded_floor(url: str, count: int, processes: int, threads: int) -> float:
    """Seconds from the first request to the last reply of ``count`` streamed requests
    from ``processes`` plain Python processes of ``threads`` httpx threads each (one
    client per thread), start-up excluded."""
    children = [
        subprocess.Popen(
            [sys.executable, "-c", FLOOR_THREADS, url, str(count // processes), str(threads)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(processes)
    ]
    time.sleep(1.5)  # let them import httpx
    for child in children:
        assert child.stdin is not None
        child.stdin.write("go\n")
        child.stdin.flush()
    spans = [tuple(map(float, child.communicate()[0].split())) for child in children]
    return max(stop for _, stop in spans) - min(start for start, _ in spans)


def run_pytest(folder: Path, *args: str) -> Run:
    """One pytest subprocess in ``folder``: wall, CPU and peak RSS (from wait4), and the
    run phase from ctrf.json when it is an agentbench run."""
    print(f"  {folder.name} {' '.join(args[-4:])}", file=sys.stderr, flush=True)
    out = folder / "agentbench-results"
    if "--agentbench-out" in args:
        out = Path(args[args.index("--agentbench-out") + 1])
    env = {**os.environ, "OPENAI_API_KEY": "x"}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # as users run: modules compiled once, cached
    with open(folder / "pytest.log", "w") as log:
        started = time.perf_counter()
        child = subprocess.Popen(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *NO_DEV, *args],
            cwd=folder,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
        )
        _, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) != 0:
        tail = (folder / "pytest.log").read_text()[-2000:]
        raise SystemExit(f"pytest failed in {folder}:\n{tail}")
    phase = float("nan")
    report = out / "latest" / "ctrf.json"
    if report.exists():
        tests = json.loads(report.read_text())["results"]["tests"]
        spans = [(t["start"], t["stop"]) for t in tests if "start" in t]
        phase = (max(s for _, s in spans) - min(s for s, _ in spans)) / 1000
        # the run's folder stays until the bench ends: files deleted here would make the
        # next run's files slow to create (ext4 passes over recently freed inodes when it
        # looks for a free one: docs/scale.md, "The fifth pass"), which no user's run pays
    rss = usage.ru_maxrss / (1024 if sys.platform == "darwin" else 1)
    cpu = usage.ru_utime + usage.ru_stime
    return Run(wall, cpu, rss, phase, usage.ru_utime, usage.ru_nvcsw)


def ours(root: Path, url: str, count: int, *args: str) -> Run:
    folder = root / f"ab-{count}-{'-'.join(args) or 'default'}"
    if not folder.exists():
        folder.mkdir(parents=True)
        (folder / "bench_tp.toml").write_text(suite_text(count))
    return run_pytest(folder, *MODEL_ARGS, "--agentbench-base-url", url, *args)


def plain(root: Path, name: str, source: str) -> Run:
    folder = root / name
    if not folder.exists():
        folder.mkdir(parents=True)
        (folder / "test_plain.py").write_text(source)
    return run_pytest(folder)


def best(runs: list[Run]) -> Run:
    return min(runs, key=lambda run: run.wall_s)


def line(figure: str, value: str, target: str) -> None:
    print(f"  {figure:<58}{value:>12}   target {target}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=600, help="serial run size")
    parser.add_argument("--flight-tasks", type=int, default=384, help="saturation run size")
    parser.add_argument("--memory", default="1000,3000", help="two sizes for memory per task")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="small sizes, one round")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # so the servers are stopped
    if args.quick:
        args.tasks, args.flight_tasks, args.memory, args.rounds = 300, 256, "300,1500", 1
    small, large = int(args.tasks) // 10, int(args.tasks)
    mem_small, mem_large = (int(size) for size in args.memory.split(","))
    rounds = args.rounds
    fast, fast_url = start_server()
    slow, slow_url = start_server("--latency-s", str(LATENCY_S))
    serial = ("--agentbench-concurrency", "1")
    with tempfile.TemporaryDirectory(prefix="agentbench-bench-") as tmp:
        root = Path(tmp)
        print(
            f"floor server at {fast_url} (and {slow_url}, {LATENCY_S * 1000:.0f} ms);"
            f" python {sys.version.split()[0]}; {os.cpu_count()} CPU(s); best of {rounds}"
        )
        try:
            runs: dict[str, list[Run]] = {}

            def take(key: str, run: Run) -> None:
                runs.setdefault(key, []).append(run)

            for _ in range(rounds):
                take("start ours", ours(root, fast_url, 1, *serial))
                take("start floor", plain(root, "start", "def test_one():\n    pass\n"))
                for count in (small, large):
                    take(f"ours {count}", ours(root, fast_url, count, *serial))
                    source = FLOOR_TEST.format(url=fast_url, count=count)
                    take(f"floor {count}", plain(root, f"floor{count}", source))
            b = {key: best(value) for key, value in runs.items()}

            def marginal(side: str, what: str) -> float:
                cheapest: list[float] = [
                    min(getattr(run, what) for run in runs[f"{side} {n}"]) for n in (small, large)
                ]
                return (cheapest[1] - cheapest[0]) / (large - small)

            marginal_ours, marginal_floor = marginal("ours", "wall_s"), marginal("floor", "wall_s")
            cpu_ours, cpu_floor = marginal("ours", "cpu_s"), marginal("floor", "cpu_s")
            flights: dict[str, tuple[float, float, float]] = {}
            cpu_at_64 = float("nan")
            setups = [("64", 1, 64, ()), ("128", 1, 128, ()), ("-n 2 x 32", 2, 32, ("-n", "2"))]
            for label, processes, threads, extra in setups:
                flight = processes * threads
                mine, floor = [], []
                for _ in range(rounds):
                    run = ours(
                        root,
                        slow_url,
                        args.flight_tasks,
                        "--agentbench-concurrency",
                        str(threads),
                        *extra,
                    )
                    mine.append(run)
                    floor.append(threaded_floor(slow_url, args.flight_tasks, processes, threads))
                phase = min(run.phase_s for run in mine)
                ideal = args.flight_tasks * LATENCY_S / flight
                flights[label] = (ideal / phase, ideal / min(floor), min(floor) / phase)
                if label == "64":
                    cpu_at_64 = min(run.cpu_s for run in mine)
            mem = {}
            for size in (mem_small, mem_large):
                mem[f"ours {size}"] = min(ours(root, fast_url, size).rss_kib for _ in range(rounds))
                source = (
                    f"import pytest\n\n@pytest.mark.parametrize('i', range({size}))\n"
                    "def test_nothing(i):\n    pass\n"
                )
                mem[f"plain {size}"] = min(
                    plain(root, f"mem{size}", source).rss_kib for _ in range(rounds)
                )
        finally:
            for process in (fast, slow):
                process.terminate()
                process.wait()

    print(
        f"\nserial, zero latency: {small} and {large} tasks; in flight: {args.flight_tasks}"
        f" tasks at {LATENCY_S * 1000:.0f} ms; memory: {mem_small} and {mem_large} tasks\n"
    )
    print(f"  {'figure':<58}{'measured':>12}")
    line(
        "marginal per-task cost ÷ pytest + one streamed httpx request",
        f"{marginal_ours / marginal_floor:.2f}x",
        "<= 1.25x",
    )
    print(
        f"    (ours {marginal_ours * 1000:.2f} ms, floor {marginal_floor * 1000:.2f} ms per task;"
        f" in CPU of the pytest process: ours {cpu_ours * 1000:.2f} ms, floor"
        f" {cpu_floor * 1000:.2f} ms, {cpu_ours / cpu_floor:.2f}x)"
    )
    for label, target in (("64", ">= 0.9"), ("128", ">= 0.8"), ("-n 2 x 32", ">= 0.8")):
        eff, floor_eff, ratio = flights[label]
        name = (
            f"efficiency at {label} in flight ÷ plain threads"
            if label[0] != "-"
            else ("-n 2 x 32 ÷ two plain processes x 32 threads")
        )
        line(name, f"{ratio:.2f}", target)
        print(f"    (ours {eff:.2f} of ideal, floor {floor_eff:.2f})")
    start_ratio = b["start ours"].wall_s / b["start floor"].wall_s
    line(
        "start-up with --agentbench, one task ÷ plain pytest, one test",
        f"{start_ratio:.2f}x",
        "<= 1.3x",
    )
    print(f"    (ours {b['start ours'].wall_s:.2f} s, floor {b['start floor'].wall_s:.2f} s)")
    grow_ours = (mem[f"ours {mem_large}"] - mem[f"ours {mem_small}"]) / (mem_large - mem_small)
    grow_plain = (mem[f"plain {mem_large}"] - mem[f"plain {mem_small}"]) / (mem_large - mem_small)
    line(
        "memory per task above pytest's own per-test growth",
        f"{grow_ours - grow_plain:.2f} KiB",
        "<= 1 KiB",
    )
    print(f"    (ours {grow_ours:.2f} KiB, plain pytest {grow_plain:.2f} KiB per test)")
    cpu_task = (cpu_at_64 - b["start ours"].cpu_s) / args.flight_tasks
    line("CPU per task at saturation (64 in flight)", f"{cpu_task * 1000:.2f} ms", "<= 3 ms")


if __name__ == "__main__":
    main()
