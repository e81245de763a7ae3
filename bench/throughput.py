"""Benchmark scale: per-task overhead, saturation, memory, and xdist, measured in one run.

Run: .venv/bin/python bench/throughput.py [--quick]

Every run is a real ``pytest --agentbench`` subprocess over a suite generated in a temp
folder, against one scripted server in its own process (so the server never competes
with the run for the GIL). Prints measurements and ratios; asserts nothing.

1. overhead: N tasks at zero latency, ``--agentbench-concurrency 1``, against the floor:
   a plain pytest file whose N tests each make one streamed chat request to the same
   server with httpx. Target: agentbench per task <= 2x the floor.
2. saturation: 400 tasks, 200 ms per request (the reply is streamed after ``delay_s``),
   at concurrency 1, 8, 32, 64, 128, and ``-n 2`` x 32. Efficiency = ideal wall
   (N x 0.2 s / requests in flight) / measured wall. "run phase" measures from the first
   rollout's start to the last one's end (from ctrf.json); "process" includes pytest's
   start-up and collection. Target: >= 0.9 at 64 and at -n 2 x 32.
3. memory: peak RSS (``ru_maxrss`` of the pytest child, from wait4) at 1 000 and 10 000
   tasks. Target: 10k <= 1.5x 1k.
4. xdist: the overhead suite at zero latency with ``-n 2`` against serial.
5. the shared limit: what one acquire + release costs, in one process and from another
   process through the controller's service (the xdist path).

Wall times on a busy machine are noisy; CPU seconds of the pytest process (user + sys,
from wait4) are printed beside them, as they are disturbed less.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

LATENCY_S = 0.2


@dataclass(frozen=True)
class Run:
    wall_s: float
    cpu_s: float
    rss_mb: float
    phase_s: float | None
    code: int


def suite_text(count: int, reply: str) -> str:
    tasks = "".join(
        f'[[task]]\nid = "t{i}"\ninput = "q"\ntarget = "a"\nscripted = [{reply}]\n'
        for i in range(count)
    )
    return '[suite]\nname = "tp"\nverifier = { kind = "exact" }\n' + tasks


FLOOR_TEST = """
import httpx
import pytest

URL = {url!r}
CLIENT = httpx.Client(trust_env=False, timeout=60)
BODY = {{"model": "m", "messages": [{{"role": "user", "content": "q"}}], "stream": True}}


@pytest.mark.parametrize("i", range({count}))
def test_request(i):
    with CLIENT.stream("POST", URL + "/chat/completions", json=BODY) as response:
        assert response.status_code == 200
        for _ in response.iter_lines():
            pass
"""


FLOOR_THREADS = """
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import httpx

url, count, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
tls = httpx.create_ssl_context()
local = threading.local()
body = {"model": "m", "messages": [{"role": "user", "content": "q"}], "stream": True}


def one(_):
    # a client per thread: one shared pool is slower from ~64 threads on (httpcore
    # polls every idle connection under the pool's lock whenever it hands one out)
    client = getattr(local, "client", None)
    if client is None:
        client = local.client = httpx.Client(trust_env=False, timeout=60, verify=tls)
    with client.stream("POST", url + "/chat/completions", json=body) as response:
        for _ in response.iter_lines():
            pass


with ThreadPoolExecutor(threads) as pool:
    list(pool.map(one, range(count)))
"""


def threaded_floor(url: str, count: int, processes: int, threads: int) -> float:
    """Wall seconds for ``count`` streamed requests from ``processes`` plain Python
    processes of ``threads`` httpx threads each: the most any threaded client in Python
    gets out of this machine at that many requests in flight (no pytest, no harness)."""
    started = time.perf_counter()
    children = [
        subprocess.Popen(
            [sys.executable, "-c", FLOOR_THREADS, url, str(count // processes), str(threads)]
        )
        for _ in range(processes)
    ]
    for child in children:
        child.wait()
    return time.perf_counter() - started


def start_server(folder: Path, default: str = '"a"') -> tuple[subprocess.Popen[str], str]:
    """A scripted server in its own process; ``default`` is the reply to any request."""
    script = folder / f"default-{len(list(folder.glob('default-*')))}.toml"
    script.write_text(f"default = [{default}]\n")
    server = subprocess.Popen(
        [sys.executable, "-m", "pytest_agentbench.scripted", "--script", str(script)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert server.stdout is not None
    line = server.stdout.readline()
    return server, line.rsplit(" ", 1)[-1].strip()


def run_pytest(folder: Path, *args: str) -> Run:
    """One pytest subprocess in ``folder``; its wall time and its own peak RSS."""
    out = folder / "agentbench-results"
    log = open(folder / "pytest.log", "w")  # noqa: SIM115 - closed below
    started = time.perf_counter()
    child = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
        cwd=folder,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - started
    log.close()
    child.returncode = os.waitstatus_to_exitcode(status)
    phase = None
    report = out / "latest" / "ctrf.json"
    if "--agentbench" in args and report.exists():
        tests = json.loads(report.read_text())["results"]["tests"]
        spans = [(t["start"], t["stop"]) for t in tests if "start" in t]
        if spans:
            phase = (max(s for _, s in spans) - min(s for s, _ in spans)) / 1000
    # ru_maxrss is in KiB on Linux, bytes on macOS
    rss = usage.ru_maxrss / (1024 * 1024 if sys.platform == "darwin" else 1024)
    return Run(wall, usage.ru_utime + usage.ru_stime, rss, phase, child.returncode)


def agentbench(folder: Path, url: str, count: int, reply: str, *args: str) -> Run:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"bench_tp{count}.toml").write_text(suite_text(count, reply))
    result = run_pytest(folder, "--agentbench", "--agentbench-base-url", url, *args)
    if result.code not in (0,):
        tail = (folder / "pytest.log").read_text()[-2000:]
        print(f"  (pytest exited {result.code} in {folder}:\n{tail})")
    return result


def overhead(root: Path, url: str, count: int) -> None:
    print(f"1. overhead: {count} tasks, zero latency, serial (--agentbench-concurrency 1)")
    floor_dir = root / "floor"
    floor_dir.mkdir()
    (floor_dir / "test_floor.py").write_text(FLOOR_TEST.format(url=url, count=count))
    floor = run_pytest(floor_dir)
    ours = agentbench(root / "overhead", url, count, '"a"', "--agentbench-concurrency", "1")
    per_floor, per_ours = floor.wall_s / count * 1000, ours.wall_s / count * 1000
    cpu_floor, cpu_ours = floor.cpu_s / count * 1000, ours.cpu_s / count * 1000
    print("   per test or task         wall ms   cpu ms")
    print(f"   floor (pytest + httpx)  {per_floor:8.2f} {cpu_floor:8.2f}")
    print(f"   agentbench              {per_ours:8.2f} {cpu_ours:8.2f}")
    print(
        f"   ratio {per_ours / per_floor:.2f}x wall, {cpu_ours / cpu_floor:.2f}x cpu"
        "  (target <= 2x)"
    )


def saturation(root: Path, url: str, slow_url: str, count: int, levels: list[int]) -> None:
    reply = f'{{ text = "a", delay_s = {LATENCY_S} }}'
    print(f"2. saturation: {count} tasks, {LATENCY_S * 1000:.0f} ms per request")
    print(
        "   setup           in flight  ideal s  run phase s  eff   process s  eff"
        "   floor s  eff  eff/floor"
    )
    runs: list[tuple[str, int, int, tuple[str, ...]]] = [
        (f"concurrency {c}", c, 1, ("--agentbench-concurrency", str(c))) for c in levels
    ]
    runs.append(("-n 2 x 32", 64, 2, ("-n", "2", "--agentbench-concurrency", "32")))
    for index, (label, flight, processes, args) in enumerate(runs):
        result = agentbench(root / f"sat{index}", url, count, reply, *args)
        floor = threaded_floor(slow_url, count, processes, flight // processes)
        ideal = count * LATENCY_S / flight
        phase = result.phase_s or float("nan")
        print(
            f"   {label:<16}{flight:>9}  {ideal:7.2f}  {phase:11.2f}  {ideal / phase:4.2f}"
            f"  {result.wall_s:9.2f}  {ideal / result.wall_s:4.2f}"
            f"  {floor:8.2f}  {ideal / floor:4.2f}  {floor / phase:9.2f}"
        )


def memory(root: Path, url: str, sizes: list[int]) -> None:
    print("3. memory: peak RSS of the pytest process (serial, default concurrency)")
    peaks = []
    for size in sizes:
        result = agentbench(root / f"mem{size}", url, size, '"a"')
        peaks.append(result.rss_mb)
        print(f"   {size:>6} tasks: {result.rss_mb:7.1f} MB  ({result.wall_s:.1f} s)")
    floor_peaks = []
    for size in sizes:
        folder = root / f"memfloor{size}"
        folder.mkdir()
        (folder / "test_many.py").write_text(
            f"import pytest\n\n@pytest.mark.parametrize('i', range({size}))\n"
            "def test_nothing(i):\n    pass\n"
        )
        floor_peaks.append(run_pytest(folder).rss_mb)
    floor_text = " / ".join(f"{peak:.1f}" for peak in floor_peaks)
    print(f"   plain pytest, trivial tests, same sizes: {floor_text} MB")
    print(
        f"   ratio {peaks[-1] / peaks[0]:.2f}x  (target <= 1.5x; plain pytest "
        f"{floor_peaks[-1] / floor_peaks[0]:.2f}x)"
    )


def xdist(root: Path, url: str, count: int) -> None:
    print(f"4. xdist: {count} tasks, zero latency, default concurrency")
    serial = agentbench(root / "serial", url, count, '"a"')
    parallel = agentbench(root / "xdist", url, count, '"a"', "-n", "2")
    print(f"   serial {serial.wall_s:.2f} s (run phase {serial.phase_s or 0:.2f} s)")
    print(f"   -n 2   {parallel.wall_s:.2f} s (run phase {parallel.phase_s or 0:.2f} s)")
    print(f"   speed-up {serial.wall_s / parallel.wall_s:.2f}x on {os.cpu_count()} CPU(s)")


def limit_cost(count: int) -> None:
    from pytest_agentbench.models.ratelimit import SharedLimit
    from pytest_agentbench.models.ratelimit_remote import LimitService, RemoteLimit

    print(f"5. shared limit: {count} acquire + release pairs, one at a time")
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
    print(f"   in one process:              {per_local:7.1f} us per request")
    print(f"   from a worker (loopback TCP): {per_remote:6.1f} us per request")


def main() -> None:
    quick = "--quick" in sys.argv
    with tempfile.TemporaryDirectory(prefix="agentbench-bench-") as tmp:
        root = Path(tmp)
        server, url = start_server(root)
        slow_server, slow_url = start_server(root, f'{{ text = "a", delay_s = {LATENCY_S} }}')
        try:
            print(f"scripted server at {url}; python {sys.version.split()[0]}\n")
            overhead(root, url, 200 if quick else 2000)
            levels = [8, 64] if quick else [1, 8, 32, 64, 128]
            saturation(root, url, slow_url, 80 if quick else 400, levels)
            memory(root, url, [100, 1000] if quick else [1000, 10000])
            xdist(root, url, 200 if quick else 2000)
            limit_cost(2000 if quick else 20000)
        finally:
            for process in (server, slow_server):
                process.terminate()
                process.wait()


if __name__ == "__main__":
    main()
