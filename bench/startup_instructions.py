"""Start-up counted in instructions, which a busy machine does not change: a one-task
``pytest --agentbench`` run against plain pytest, each under valgrind's callgrind.

Run: .venv/bin/python bench/startup_instructions.py [REV]

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
"""

from __future__ import annotations

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
    against = sys.argv[1] if len(sys.argv) > 1 else None
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
            if against:
                old = checkout(against, root / "old")
                counts[against] = instructions(folders["ours"], ours_args, old)
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


if __name__ == "__main__":
    main()
