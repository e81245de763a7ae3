"""Threads or one event loop? The decision of runner/pool.py, by measurement.

Run: .venv/bin/python bench/concurrency.py [--requests 512] [--flights 64,128] [--rounds 3]

Against ``bench/floor_server.py`` (its own process, 200 ms before each streamed reply),
each design makes ``--requests`` streamed Chat Completions requests with N in flight, in
a fresh Python process of its own (so its CPU is its own and it has the GIL to itself):

- ``floor``: plain threads, one ``httpx.Client`` each, reading the lines and nothing else
  (the floor of bench/throughput.py);
- ``threads``: our design, N threads, one ``httpx.Client`` per thread (as models/http.py
  keeps them), each reply read by our SSE parser and every event's JSON decoded;
- ``asyncio``: one event loop, N worker tasks, each with its own ``httpx.AsyncClient``
  (the threads design on a loop), the same SSE parser and decoding;
- ``asyncio-pool``: one event loop, one ``httpx.AsyncClient`` pooling N connections, one
  task per request bounded by an ``asyncio.Semaphore`` (the usual asyncio way);
- ``client``: N threads calling our real ``OpenAIChatClient.generate`` (what a rollout
  calls: body, deadline watchdog, slots, the Generation and its trajectory entry).

Each child imports everything, then waits for a line on stdin; the timing runs from that
line to its last reply: wall (first request to last reply) and CPU (``process_time``, all
threads). Efficiency is the ideal (requests x 0.2 s / N) over the wall. The designs
alternate within a round; each figure is the best of ``--rounds``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

LATENCY_S = 0.2
HERE = Path(__file__).resolve().parent
DESIGNS = ("floor", "threads", "asyncio", "asyncio-pool", "client")
BODY = {"model": "x", "messages": [{"role": "user", "content": "q"}], "stream": True}


def read_events(parser: object, chunk: bytes, texts: list[str]) -> None:
    """What a client does with a chunk: SSE events out, each event's JSON decoded."""
    from pytest_agentbench.models.event_json import parse_json
    from pytest_agentbench.models.sse import SSEParser

    assert isinstance(parser, SSEParser)
    for _, data, _ in parser.feed_fields(chunk):
        if data != "[DONE]":
            chunk_json: Any = parse_json(data)  # the bench server's own chunks: shape known
            for choice in chunk_json["choices"]:
                texts.append(choice["delta"].get("content") or "")


def run_threads(url: str, count: int, flight: int, design: str) -> None:
    import threading
    from concurrent.futures import ThreadPoolExecutor

    import httpx

    from pytest_agentbench.models.base import ModelRequest, ModelSpec
    from pytest_agentbench.models.openai_chat import OpenAIChatClient
    from pytest_agentbench.models.sse import SSEParser

    local = threading.local()
    tls = httpx.create_ssl_context()  # once, as the floor of bench/throughput.py does
    ours = OpenAIChatClient(ModelSpec("openai-compat", "x"), url, trust_env=False)
    request = ModelRequest(messages=({"role": "user", "content": "q"},), timeout_s=60.0)

    def http() -> httpx.Client:
        client = getattr(local, "client", None)
        if client is None:
            client = local.client = httpx.Client(trust_env=False, timeout=60, verify=tls)
        return client

    def floor(_: int) -> None:
        with http().stream("POST", url + "/chat/completions", json=BODY) as response:
            for _line in response.iter_lines():
                pass

    def parsed(_: int) -> None:
        texts: list[str] = []
        parser = SSEParser()
        with http().stream("POST", url + "/chat/completions", json=BODY) as response:
            for chunk in response.iter_bytes():
                read_events(parser, chunk, texts)
        assert "".join(texts) == "a"

    def client(_: int) -> None:
        assert ours.generate(request).text == "a"

    one = {"floor": floor, "threads": parsed, "client": client}[design]
    sys.stdin.readline()
    wall, cpu = time.perf_counter(), time.process_time()
    with ThreadPoolExecutor(flight) as pool:
        list(pool.map(one, range(count)))
    print(time.perf_counter() - wall, time.process_time() - cpu)


def run_asyncio(url: str, count: int, flight: int, lanes: bool) -> None:
    """One event loop. ``lanes``: N worker tasks, each with its own ``AsyncClient`` of one
    connection (the threads design on a loop); else one ``AsyncClient`` pooling N
    connections for ``count`` tasks bounded by a semaphore (the usual asyncio way)."""
    import asyncio

    import httpx

    from pytest_agentbench.models.sse import SSEParser

    tls = httpx.create_ssl_context()

    async def one(client: httpx.AsyncClient) -> None:
        texts: list[str] = []
        parser = SSEParser()
        async with client.stream("POST", url + "/chat/completions", json=BODY) as response:
            async for chunk in response.aiter_bytes():
                read_events(parser, chunk, texts)
        assert "".join(texts) == "a"

    async def pooled() -> None:
        limits = httpx.Limits(max_connections=flight, max_keepalive_connections=flight)
        async with httpx.AsyncClient(
            trust_env=False, timeout=60, limits=limits, verify=tls
        ) as client:
            gate = asyncio.Semaphore(flight)

            async def gated() -> None:
                async with gate:
                    await one(client)

            async with asyncio.TaskGroup() as group:
                for _ in range(count):
                    group.create_task(gated())

    async def laned() -> None:
        left = iter(range(count))

        async def lane() -> None:
            async with httpx.AsyncClient(trust_env=False, timeout=60, verify=tls) as client:
                for _ in left:
                    await one(client)

        async with asyncio.TaskGroup() as group:
            for _ in range(flight):
                group.create_task(lane())

    async def main() -> None:
        await asyncio.to_thread(sys.stdin.readline)
        wall, cpu = time.perf_counter(), time.process_time()
        await (laned() if lanes else pooled())
        print(time.perf_counter() - wall, time.process_time() - cpu)

    asyncio.run(main())


def measure(design: str, url: str, count: int, flight: int) -> tuple[float, float]:
    """(wall s, CPU s) of one design's run in a fresh process, start-up excluded."""
    child = subprocess.Popen(
        [sys.executable, __file__, "--child", design, url, str(count), str(flight)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    time.sleep(1.0)  # let it import
    out, _ = child.communicate("go\n")
    if child.returncode != 0:
        raise SystemExit(f"{design} at {flight} in flight failed (exit {child.returncode})")
    wall, cpu = map(float, out.split())
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=512)
    parser.add_argument("--flights", default="64,128", help="requests in flight, comma-separated")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        design, url, count, flight = args.child
        if design.startswith("asyncio"):
            run_asyncio(url, int(count), int(flight), lanes=design == "asyncio")
        else:
            run_threads(url, int(count), int(flight), design)
        return
    server = subprocess.Popen(
        [sys.executable, str(HERE / "floor_server.py"), "--latency-s", str(LATENCY_S)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert server.stdout is not None
    url = server.stdout.readline().rsplit(" ", 1)[-1].strip()
    load = os.getloadavg()[0]
    print(
        f"{args.requests} streamed requests at {LATENCY_S * 1000:.0f} ms; best of {args.rounds};"
        f" {os.cpu_count()} CPU(s), load {load:.1f} at start"
    )
    try:
        for flight in (int(n) for n in args.flights.split(",")):
            best: dict[str, tuple[float, float]] = {}
            for _ in range(args.rounds):
                for design in DESIGNS:
                    wall, cpu = measure(design, url, args.requests, flight)
                    old = best.get(design, (float("inf"), float("inf")))
                    best[design] = (min(old[0], wall), min(old[1], cpu))
            ideal = args.requests * LATENCY_S / flight
            floor_wall = best["floor"][0]
            print(f"\n{flight} in flight (ideal {ideal:.2f} s)")
            print(f"  {'design':<13}{'wall s':>8}{'of ideal':>10}{'÷ floor':>9}{'CPU ms/req':>12}")
            for design in DESIGNS:
                wall, cpu = best[design]
                print(
                    f"  {design:<13}{wall:>8.2f}{ideal / wall:>10.2f}{floor_wall / wall:>9.2f}"
                    f"{cpu * 1000 / args.requests:>12.2f}"
                )
    finally:
        server.terminate()
        server.wait()
    print(f"\nload {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
