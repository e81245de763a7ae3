"""Start-up counted in instructions, which a busy machine does not change: a one-task
``pytest --agentbench`` run against plain pytest, each under valgrind's callgrind.

Run: .venv/bin/python bench/startup_instructions.py [REV] [--per-task N]

Three runs, each a fresh interpreter with the project's test-only plugins off (as every
bench here): ours (a one-task exact-verifier suite against ``bench/floor_server.py``),
plain pytest with one empty test, and plain pytest whose one test imports httpx and
streams one request from the same server (what a task cannot do without). Ours is a copy of
the working tree put first on ``PYTHONPATH``, and with ``REV`` that revision's package
is measured the same way: each is then loaded as an installed package is, not as the
editable install of a clone (pytest treats the two differently: docs/scale.md, "The
fourth pass"). Prints the
instructions of each and the ratios; the wall-clock figures are ``bench/paired.py``'s.
callgrind runs each about 50 times slower: a few minutes in all.

``--per-task N`` adds the serial cost of a task in instructions: ours (and ``REV``) with
N + 1 tasks less the same with 1, both at ``--agentbench-concurrency 1`` against the same
server, over N; beside it plain pytest's per trivial test (N + 1 tests less 1).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from paired import IGNORED
from serial_cost import checkout
from throughput import FLOOR_TEST, MODEL_ARGS, NO_DEV, start_server, suite_text

HERE = Path(__file__).resolve().parent


def instructions(folder: Path, args: list[str], path: str | None = None) -> int:
    """The instructions callgrind counts for ``python -m pytest ARGS`` run in ``folder``."""
    env = {**os.environ, "OPENAI_API_KEY": "x"}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if path is not None:
        env["PYTHONPATH"] = path
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *NO_DEV, *args]
    subprocess.run(command, cwd=folder, env=env, capture_output=True, check=True)  # .pyc
    done = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *command],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    found = re.search(r"Collected : (\d+)", done.stderr)
    if found is None:
        raise SystemExit(f"callgrind printed no count:\n{done.stderr[-2000:]}")
    return int(found.group(1))


def main() -> None:
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed (Debian package: valgrind)")
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("against", nargs="?", help="a git revision measured the same way")
    parser.add_argument("--per-task", type=int, default=0, metavar="N")
    args = parser.parse_args()
    against = args.against
    per_task: dict[str, float] = {}
    server, url = start_server()
    try:
        with tempfile.TemporaryDirectory(prefix="agentbench-startup-") as tmp:
            root = Path(tmp)
            folders = {name: root / name for name in ("ours", "empty", "request")}
            for folder in folders.values():
                folder.mkdir()
            (folders["ours"] / "bench_tp.toml").write_text(suite_text(1))
            (folders["empty"] / "test_plain.py").write_text("def test_one():\n    pass\n")
            streaming = FLOOR_TEST.format(url=url, count=1)
            (folders["request"] / "test_plain.py").write_text(streaming)
            ours_args = [*MODEL_ARGS, "--agentbench-base-url", url]
            # ours as a copy first on PYTHONPATH, as a revision is measured: loaded as an
            # installed (not editable) package is, through pytest's import hook
            mine = root / "mine" / "pytest_agentbench"
            shutil.copytree(HERE.parent / "pytest_agentbench", mine, ignore=IGNORED)
            counts = {
                "ours": instructions(folders["ours"], ours_args, str(mine.parent)),
                "pytest, one empty test": instructions(folders["empty"], []),
                "pytest, one test streaming one request": instructions(folders["request"], []),
            }
            old = checkout(against, root / "old") if against else None
            if old is not None:
                counts[against or ""] = instructions(folders["ours"], ours_args, old)
            if args.per_task:
                per_task = _per_task(root, args.per_task, ours_args, str(mine.parent), old)
                if against:
                    per_task[against] = per_task.pop("old")
    finally:
        server.terminate()
        server.wait()
    empty = counts["pytest, one empty test"]
    request = counts["pytest, one test streaming one request"]
    for name, count in counts.items():
        print(
            f"{name:<42} {count / 1e6:>8.0f} M instructions   ÷ empty test {count / empty:.2f}x"
            f"   ÷ test with one request {count / request:.2f}x"
        )
    for name, each in per_task.items():
        print(f"per task, {name:<32} {each / 1e6:>8.2f} M instructions")


def _per_task(
    root: Path, size: int, ours_args: list[str], mine: str, old: str | None
) -> dict[str, float]:
    """Instructions per task, serial: N + 1 tasks (tests) less 1, over N."""
    serial = [*ours_args, "--agentbench-concurrency", "1"]
    found: dict[str, float] = {}
    for count in (1, size + 1):
        suite = root / f"suite-{count}"
        suite.mkdir()
        (suite / "bench_tp.toml").write_text(suite_text(count))
        plain = root / f"plain-{count}"
        plain.mkdir()
        (plain / "test_plain.py").write_text(
            f"import pytest\n\n@pytest.mark.parametrize('i', range({count}))\n"
            "def test_nothing(i):\n    pass\n"
        )
    sides = {"ours": mine, **({"old": old} if old is not None else {})}
    for name, path in sides.items():
        one = instructions(root / "suite-1", serial, path)
        many = instructions(root / f"suite-{size + 1}", serial, path)
        found[name] = (many - one) / size
    one = instructions(root / "plain-1", [])
    many = instructions(root / f"plain-{size + 1}", [])
    found["pytest, a trivial test"] = (many - one) / size
    return found


if __name__ == "__main__":
    main()
