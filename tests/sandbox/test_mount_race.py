"""bubblewrap loses a race with the host's mount table now and then (its issue 650): it
remounts every mount below ``/`` read-only, and a mount that goes away meanwhile fails
the whole start with ``bwrap: Can't bind mount /oldroot/ on /newroot/: …``. Containers
starting and stopping beside a run do exactly that, and a verifier's check once failed in
CI for it. Such a start is tried again (nothing of the command ran), in the three places
bubblewrap starts: a sandboxed command, the isolation probe and a fork server.

The race is made for real: a child in a mount namespace of its own whose mounts propagate
(``unshare --mount --propagation shared``, so the host is untouched) mounts and unmounts
a folder in a tight loop while sandboxed commands start. Without the retry about a fifth
of the starts fail here; with it, none. Needs root (to mount) and bubblewrap with a pids
cgroup; skips with the reason otherwise."""

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

SCRIPT = r'''
import json, subprocess, sys, tempfile
from pathlib import Path

from pytest_agentbench.sandbox import forkserver, isolation
from pytest_agentbench.sandbox.process import Limits, run_command, sandbox_env

base = Path(sys.argv[2])
(base / "from").mkdir()
CHURN = """
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
src, dst = sys.argv[1].encode(), sys.argv[2].encode()
while True:
    if libc.mount(src, dst, None, 4096, None) == 0:  # MS_BIND
        libc.umount2(dst, 0)
"""
churners = []
for k in range(2):
    (base / f"to{k}").mkdir()
    churners.append(
        subprocess.Popen([sys.executable, "-c", CHURN, str(base / "from"), str(base / f"to{k}")])
    )
runs = int(sys.argv[1])
plan = isolation.plan_for("strict")
ws = base / "ws"
ws.mkdir()
failed = {"command": [], "probe": [], "server": []}
for _ in range(runs):
    done = run_command(["true"], cwd=ws, env=sandbox_env(ws), limits=Limits(), plan=plan)
    if done.exit_code != 0:
        failed["command"].append(done.stderr.strip()[:300])
bwrap, true = isolation._tool("bwrap"), isolation._tool("true")
for _ in range(runs):
    with tempfile.TemporaryDirectory(dir=base) as scratch:
        why = isolation._probe([*isolation.bwrap_args(bwrap, Path(scratch)), "--", true])
    if why is not None:
        failed["probe"].append(why)
runner = base / "runner.py"
runner.write_text("import os\ndef main(orders, nonce, fd):\n    os.write(fd, b'ok')\n")
server = forkserver.ForkServer("strict")
for _ in range(runs // 2):
    server.close()  # a new server (a new bubblewrap start) for every task
    done, report = server.run(
        {"a.py": "x = 1\n"}, str(runner), "race_runner", {"solution": "a.py"}, "n",
        Limits(), sandbox_env(ws), 1000,
    )
    if done.exit_code != 0 or report != b"ok":
        failed["server"].append(str(done.killed_by))
server.close()
for churner in churners:
    churner.kill()
    churner.wait()
print(json.dumps(failed))
'''


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
    script = tmp_path / "race.py"
    script.write_text(SCRIPT)
    try:
        done = subprocess.run(
            [
                unshare,
                "--mount",
                "--propagation",
                "shared",
                sys.executable,
                str(script),
                "60",
                str(base),
            ],
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
    finally:
        shutil.rmtree(base, ignore_errors=True)
    assert done.returncode == 0, done.stderr[-3000:]
    failed = json.loads(done.stdout.strip().splitlines()[-1])
    assert failed == {"command": [], "probe": [], "server": []}
