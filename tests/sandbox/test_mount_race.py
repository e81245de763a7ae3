"""bubblewrap loses a race with the host's mount table now and then (its issue 650): it
remounts every mount below ``/`` read-only, and a mount that goes away meanwhile fails
the whole start with ``bwrap: Can't bind mount /oldroot/ on /newroot/: …``. Containers
starting and stopping beside a run do exactly that, and a verifier's check once failed in
CI for it. Such a start is tried again (nothing of the command ran), in the three places
bubblewrap starts: a sandboxed command, the isolation probe and a fork server.

The race is made for real (tests/sandbox/mount_race_script.py): in a mount namespace of
its own (``unshare --mount --propagation private``: nothing it mounts reaches the host,
whatever the host's propagation), whose mounts it then shares among themselves so the
sandboxes it starts see them come and go, a child mounts and unmounts a folder in a loop
while sandboxed commands, probes and fork servers start. Without the retry a fifth to
a half of the starts failed here; with it, none. Needs root (to mount) and bubblewrap
with a pids cgroup; skips with the reason otherwise."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from pytest_agentbench.sandbox import forkserver
from pytest_agentbench.sandbox.isolation import lost_mount_race

SCRIPT = Path(__file__).with_name("mount_race_script.py")


def test_the_mount_race_message_is_told_from_a_command_s_own_failure() -> None:
    real = (
        "bwrap: Can't bind mount /oldroot/ on /newroot/: Unable to apply mount flags: "
        'remount "/newroot/var/tmp/x/to0": Invalid argument\n'
    )
    assert lost_mount_race(1, real)
    assert not lost_mount_race(2, real)  # bubblewrap's setup failures exit 1
    assert not lost_mount_race(1, "bwrap: execvp nope: No such file or directory\n")
    assert not lost_mount_race(1, "Traceback (most recent call last):\n" + real)


@pytest.mark.slow
def test_sandboxed_starts_survive_a_churning_mount_table(tmp_path: Path) -> None:
    unshare = shutil.which("unshare")
    if os.geteuid() != 0 or unshare is None:
        pytest.skip("making the mount race needs root and util-linux's unshare")
    if not forkserver.usable("strict"):
        pytest.skip("needs bubblewrap with a pids cgroup (the fork server's path)")
    # outside /tmp: the fork server's sandbox has a private /tmp, and its runner lies here
    base = Path(tempfile.mkdtemp(prefix="agentbench-race-", dir="/var/tmp"))
    private_namespace = [unshare, "--mount", "--propagation", "private"]
    try:
        done = subprocess.run(
            [*private_namespace, sys.executable, str(SCRIPT), "40", str(base), "90"],
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
            cwd=tmp_path,
        )
    finally:
        shutil.rmtree(base, ignore_errors=True)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["failed"] == {"command": [], "probe": [], "server": []}, found["tried"]
    assert min(found["tried"].values()) >= 3, found["tried"]
