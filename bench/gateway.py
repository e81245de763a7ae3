"""Benchmark the gateway agents call through: what it adds per streamed request, and how
64 agents' requests in flight fare through it against the same requests sent directly.

Run: .venv/bin/python bench/gateway.py [--agents 64] [--requests 6] [--tokens 40]
     [--rate 200] [--latency-s 0.2] [--serial 300]

Three processes: the model is bench/floor_server.py (standard library only, independent
of pytest-agentbench: not our scripted provider); the agents are a load process (this
script with ``--load``: one thread and one keep-alive connection per agent, each sending
its requests one after another and reading every byte of each streamed reply); the
gateway runs in this process, relaying to the floor server through the plugin's own
Chat Completions client with retries, exactly as a run does, so ``time.process_time``
here is the gateway's CPU alone.

In one run, alternating: the load process sends the same requests (a) directly to the
floor server and (b) through the gateway, each agent on its own route with its own key.
``efficiency`` is direct wall time / gateway wall time (goal: at least 0.9). The serial
section sends ``--serial`` requests one at a time through the gateway and reports the
gateway's CPU per streamed request, next to the same requests made by the plugin's client
alone in this process (what a built-in rollout pays): the difference is what the gateway
adds.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

START_TIMEOUT_S = 30


def load(targets: list[tuple[str, str]], requests: int) -> float:
    """Each (base URL, key) is one agent: ``requests`` streamed requests in a row, every
    byte read. The wall time for all of them, in seconds."""
    body = {
        "model": "m",
        "messages": [{"role": "user", "content": "go"}],
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    errors: list[str] = []
    ready = threading.Barrier(len(targets) + 1)

    def agent(base: str, key: str) -> None:
        with httpx.Client(timeout=120, headers={"authorization": f"Bearer {key}"}) as http:
            ready.wait()
            try:
                for _ in range(requests):
                    with http.stream("POST", f"{base}/chat/completions", json=body) as reply:
                        data = b"".join(reply.iter_bytes())
                        if reply.status_code != 200 or b"[DONE]" not in data:
                            errors.append(f"{reply.status_code}: {data[:200]!r}")
            except httpx.HTTPError as exc:
                errors.append(f"{type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=agent, args=target) for target in targets]
    for thread in threads:
        thread.start()
    ready.wait()
    start = time.perf_counter()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - start
    if errors:
        raise SystemExit(f"{len(errors)} failed requests, first: {errors[0]}")
    return wall


def _load_main() -> None:
    spec = json.loads(sys.stdin.read())
    targets = [(t[0], t[1]) for t in spec["targets"]]
    print(json.dumps({"wall_s": load(targets, spec["requests"])}), flush=True)


def _run_load(targets: list[tuple[str, str]], requests: int) -> float:
    """The load process's wall time for ``targets``."""
    done = subprocess.run(
        [sys.executable, __file__, "--load"],
        input=json.dumps({"targets": targets, "requests": requests}),
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"the load process failed: {done.stderr.strip()[-2000:]}")
    wall: float = json.loads(done.stdout)["wall_s"]
    return wall


def start_floor(latency_s: float, tokens: int, rate: float) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        [
            sys.executable,
            str(ROOT / "bench" / "floor_server.py"),
            "--latency-s",
            str(latency_s),
            "--tokens",
            str(tokens),
            "--rate",
            str(rate),
            "--reply",
            "word ",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    if "floor server at " not in line:
        process.kill()
        raise SystemExit(f"the floor server did not start: {line.strip()}")
    return process, line.rsplit("floor server at ", 1)[1].strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agents", type=int, default=64)
    parser.add_argument("--requests", type=int, default=6, help="per agent")
    parser.add_argument("--tokens", type=int, default=40, help="deltas per reply")
    parser.add_argument("--rate", type=float, default=200.0, help="deltas per second")
    parser.add_argument("--latency-s", type=float, default=0.2)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--serial", type=int, default=300)
    parser.add_argument("--load", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.load:
        _load_main()
        return

    from pytest_agentbench.agents.gateway import Gateway
    from pytest_agentbench.models.base import ModelRequest, ModelSpec
    from pytest_agentbench.models.openai_chat import OpenAIChatClient
    from pytest_agentbench.models.retry import RetryingClient

    floor, floor_url = start_floor(args.latency_s, args.tokens, args.rate)
    quick, quick_url = start_floor(0.0, args.tokens, 0.0)
    upstream = RetryingClient(
        OpenAIChatClient(ModelSpec("openai-compat", "x"), floor_url, "floor-key", trust_env=False)
    )
    gateway = Gateway()
    try:
        routes = [
            gateway.open_route(f"agent-{i}", "floor", lambda protocol: upstream)
            for i in range(args.agents)
        ]
        for route in routes:
            route.begin_attempt(0, time.monotonic() + 3600, None)
        through = [(f"{r.base_url}/v1", r.key) for r in routes]
        direct = [(floor_url, "floor-key")] * args.agents
        _run_load(direct[:4], 1)  # warm both paths
        _run_load(through[:4], 1)
        best_direct = best_gateway = float("inf")
        for _ in range(args.rounds):
            best_direct = min(best_direct, _run_load(direct, args.requests))
            best_gateway = min(best_gateway, _run_load(through, args.requests))
        total = args.agents * args.requests
        print(
            f"{args.agents} agents in flight, {args.requests} streamed requests each "
            f"({args.tokens} deltas, {args.latency_s:g} s to first byte, {args.rate:g} deltas/s)"
        )
        print(
            f"  direct to the floor server   {best_direct:7.3f} s  {total / best_direct:7.1f} req/s"
        )
        rate = total / best_gateway
        print(f"  through the gateway          {best_gateway:7.3f} s  {rate:7.1f} req/s")
        print(f"  efficiency (direct / gateway)  {best_direct / best_gateway:5.3f}   (goal >= 0.9)")

        if args.serial:
            alone = RetryingClient(
                OpenAIChatClient(
                    ModelSpec("openai-compat", "x"), quick_url, "floor-key", trust_env=False
                )
            )
            request = ModelRequest(messages=({"role": "user", "content": "go"},))
            for _ in range(5):
                alone.generate(request)
            cpu = time.process_time()
            for _ in range(args.serial):
                alone.generate(request)
            own = (time.process_time() - cpu) / args.serial
            alone.close()
            serial = gateway.open_route(
                "serial",
                "floor",
                lambda protocol: RetryingClient(
                    OpenAIChatClient(
                        ModelSpec("openai-compat", "x"), quick_url, "floor-key", trust_env=False
                    )
                ),
            )
            serial.begin_attempt(0, time.monotonic() + 3600, None)
            one = [(f"{serial.base_url}/v1", serial.key)]
            _run_load(one, 5)
            cpu = time.process_time()
            wall = _run_load(one, args.serial)
            used = time.process_time() - cpu
            print(
                f"serial: {args.serial} streamed requests through the gateway, one at a time "
                "(no latency upstream)"
            )
            per = used / args.serial
            print(
                f"  gateway CPU per streamed request  {per * 1000:6.2f} ms  "
                f"(wall per request {wall / args.serial * 1000:6.2f} ms)"
            )
            print(f"  the plugin's client alone, same request  {own * 1000:6.2f} ms")
            print(f"  added by the gateway (server, relay, record)  {(per - own) * 1000:6.2f} ms")
        records = sum(len(r.records) for r in routes)
        calls = sum(r.calls for r in routes)
        print(f"  calls recorded by the gateway  {records} of {calls}")
    finally:
        gateway.close()
        upstream.close()
        for process in (floor, quick):
            process.terminate()
            process.wait(timeout=START_TIMEOUT_S)


if __name__ == "__main__":
    main()
