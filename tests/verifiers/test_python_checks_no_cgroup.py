"""The fork servers where no pids cgroup can be made (a container's read-only cgroup file
system, a desktop session that delegates none): test_python_checks.py runs again, in a
mount namespace of its own without /sys/fs/cgroup, so each server counts a task's
processes against the bound itself (the basic one finds them as its descendants) and
fresh runs fall back to their watch. Needs root and unshare (util-linux).

As root without a cgroup nothing but those 50 ms bounds a fork bomb (the kernel exempts
root from RLIMIT_NPROC), and this machine may hold only 32 768 pids: where the outer
machine can make a pids cgroup, the whole inner run is put in one of its own (invisible
inside), so a bomb that outruns the watch cannot starve the tests running beside it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_agentbench.sandbox.pidcap import PidsCgroup

#: The whole inner run's processes, where a cgroup holds them (far above what it needs).
INNER_PIDS = 2000


def test_python_checks_pass_without_a_pids_cgroup(tmp_path: Path) -> None:
    unshare = shutil.which("unshare")
    if os.geteuid() != 0 or unshare is None:
        pytest.skip("needs root and unshare to hide the cgroup file system")
    hide = 'umount -l /sys/fs/cgroup 2>/dev/null; exec "$0" "$@"'
    outer = PidsCgroup.create(INNER_PIDS)
    join = [] if outer is None else ["sh", "-c", 'echo $$ > "$0" && exec "$@"', outer.procs_file]
    command = [
        *join,
        unshare,
        "-m",
        "sh",
        "-c",
        hide,
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:randomly",
        "-p",
        "no:cacheprovider",
        "-p",
        "no:xdist",
        "--basetemp",
        str(tmp_path / "inner"),
        str(Path(__file__).with_name("test_python_checks.py")),
        "-rs",
    ]
    env = {**os.environ, "AGENTBENCH_TEST_NO_CGROUP": "1"}
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=900, env=env)
    finally:
        if outer is not None:
            outer.remove()
    if done.returncode != 0 and "unshare failed" in done.stderr:
        pytest.skip(f"no mount namespace here: {done.stderr.strip()[-200:]}")
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    last = done.stdout.splitlines()[-1]
    # the one test that only runs here ran; every other ran as it does with cgroups
    assert " passed" in last and " skipped" not in last, done.stdout[-3000:]
