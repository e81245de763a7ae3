"""Benchmark the environments layer: what a rollout's container costs over the engine's own.

Run: .venv/bin/python bench/containers.py [rounds] [in_flight]

Measured in this one run, wall clock, median of ``rounds`` (default 7), the variants in a
rotating order so the machine's noise spreads over all of them:

- ``floor``: ``podman run --rm IMAGE true``, the engine's own cost of a container that
  does nothing (create, start, run, wait, remove);
- ``rollout``: what a rollout does with the layer for the same nothing: ``Container.start``
  (labelled, ``sleep infinity`` as PID 1), one ``exec`` of ``true``, ``remove``;
- ``rollout + workdir + limits``: the same with a workdir, ``cpus`` and ``memory_mb`` set
  (one more ``exec`` reads the limits back from the cgroup, for the notes).

Then ``in_flight`` (default 16) container tasks at once, each running a small Python
computation: as ``run --rm`` floors, and as rollouts (start, exec, remove), each side's
wall time for the whole batch, and whether any container was left behind.

The image is ``localhost/agentbench-base:bookworm`` (``.ci/base-image``); the engine is
whichever ``find_engine`` picks (``CONTAINER_HOST`` makes it remote).
"""

from __future__ import annotations

import os
import statistics
import sys
import threading
import time
from collections.abc import Callable

from pytest_agentbench.environments.container import Container, ContainerSpec, new_name
from pytest_agentbench.environments.engine import Engine, find_engine

IMAGE = os.environ.get("AGENTBENCH_TEST_BASE_IMAGE", "localhost/agentbench-base:bookworm")
RUN_ID = f"bench{os.getpid()}"
WORK = ["python3", "-c", "print(sum(i * i for i in range(200_000)))"]


def floor(engine: Engine, argv: list[str]) -> None:
    engine.run(["run", "--rm", IMAGE, *argv], timeout_s=300)


def rollout(engine: Engine, argv: list[str], *, settings: bool = False) -> None:
    extra: dict[str, object] = (
        {"workdir": "/app", "cpus": 1.0, "memory_mb": 512} if settings else {}
    )
    spec = ContainerSpec(
        image=IMAGE,
        name=new_name(RUN_ID, "bench", "nothing", 0),
        run_id=RUN_ID,
        **extra,  # type: ignore[arg-type]
    )
    with Container.start(engine, spec) as box:
        result = box.exec(argv, timeout_s=300)
        assert result.exit_code == 0, result.stderr


def timed(action: Callable[[], None]) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def batch(action: Callable[[], None], count: int) -> float:
    """Wall time of ``count`` runs of ``action`` all started at once."""
    errors: list[BaseException] = []

    def one() -> None:
        try:
            action()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=one) for _ in range(count)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return time.perf_counter() - started


def left(engine: Engine) -> list[str]:
    done = engine.run(
        ["ps", "-a", "--filter", f"label=agentbench.run_id={RUN_ID}", "--format", "{{.Names}}"]
    )
    return done.stdout.decode().split()


def main(rounds: int, in_flight: int) -> None:
    engine = find_engine()
    print(
        f"engine: {' '.join(engine.argv)} ({engine.remote or 'local'}); image {IMAGE}; "
        f"{os.cpu_count()} cpus; load {os.getloadavg()[0]:.1f}"
    )
    variants: dict[str, Callable[[], None]] = {
        "floor: run --rm true": lambda: floor(engine, ["true"]),
        "rollout: start, exec true, remove": lambda: rollout(engine, ["true"]),
        "rollout + workdir + limits": lambda: rollout(engine, ["true"], settings=True),
    }
    names = list(variants)
    times: dict[str, list[float]] = {name: [] for name in names}
    variants[names[0]]()  # warm the engine's caches
    for index in range(rounds):
        for name in names[index % len(names) :] + names[: index % len(names)]:
            times[name].append(timed(variants[name]))
    base = statistics.median(times[names[0]])
    print(f"\none container, median of {rounds} rounds (wall):")
    for name in names:
        value = statistics.median(times[name])
        print(f"  {name:<36} {value * 1000:7.0f} ms  {value / base:5.2f}x the floor")

    print(f"\n{in_flight} container tasks in flight ({' '.join(WORK[:2])} …), wall for the batch:")
    floors: list[float] = []
    ours: list[float] = []
    for index in range(max(1, rounds // 3)):
        sides: list[tuple[list[float], Callable[[], None]]] = [
            (floors, lambda: floor(engine, WORK)),
            (ours, lambda: rollout(engine, WORK)),
        ]
        for into, action in sides if index % 2 == 0 else sides[::-1]:
            into.append(batch(action, in_flight))
    f, o = statistics.median(floors), statistics.median(ours)
    print(f"  floor (run --rm each)   {f:6.2f} s")
    print(f"  rollouts (start/exec/rm) {o:6.2f} s  {o / f:5.2f}x the floor")
    remaining = left(engine)
    print(f"  containers left behind: {len(remaining)}")


if __name__ == "__main__":
    main(
        int(sys.argv[1]) if len(sys.argv) > 1 else 7,
        int(sys.argv[2]) if len(sys.argv) > 2 else 16,
    )
