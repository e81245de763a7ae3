"""Benchmark the model clients: parse throughput and CPU cost of streaming a long reply,
next to a raw httpx read of the same bytes from the same endpoint, in the same run.

Run: .venv/bin/python bench/clients.py [--mb 10] [--rounds 3] [--requests 2000] [--profile]

The scripted provider runs in a subprocess (``python -m pytest_agentbench.scripted``), so
``time.process_time`` here is the client's CPU alone. For each protocol the same request
body is streamed by our client (SSE parsing, JSON decoding, event handling, usage) and by
a bare ``httpx`` stream that only iterates the bytes; the two alternate, and the best of
``--rounds`` is kept for each so a busy moment hits both alike. The target is that our
client costs at most 1.5x the raw read. Where the difference goes: our client's reading
(SSE, slots, decoding, event handling) replayed alone over the captured chunks, and the
rest; for scale, SSE framing alone and decoding every event whole (what a client without
slots would pay). ``--profile`` adds a cProfile of our client (top functions by own CPU
time).

A second section measures the fixed cost of a request: ``--requests`` tiny streamed replies
(one short delta) per protocol, through our client and through a bare ``httpx`` stream of
the same body that reads every line, alternating in blocks; CPU per request is the best
block's. ``--mb 0`` or ``--requests 0`` skips a section.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx

from pytest_agentbench.models.anthropic import AnthropicClient
from pytest_agentbench.models.base import ModelClient, ModelRequest, ModelSpec
from pytest_agentbench.models.event_json import parse_json
from pytest_agentbench.models.http import ignore_events
from pytest_agentbench.models.openai_chat import OpenAIChatClient
from pytest_agentbench.models.openai_responses import OpenAIResponsesClient
from pytest_agentbench.models.sse import SSEParser

CHUNK_SIZE = 64
VOCABULARY = (
    "the", "model", "answers", "each", "question", "with", "care", "and", "a", "short",
    "reason", "before", "its", "final", "number", "while", "verifier", "checks", "café",
    "naïve", "résumé", "—", "42", "3.14", "tokens", "stream", "slowly",
)  # fmt: skip
TARGET_RATIO = 1.5
START_TIMEOUT_S = 30.0
REQUEST = ModelRequest(messages=({"role": "user", "content": "Tell me everything."},), stream=True)
#: The tiny reply of the per-request section, and its request (a deadline arms the watchdog).
TINY_KEY = "tiny"
TINY_TEXT = "a"
TINY_REQUEST = ModelRequest(
    messages=({"role": "user", "content": "Say a."},), stream=True, timeout_s=60.0
)
TINY_BLOCK = 100

#: Protocol name -> a client of it for the scripted server's base URL (``.../v1``).
PROTOCOLS: dict[str, Callable[[str], ModelClient]] = {
    "chat completions": lambda url: OpenAIChatClient(
        ModelSpec("openai", "bench"), url, trust_env=False
    ),
    "responses": lambda url: OpenAIResponsesClient(
        ModelSpec("openai-responses", "bench"), url, trust_env=False
    ),
    "anthropic messages": lambda url: AnthropicClient(
        ModelSpec("anthropic", "bench"), url, trust_env=False
    ),
}


@dataclass(frozen=True)
class Measure:
    """One streamed reply: client CPU seconds, wall seconds, bytes on the wire."""

    cpu_s: float
    wall_s: float
    wire_bytes: int


def prose(chars: int, seed: int = 7) -> str:
    """Varied English-like text with some non-ASCII, so no delta is trivially alike."""
    rng = random.Random(seed)
    out: list[str] = []
    size = 0
    while size < chars:
        sentence = " ".join(rng.choice(VOCABULARY) for _ in range(rng.randint(6, 18)))
        piece = sentence.capitalize() + (".\n" if rng.random() < 0.2 else ". ")
        out.append(piece)
        size += len(piece)
    return "".join(out)[:chars]


def start_server(script: Path) -> tuple[subprocess.Popen[str], str]:
    """Start the standalone scripted provider; return the process and its base URL."""
    process = subprocess.Popen(
        [sys.executable, "-m", "pytest_agentbench.scripted", "--script", str(script)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    if "listening on " not in line:
        process.kill()
        _, err = process.communicate(timeout=START_TIMEOUT_S)
        raise SystemExit(f"the scripted provider did not start: {line.strip()} {err.strip()}")
    return process, line.rsplit("listening on ", 1)[1].strip()


def ours(client: ModelClient, expected_text: str) -> Measure:
    """Stream the reply with our client; the text must arrive whole."""
    wall, cpu = time.perf_counter(), time.process_time()
    generation = client.generate(REQUEST)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    if generation.text != expected_text or generation.usage.output is None:
        raise SystemExit(
            f"{client.spec.label}: the streamed reply differs from the script "
            f"({len(generation.text)} of {len(expected_text)} characters, "
            f"usage {generation.usage})"
        )
    return Measure(cpu, wall, 0)


def raw(http: httpx.Client, client: ModelClient) -> Measure:
    """Read the same reply from the same endpoint as bytes only: no SSE, no JSON."""
    body = client.build_body(REQUEST)  # type: ignore[attr-defined]
    endpoint = client.endpoint  # type: ignore[attr-defined]
    wall, cpu = time.perf_counter(), time.process_time()
    received = 0
    with http.stream("POST", endpoint, json=body) as response:
        response.raise_for_status()
        for chunk in response.iter_bytes():
            received += len(chunk)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    return Measure(cpu, wall, received)


def capture(http: httpx.Client, client: ModelClient) -> list[bytes]:
    """The reply's bytes as httpx hands them over, chunk by chunk (untimed)."""
    body = client.build_body(REQUEST)  # type: ignore[attr-defined]
    with http.stream("POST", client.endpoint, json=body) as response:  # type: ignore[attr-defined]
        return list(response.iter_bytes())


@dataclass(frozen=True)
class Stages:
    """CPU seconds of our client's reading alone, replayed over captured chunks (no
    network), and of two stages alone: SSE framing, and decoding every event whole."""

    events: int
    client_s: float
    sse_s: float
    json_s: float


class Replay:
    """Captured chunks handed over as a response would hand them."""

    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks

    def iter_bytes(self) -> Iterator[bytes]:
        return iter(self.chunks)


def stages(client: ModelClient, chunks: list[bytes], rounds: int) -> Stages:
    """Time the replayed reading and the two stages, best of ``rounds`` each."""
    client_s = sse_s = json_s = float("inf")
    events: list[str] = []
    for _ in range(rounds):
        received = client._new_received()  # type: ignore[attr-defined]
        started = time.process_time()
        client._read_stream(Replay(chunks), received, ignore_events)  # type: ignore[attr-defined]
        client_s = min(client_s, time.process_time() - started)
        parser = SSEParser()
        started = time.process_time()
        events = [data for chunk in chunks for _, data, _ in parser.feed_fields(chunk)]
        sse_s = min(sse_s, time.process_time() - started)
        started = time.process_time()
        for data in events:
            if data != "[DONE]":
                parse_json(data)
        json_s = min(json_s, time.process_time() - started)
    return Stages(len(events), client_s, sse_s, json_s)


def profile(client: ModelClient, top: int = 12) -> str:
    """cProfile (CPU time) of one streamed reply: the functions with the most own time."""
    profiler = cProfile.Profile(time.process_time)
    profiler.enable()
    client.generate(REQUEST)
    profiler.disable()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(top)
    return out.getvalue()


def bench(url: str, text: str, rounds: int, with_profile: bool) -> list[str]:
    """Measure every protocol; return the lines of the report."""
    mb = 1e6
    lines = [
        f"  {'protocol':20} {'wire MB':>8} {'ours CPU s':>11} {'raw CPU s':>10} "
        f"{'ours MB/s':>10} {'raw MB/s':>9} {'ours/raw':>9}",
    ]
    profiles: list[str] = []
    with httpx.Client(trust_env=False) as http:
        for name, make in PROTOCOLS.items():
            client = make(url)
            try:
                ours(client, text)  # warm up: connection, imports, caches
                mine: list[Measure] = []
                bare: list[Measure] = []
                for _ in range(rounds):
                    mine.append(ours(client, text))
                    bare.append(raw(http, client))
                parts = stages(client, capture(http, client), rounds)
                if with_profile:
                    profiles.append(
                        f"--- {name}: our client, by own CPU time ---\n{profile(client)}"
                    )
            finally:
                client.close()
            ours_cpu = min(m.cpu_s for m in mine)
            raw_cpu = min(m.cpu_s for m in bare)
            wire = max(m.wire_bytes for m in bare)
            ratio = ours_cpu / raw_cpu
            verdict = "ok" if ratio <= TARGET_RATIO else f"above {TARGET_RATIO}x"
            rest = ours_cpu - raw_cpu - parts.client_s
            per_event = 1e6 / parts.events
            lines += [
                f"  {name:20} {wire / mb:8.1f} {ours_cpu:11.3f} {raw_cpu:10.3f} "
                f"{wire / mb / ours_cpu:10.1f} {wire / mb / raw_cpu:9.1f} "
                f"{ratio:8.2f}x  {verdict}",
                f"  {'':20} wall: ours {min(m.wall_s for m in mine):.2f} s, "
                f"raw {min(m.wall_s for m in bare):.2f} s; {parts.events} events; "
                f"raw {raw_cpu * per_event:.1f} us/event",
                f"  {'':20} ours - raw = {ours_cpu - raw_cpu:.3f} s: our reading replayed "
                f"alone {parts.client_s:.3f} s ({parts.client_s * per_event:.1f} us/event), "
                f"the rest {rest:.3f} s ({rest * per_event:.1f} us/event: the same work "
                f"between network reads, request setup)",
                f"  {'':20} for scale, alone: SSE framing {parts.sse_s:.3f} s, decoding "
                f"every event whole {parts.json_s:.3f} s",
            ]
    return lines + profiles


def tiny_ours(client: ModelClient, count: int) -> float:
    """CPU seconds of ``count`` tiny streamed requests through our client."""
    started = time.process_time()
    for _ in range(count):
        generation = client.generate(TINY_REQUEST)
        if generation.text != TINY_TEXT:
            raise SystemExit(f"{client.spec.label}: the tiny reply was {generation.text!r}")
    return time.process_time() - started


def tiny_raw(http: httpx.Client, client: ModelClient, count: int) -> float:
    """CPU seconds of ``count`` bare httpx streams of the same body, every line read."""
    body = client.build_body(TINY_REQUEST)  # type: ignore[attr-defined]
    endpoint = client.endpoint  # type: ignore[attr-defined]
    started = time.process_time()
    for _ in range(count):
        with http.stream("POST", endpoint, json=body) as response:
            response.raise_for_status()
            for _line in response.iter_lines():
                pass
    return time.process_time() - started


def bench_tiny(url: str, requests: int) -> list[str]:
    """The fixed cost of a request, per protocol; return the lines of the report."""
    lines = [
        f"  {'protocol':20} {'requests':>8} {'ours us/req':>12} {'raw us/req':>11} {'ours/raw':>9}"
    ]
    blocks = max(1, requests // TINY_BLOCK)
    with httpx.Client(trust_env=False) as http:
        for name, make in PROTOCOLS.items():
            client = make(url)
            # the model name picks the script: the tiny reply instead of the default one
            client.spec = ModelSpec(client.spec.provider, TINY_KEY)
            try:
                tiny_ours(client, TINY_BLOCK)  # warm up: connection, imports, caches
                tiny_raw(http, client, TINY_BLOCK)
                mine = bare = float("inf")
                for _ in range(blocks):
                    mine = min(mine, tiny_ours(client, TINY_BLOCK))
                    bare = min(bare, tiny_raw(http, client, TINY_BLOCK))
            finally:
                client.close()
            ours_us, raw_us = mine / TINY_BLOCK * 1e6, bare / TINY_BLOCK * 1e6
            lines.append(
                f"  {name:20} {blocks * TINY_BLOCK:8d} {ours_us:12.0f} {raw_us:11.0f} "
                f"{ours_us / raw_us:8.2f}x"
            )
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=float, default=10.0, help="reply text size in MB")
    parser.add_argument("--rounds", type=int, default=3, help="measured rounds per protocol")
    parser.add_argument("--profile", action="store_true", help="cProfile our clients too")
    parser.add_argument(
        "--requests", type=int, default=2000, help="tiny streamed requests per protocol"
    )
    args = parser.parse_args()
    text = prose(int(args.mb * 1_000_000))
    with tempfile.TemporaryDirectory(prefix="agentbench-bench-") as scratch:
        script = Path(scratch) / "replies.json"
        script.write_text(
            json.dumps(
                {
                    "default": [{"text": text, "chunk_size": CHUNK_SIZE}],
                    "scripts": {TINY_KEY: [TINY_TEXT]},
                }
            )
        )
        process, url = start_server(script)
        try:
            if args.mb > 0:
                print(
                    f"Client streaming: {len(text.encode()) / 1e6:.1f} MB of text in deltas "
                    f"of {CHUNK_SIZE} characters, scripted provider in a subprocess at {url}; "
                    f"client CPU (process_time), best of {args.rounds}; target ours/raw <= "
                    f"{TARGET_RATIO}x"
                )
                for line in bench(url, text, args.rounds, args.profile):
                    print(line)
            if args.requests > 0:
                print(
                    f"Per request: tiny streamed replies ({TINY_TEXT!r}), client CPU "
                    f"(process_time, all threads) per request, best block of {TINY_BLOCK}"
                )
                for line in bench_tiny(url, args.requests):
                    print(line)
        finally:
            process.terminate()
            process.wait(timeout=START_TIMEOUT_S)
    return 0


if __name__ == "__main__":
    sys.exit(main())
