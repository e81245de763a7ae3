"""The live status line, seen the way a person sees it: pytest on a pseudo-terminal."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
from pathlib import Path

import pytest

WORDS = " ".join(["ok"] * 30)
SUITE = f"""
[suite]
verifier = {{ kind = "exact" }}
[[task]]
id = "slow-start"
input = "x"
target = "ok"
scripted = [{{ text = "ok", delay_s = 1.0 }}]
[[task]]
id = "slow-stream"
input = "x"
target = "{WORDS}"
scripted = [{{ text = "{WORDS}", chunk_size = 3, chunk_delay_s = 0.05 }}]
"""


def run_on_terminal(folder: Path, *args: str) -> str:
    """Run pytest with its output on a pseudo-terminal and return everything it wrote."""
    master, slave = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "pytest", "--agentbench", "-p", "no:cacheprovider", *args],
        cwd=folder,
        stdin=slave,
        stdout=slave,
        stderr=slave,
    )
    os.close(slave)
    chunks = []
    while True:
        ready, _, _ = select.select([master], [], [], 60)
        if not ready:
            break
        try:
            chunk = os.read(master, 65536)
        except OSError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    process.wait(timeout=60)
    os.close(master)
    return b"".join(chunks).decode("utf-8", "replace")


def visible(text: str) -> str:
    """What the terminal shows once backspaces have done their work."""
    out: list[str] = []
    for char in text:
        if char == "\b":
            if out:
                out.pop()
        else:
            out.append(char)
    return "".join(out).replace(" \r", "\r")


@pytest.mark.slow
def test_a_terminal_shows_what_is_in_flight_and_pytest_output_stays_intact(
    pytester: pytest.Pytester,
) -> None:
    pytester.makefile(".toml", bench_live=SUITE)
    raw = run_on_terminal(pytester.path)
    assert " waiting 0." in raw  # before the first byte
    assert "answering" in raw and "tok" in raw  # while it streams
    screen = visible(raw)
    assert "waiting" not in screen.split("bench_live.toml", 1)[1].split("\n", 1)[0]
    assert "2 passed" in screen


@pytest.mark.slow
def test_quiet_and_piped_runs_show_no_status(pytester: pytest.Pytester) -> None:
    pytester.makefile(".toml", bench_live=SUITE)
    quiet = run_on_terminal(pytester.path, "-q")
    assert "waiting" not in quiet
    piped = subprocess.run(
        [sys.executable, "-m", "pytest", "--agentbench", "-p", "no:cacheprovider"],
        cwd=pytester.path,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert "waiting" not in piped.stdout
    assert "2 passed" in piped.stdout


@pytest.mark.slow
def test_a_rising_loop_score_shows_in_the_status_line(pytester: pytest.Pytester) -> None:
    sentence = "Let me check that once more before I answer. "
    pytester.makefile(
        ".toml",
        bench_loopy=f"""
[suite]
verifier = {{ kind = "includes" }}
[[task]]
id = "loopy"
input = "x"
target = "never"
scripted = [{{ text = "{sentence}", repeat = 80, chunk_size = 32, chunk_delay_s = 0.01 }}]
""",
    )
    raw = run_on_terminal(pytester.path, "--agentbench-loop-kill", "0")
    assert "· loop 0." in raw or "· loop 1.0" in raw
