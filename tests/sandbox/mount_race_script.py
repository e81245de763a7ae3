"""Run by tests/sandbox/test_mount_race.py as root, under ``unshare --mount --propagation
private``: makes this mount namespace's mounts shared among themselves (never the host's),
then starts sandboxed commands, isolation probes and fork servers while a child mounts
and unmounts a folder in a loop; prints, as one JSON line, what failed and how many of
each were tried.

Arguments: the most of each kind to try, the folder to work in (outside /tmp: the fork
server's sandbox has a private /tmp), and a time budget in seconds (each kind gets its
share of it, and at least three tries).
"""

from __future__ import annotations

import ctypes
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pytest_agentbench.sandbox import forkserver, isolation
from pytest_agentbench.sandbox.process import Limits, run_command, sandbox_env

CHURN = """
import ctypes, os, sys, time
os.nice(10)  # the machine's other work (a test suite beside it) goes first
libc = ctypes.CDLL(None, use_errno=True)
libc.prctl(1, 9, 0, 0, 0)  # PR_SET_PDEATHSIG, SIGKILL: it dies with the script, however
if os.getppid() == 1:  # that ends (a timeout's kill too); gone already: stop
    sys.exit(0)
src, dst = sys.argv[1].encode(), sys.argv[2].encode()
while True:
    if libc.mount(src, dst, None, 4096, None) == 0:  # MS_BIND
        libc.umount2(dst, 0)
    time.sleep(0.0002)
"""
MS_REC, MS_SHARED = 16384, 1 << 20
SHARES = {"command": 1, "probe": 2, "server": 3}


def main() -> None:
    runs, base, budget_s = int(sys.argv[1]), Path(sys.argv[2]), float(sys.argv[3])
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.mount(b"none", b"/", None, MS_REC | MS_SHARED, None) != 0:
        raise SystemExit(f"cannot make / shared in this namespace: errno {ctypes.get_errno()}")
    (base / "from").mkdir()
    (base / "to").mkdir()
    churner = subprocess.Popen([sys.executable, "-c", CHURN, str(base / "from"), str(base / "to")])
    started = time.monotonic()
    failed: dict[str, list[str]] = {kind: [] for kind in SHARES}
    tried = dict.fromkeys(SHARES, 0)

    def more(kind: str, count: int) -> bool:
        share = budget_s * SHARES[kind] / 3
        return tried[kind] < count and (tried[kind] < 3 or time.monotonic() - started < share)

    plan = isolation.plan_for("strict")
    ws = base / "ws"
    ws.mkdir()
    while more("command", runs):
        tried["command"] += 1
        done = run_command(["true"], cwd=ws, env=sandbox_env(ws), limits=Limits(), plan=plan)
        if done.exit_code != 0:
            failed["command"].append(done.stderr.strip()[:300])
    bwrap, true = isolation._tool("bwrap"), isolation._tool("true")
    assert bwrap is not None and true is not None
    while more("probe", runs):
        tried["probe"] += 1
        with tempfile.TemporaryDirectory(dir=base) as scratch:
            why = isolation._probe([*isolation.bwrap_args(bwrap, Path(scratch)), "--", true])
        if why is not None:
            failed["probe"].append(why)
    runner = base / "runner.py"
    runner.write_text("import os\ndef main(orders, nonce, fd):\n    os.write(fd, b'ok')\n")
    server = forkserver.ForkServer("strict")
    while more("server", max(3, runs // 2)):
        tried["server"] += 1
        server.close()  # a new server (a new bubblewrap start) for every task
        done, report = server.run(
            {"a.py": "x = 1\n"},
            str(runner),
            "race_runner",
            {"solution": "a.py"},
            "n",
            Limits(),
            sandbox_env(ws),
            1000,
        )
        if done.exit_code != 0 or report != b"ok":
            failed["server"].append(str(done.killed_by))
    server.close()
    churner.kill()
    churner.wait()
    print(json.dumps({"failed": failed, "tried": tried}))


if __name__ == "__main__":
    main()
