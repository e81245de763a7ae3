"""Benchmark the loop watch: throughput and scaling, detection quality on the labelled
corpus, and how soon a loop is confirmed after it starts.

Run: .venv/bin/python bench/loops.py

Throughput is CPU time of this process (``time.process_time``), the best of a few runs, so
other work on the machine disturbs it less; text is fed in deltas of 32 characters with a
verdict asked after each, as the rollout does. Everything is measured in this one run.
"""

from __future__ import annotations

import random
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from loop_corpus_support import CASES, counting_loop, prose

from pytest_agentbench.runner.loopwatch import LoopWatch

DELTA = 32
SMALL, LARGE = 100_000, 1_000_000
CHARS_PER_TOKEN = 4
TOKENS_PER_SECOND = 50


def repetitive_code(chars: int) -> str:
    """Code-like text made of a few similar lines in random order: many probe hits, no
    cycle, the costliest kind of text for the watch."""
    rng = random.Random(3)
    lines = [
        "    result = compute(value, index)\n",
        "    if result is None:\n",
        "        continue\n",
        "    total += result\n",
        "    index += 1\n",
    ]
    out: list[str] = []
    size = 0
    while size < chars:
        line = rng.choice(lines)
        out.append(line)
        size += len(line)
    return "".join(out)[:chars]


TEXTS: dict[str, Callable[[int], str]] = {
    "prose (no loop)": lambda n: prose(n, seed=1),
    "sentence loop": lambda n: ("I need to check again. Wait, " * (n // 29 + 1))[:n],
    "counting loop": lambda n: "".join(f"Step {k}: add 1 to get {k + 1}.\n" for k in range(n))[:n],
    "similar code lines": repetitive_code,
}


def cpu_seconds(text: str) -> float:
    watch = LoopWatch()
    started = time.process_time()
    for at in range(0, len(text), DELTA):
        watch.feed(text[at : at + DELTA])
        watch.verdict()
    return time.process_time() - started


def throughput() -> None:
    print(f"Throughput (deltas of {DELTA} chars, CPU time, best of runs)")
    print(f"  {'text':20} {'100 KB MB/s':>12} {'1 MB MB/s':>10} {'1 MB / 100 KB':>14}")
    for name, make in TEXTS.items():
        large = make(LARGE)
        small = large[:SMALL]
        small_s = large_s = float("inf")
        for _ in range(5):  # interleaved, so a busy moment hits both sizes alike
            for _ in range(2):
                small_s = min(small_s, cpu_seconds(small))
            large_s = min(large_s, cpu_seconds(large))
        print(
            f"  {name:20} {SMALL / small_s / 1e6:12.2f} {LARGE / large_s / 1e6:10.2f} "
            f"{large_s / small_s:14.2f}"
        )


def one_delta() -> None:
    """A non-streamed answer reaches the watch as one delta: its cost must stay linear."""
    print("\nOne delta (a non-streamed answer fed at once, CPU time, best of 3)")
    print(f"  {'text':20} {'1 MB s':>8} {'8 MB s':>8} {'8 MB / 1 MB':>12}")
    for name in ("prose (no loop)", "sentence loop"):
        large = TEXTS[name](8 * LARGE)
        times = []
        for text in (large[:LARGE], large):
            best = float("inf")
            for _ in range(3):
                watch = LoopWatch()
                started = time.process_time()
                watch.feed(text)
                best = min(best, time.process_time() - started)
            times.append(best)
        print(f"  {name:20} {times[0]:8.3f} {times[1]:8.3f} {times[1] / times[0]:12.2f}")


def worst_state(text: str, seed: int) -> str:
    watch = LoopWatch()
    rng = random.Random(seed)
    worst = "none"
    at = 0
    while at < len(text):
        size = rng.randint(1, 64)
        watch.feed(text[at : at + size])
        at += size
        state = watch.verdict().state
        if state == "looping":
            return state
        if state == "suspect":
            worst = state
    return worst


def quality() -> None:
    print("\nDetection on the labelled corpus (looping at any point while streaming)")
    tp = fp = fn = tn = suspect_negatives = 0
    misses: list[str] = []
    for case in CASES:
        text = case.make()
        state = worst_state(text, seed=len(text))
        predicted = state == "looping"
        if case.looping and predicted:
            tp += 1
        elif case.looping:
            fn += 1
            misses.append(f"missed loop: {case.name} ({state})")
        elif predicted:
            fp += 1
            misses.append(f"false loop: {case.name}")
        else:
            tn += 1
            suspect_negatives += state == "suspect"
    precision = tp / (tp + fp) if tp + fp else 1.0
    recall = tp / (tp + fn) if tp + fn else 1.0
    print(f"  cases {len(CASES)}: {tp + fn} loops, {fp + tn} legitimate")
    print(f"  precision {precision:.3f}  recall {recall:.3f}  (tp {tp}, fp {fp}, fn {fn}, tn {tn})")
    print(f"  legitimate cases that were at most suspect: {suspect_negatives} of {fp + tn}")
    for line in misses:
        print(f"  {line}")


def detection_delay() -> None:
    print(
        "\nTime to detect (characters after the loop starts until confirmed looping; "
        f"tokens ~ chars/{CHARS_PER_TOKEN}, seconds at {TOKENS_PER_SECOND} tokens/s; the "
        "rollout's kill window comes on top)"
    )
    paragraph = prose(1500, seed=3).rstrip() + "\n\n"
    long_cycle = prose(3000, seed=6).rstrip() + "\n\n"
    scenarios = [
        ("sentence (68 chars)", prose(2000, seed=2), SENTENCE * 200),
        ('"I need to check again. Wait, "', prose(2000, seed=2), WAIT * 200),
        ("counting loop (~28 chars)", "Let me count.\n", counting_loop()),
        ("paragraph (1502 chars)", prose(2000, seed=4), paragraph * 12),
        ("two paragraphs (3002 chars)", prose(2000, seed=7), long_cycle * 12),
        ('"0, " forever', "x = [", "0, " * 10_000),
        ("after 20 KB of prose", prose(20_000, seed=5), SENTENCE * 200),
        ("a log line with numbers (40 chars)", prose(2000, seed=2), LOG_LINE * 200),
        ("the same line in letters", prose(2000, seed=2), LOG_LINE.translate(LETTERS) * 200),
    ]
    print(f"  {'loop':34} {'chars':>7} {'cycles':>7} {'tokens':>7} {'seconds':>8}")
    for name, before, loop in scenarios:
        watch = LoopWatch()
        watch.feed(before)
        detected = None
        for at in range(0, len(loop), DELTA):
            watch.feed(loop[at : at + DELTA])
            verdict = watch.verdict()
            if verdict.state == "looping" and verdict.cycle is not None:
                detected = (watch.chars - len(before), verdict.cycle.period)
                break
        if detected is None:
            print(f"  {name:34} not detected")
            continue
        chars, period = detected
        tokens = chars / CHARS_PER_TOKEN
        print(
            f"  {name:34} {chars:7d} {chars / period:7.1f} {tokens:7.0f} "
            f"{tokens / TOKENS_PER_SECOND:8.1f}"
        )


SENTENCE = "The answer is 42 because the two halves add up to the whole amount. "
WAIT = "I need to check again. Wait, "
LOG_LINE = "2024-01-05 12:00:01 retrying request 17\n"
LETTERS = str.maketrans("0123456789", "abcdefghij")


if __name__ == "__main__":
    throughput()
    one_delta()
    quality()
    detection_delay()
