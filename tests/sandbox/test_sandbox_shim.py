"""The Python parent shim, used where coreutils' ``timeout`` is missing or refuses ``-k``:
it passes on the command's exit status and signal, kills the command's group at its
deadline, and takes a ``kill(getppid())`` itself so the harness is never hit. Real
subprocesses; the deadlines are hang guards, never timed assertions."""

from __future__ import annotations

import subprocess
import sys

import pytest

from pytest_agentbench.sandbox.isolation import _PYTHON_SHIM

SHIM = [sys.executable, "-I", "-S", "-c", _PYTHON_SHIM]


def shim_run(deadline_s: float, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*SHIM, str(deadline_s), *argv],
        capture_output=True,
        text=True,
        start_new_session=True,
        timeout=120,
    )


@pytest.mark.parametrize(
    ("argv", "returncode"),
    [
        (["sh", "-c", "exit 7"], 7),
        (["sh", "-c", "exit 0"], 0),
        (["sh", "-c", "kill -TERM $$"], -15),
        (["no-such-command-anywhere"], 127),
    ],
    ids=["exit-7", "exit-0", "sigterm", "missing"],
)
def test_the_shim_passes_on_how_the_command_ended(argv: list[str], returncode: int) -> None:
    assert shim_run(60, *argv).returncode == returncode


def test_the_shim_kills_the_group_at_its_deadline() -> None:
    done = shim_run(1, "sh", "-c", "sleep 100 & sleep 100; echo never")
    assert done.returncode == -9 and "never" not in done.stdout


def test_a_kill_of_the_parent_hits_the_shim_not_the_caller() -> None:
    code = "import os, signal; os.kill(os.getppid(), signal.SIGKILL)"
    done = shim_run(60, sys.executable, "-c", code)
    assert done.returncode == -9  # the shim died; this test process, its caller, did not
