"""A real tracing backend started for a test (tests/e2e/test_phoenix.py,
tests/e2e/test_mlflow.py): found in a Python installed outside the repository by a
``.ci/install-*`` script, started on 127.0.0.1 in its own process group, waited for
until its health URL answers, and ended (the whole group) when the test is done."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest


def backend_python(candidates: Sequence[str], program: str) -> Path | None:
    """The first candidate Python whose venv has ``program`` (its console script)."""
    for candidate in filter(None, candidates):
        path = Path(candidate)
        if path.exists() and (path.parent / program).exists():
            return path
    return None


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextlib.contextmanager
def serving(
    command: Sequence[str], env: dict[str, str], health: str, log_path: Path, what: str
) -> Iterator[None]:
    """Run ``command`` until the block ends; fails the test, with the end of its log,
    when ``health`` does not answer 200 within 300 s (start-up on a loaded machine)."""
    log = log_path.open("wb")
    server = subprocess.Popen(
        list(command), env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    try:
        deadline = time.monotonic() + 300
        while True:
            try:
                with urllib.request.urlopen(health, timeout=5) as reply:
                    if reply.status == 200:
                        break
            except OSError:
                pass
            if server.poll() is not None or time.monotonic() > deadline:
                log.flush()
                pytest.fail(f"{what} did not start: " + log_path.read_text()[-3000:])
            time.sleep(1)
        yield
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(30)
        log.close()


ROOT = Path(__file__).resolve().parents[1]


def copy_agent_suite(pytester: pytest.Pytester) -> None:
    """The example stand-in command agent's suite and agent, in the test's folder."""
    shutil.copytree(
        ROOT / "example_suites" / "agents", pytester.path / "agents", dirs_exist_ok=True
    )
    shutil.copy(ROOT / "example_suites" / "bench_external_agent.toml", pytester.path)


def two_model_agent_run(pytester: pytest.Pytester, url: str) -> pytest.RunResult:
    """The example stand-in command agent's suite (a task it passes, one whose model
    loops and is killed) against two scripted models, its spans sent to ``url``: 4
    tasks, 8 model calls, 13 spans."""
    copy_agent_suite(pytester)
    result = pytester.runpytest_subprocess(
        "--agentbench",
        "-p",
        "no:cacheprovider",
        "--agentbench-model",
        "big=scripted",
        "--agentbench-model",
        "small=scripted",
        "--agentbench-otlp",
        url,
    )
    result.assert_outcomes(passed=2, failed=2)
    return result
