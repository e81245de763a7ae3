"""Benchmark: the marginal CPU of one serial task, ours against the floor (and an older revision).

Run: .venv/bin/python bench/serial_cost.py [--tasks 600] [--rounds 5] [--against REV]
     [--profile FILE]

The first figure of ``bench/throughput.py`` alone, so a change to the per-task path can be
measured in a minute: CPU (user + sys, from wait4) of ``pytest --agentbench
--agentbench-concurrency 1`` at N and N/10 tasks against ``bench/floor_server.py``, the
difference per task (start-up cancels out), against the same for plain pytest tests each
making one streamed httpx request. ``--against REV`` also runs the package as it was at
git revision REV (copied to a temp folder put first on ``PYTHONPATH``), in the same
rounds, so a before/after pair meets the same load. Each figure is the best of
``--rounds``; runs alternate, so a busy moment hits every side alike. ``--profile FILE``
instead writes a cProfile of one run of ours at N tasks to FILE and exits.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from throughput import (
    FLOOR_TEST,
    MODEL_ARGS,
    NO_DEV,
    Run,
    plain,
    run_pytest,
    start_server,
    suite_text,
)

HERE = Path(__file__).resolve().parent
SERIAL = ("--agentbench-concurrency", "1")


def side(root: Path, url: str, count: int, label: str, pythonpath: str | None) -> Run:
    """One run of ours (``pythonpath`` first on the path: an older copy of the package)."""
    folder = root / f"{label}-{count}"
    if not folder.exists():
        folder.mkdir(parents=True)
        (folder / "bench_tp.toml").write_text(suite_text(count))
    old = os.environ.get("PYTHONPATH")
    if pythonpath:
        os.environ["PYTHONPATH"] = pythonpath
    try:
        return run_pytest(folder, *MODEL_ARGS, "--agentbench-base-url", url, *SERIAL)
    finally:
        if old is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = old


def checkout(rev: str, into: Path) -> str:
    """The package as it was at ``rev``, under ``into``; the folder to put on the path."""
    into.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "archive", rev, "pytest_agentbench"],
        cwd=HERE.parent,
        check=True,
        capture_output=True,
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return str(into)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=600)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--against", help="a git revision to measure in the same rounds")
    parser.add_argument("--profile", help="write a cProfile of ours at --tasks to this file")
    args = parser.parse_args()
    small, large = args.tasks // 10, args.tasks
    server, url = start_server()
    try:
        with tempfile.TemporaryDirectory(prefix="agentbench-serial-") as tmp:
            root = Path(tmp)
            if args.profile:
                folder = root / "profile"
                folder.mkdir()
                (folder / "bench_tp.toml").write_text(suite_text(large))
                env = {**os.environ, "OPENAI_API_KEY": "x"}
                env.pop("PYTHONDONTWRITEBYTECODE", None)
                command = [
                    sys.executable,
                    "-m",
                    "cProfile",
                    "-o",
                    str(Path(args.profile).resolve()),
                ]
                command += ["-m", "pytest", "-q", "-p", "no:cacheprovider", *NO_DEV, *MODEL_ARGS]
                command += ["--agentbench-base-url", url, *SERIAL]
                subprocess.run(command, cwd=folder, env=env, check=True, capture_output=True)
                return
            sides: dict[str, str | None] = {"ours": None}
            if args.against:
                sides[args.against] = checkout(args.against, root / "against")
            cpu: dict[tuple[str, int], list[float]] = {}
            for _ in range(args.rounds):
                for count in (small, large):
                    for label, path in sides.items():
                        run = side(root, url, count, label.replace("/", "_"), path)
                        cpu.setdefault((label, count), []).append(run.cpu_s)
                    source = FLOOR_TEST.format(url=url, count=count)
                    run = plain(root, f"floor{count}", source)
                    cpu.setdefault(("floor", count), []).append(run.cpu_s)
    finally:
        server.terminate()
        server.wait()
    floor = (min(cpu[("floor", large)]) - min(cpu[("floor", small)])) / (large - small)
    print(f"marginal CPU per serial task ({small} and {large} tasks, best of {args.rounds}):")
    print(f"  floor (pytest + one streamed httpx request): {floor * 1000:.3f} ms")
    for label in sides:
        mine = (min(cpu[(label, large)]) - min(cpu[(label, small)])) / (large - small)
        print(f"  {label}: {mine * 1000:.3f} ms, {mine / floor:.2f}x the floor")


if __name__ == "__main__":
    main()
