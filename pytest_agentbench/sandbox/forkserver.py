"""A pre-started sandboxed Python that forks once per task: the fast path for short checks.

Starting bubblewrap and a Python interpreter costs more than a HumanEval check itself, so
under ``strong`` isolation ``python_checks`` (and ``python_tests``) hands its runs to a
fork server: one bubblewrap sandbox per CPU slot (``cpuslots.py``) running one Python that has
already loaded the runner. Per task it writes the task's files into a fresh directory of
its private ``/tmp``, forks a child (new session, the task's rlimits, fds 0–2 on
``/dev/null`` and two unlinked files, the report channel on fd 3, every other descriptor
closed, an environment built from nothing), waits for it up to the wall-clock limit, kills
every other process of the sandbox, reads the report, output and status, and wipes
``/tmp`` before the next task. The server is non-dumpable, so a task (same user, every
capability dropped) can neither trace it nor open its descriptors or memory through
``/proc``. A task that kills the server fails as ``parent signal N``; the next task gets a
new server. docs/sandbox.md says what a task sees that differs from a fresh process.

The server's whole tree is one pids cgroup where one can be made: a refused fork stops the
task (and the server: the next task gets a new one). Without one the server counts the
task's processes itself every 50 ms and stops it past the bound.

Under ``basic`` isolation (no namespace tool) the server is the same program without
bubblewrap (``in_place``): it finds what a task left running in the pids cgroup they share
or, without one, among its descendants (it is their subreaper); a task runs in its host
workspace as it is, as a fresh ``basic`` run does; the server is started as a fresh
``basic`` command is (as root, without ``CAP_SYS_PTRACE``: with it a task could read the
server's memory, for all that the server is non-dumpable).

This module is the client: it starts a server (from sandbox/launcher.py's thread), sends
it a task and reads the reply; the server's program and the protocol between the two are
sandbox/forkserver_program.py.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import resource
import selectors
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from pytest_agentbench.core.jsontypes import JsonValue
from pytest_agentbench.errors import SandboxError
from pytest_agentbench.sandbox.environ_guard import guard_harness
from pytest_agentbench.sandbox.forkserver_program import SERVER, Reply, cut_text
from pytest_agentbench.sandbox.isolation import (
    _TOOL_PATH,
    bwrap_args,
    lost_mount_race,
    plan_for,
    setup_pauses,
)
from pytest_agentbench.sandbox.launcher import from_launcher
from pytest_agentbench.sandbox.pidcap import PidsCgroup
from pytest_agentbench.sandbox.process import (
    CommandResult,
    Limits,
    _preexec,
    _ptrace_dropper,
    _rlimits,
    _user_process_count,
    sandbox_env,
)
from pytest_agentbench.sandbox.watch import _POLL_S, WRAPPER_PROCESSES, killed_by

#: Files a fork-server task may bring (more, or bigger, runs as a fresh process).
MAX_FILES, MAX_FILE_BYTES = 64, 4 * 1024 * 1024
#: What a task leaves in its directory is copied back to the host workspace for a person
#: to inspect, up to this many bytes (a file over half of it is left out).
KEEP_BACK_BYTES = 2 * 1024 * 1024
_GRACE_S = 5.0
#: How long a new server may take to say it runs (bubblewrap's setup and Python's start).
_SETUP_WAIT_S = 30.0


def usable(isolation: str) -> bool:
    """Whether tasks under ``isolation`` may take the fork-server path: under bubblewrap
    (own pid namespace, private /tmp) and with no namespace tool at all (``basic``), not
    under ``unshare``. Processes are bounded by the server's pids cgroup where one can be
    made; else the server counts the task's processes (its pid namespace's, or in
    ``basic`` its own descendants: it is their subreaper) against the bound every 50 ms,
    under the ``RLIMIT_NPROC`` a fresh run would get."""
    try:
        plan = plan_for(isolation)
    except SandboxError:
        return False
    return plan.tool in ("bwrap", None)


def in_place(isolation: str) -> bool:
    """Whether a fork server under ``isolation`` runs a task in its host workspace as it
    is (``basic``: no namespace to hide the host's files, as a fresh basic run) rather
    than in a copy of its files in the sandbox's private /tmp."""
    return plan_for(isolation).tool is None


class ForkServer:
    """One sandboxed server process (see the module docstring). Not thread-safe: the CPU
    slot that owns it uses it from one thread at a time."""

    #: The Python program the server runs (sandbox/forkserver_program.py).
    program: str = SERVER

    def __init__(self, isolation: str) -> None:
        self.isolation = isolation
        self.proc: subprocess.Popen[bytes] | None = None
        self.cgroup: PidsCgroup | None = None
        self.scratch: tempfile.TemporaryDirectory[str] | None = None
        #: The files the last task left in its directory (None: too big to copy back).
        self.kept: dict[str, bytes | None] = {}

    def _start(self) -> subprocess.Popen[bytes]:
        guard_harness()
        plan = plan_for(self.isolation)
        try:
            self.scratch = tempfile.TemporaryDirectory(prefix="agentbench-forkserver-")
        except OSError as exc:
            where = tempfile.gettempdir()
            raise SandboxError(f"fork server: no scratch folder in {where}: {exc}") from None
        scratch = Path(self.scratch.name)
        limits = Limits()
        cgroup = None
        if plan.processes == "cgroup":
            cgroup = PidsCgroup.create(int(limits.processes) + WRAPPER_PROCESSES + 1)
            if cgroup is None:
                raise SandboxError("fork server: no pids cgroup could be made")
        self.cgroup = cgroup
        server = [sys.executable, "-I", "-S", "-B", "-c", self.program]
        drop_ptrace = None
        if plan.tool is None:
            # no namespace: the server shares the pids cgroup with its tasks (or, without
            # one, is their subreaper) and finds there what a task left; non-dumpable and
            # (for root) without CAP_SYS_PTRACE from exec on, which its forked tasks
            # inherit: they cannot read its memory
            procs = cgroup.procs_file if cgroup is not None else "-"
            argv = [*server, "basic", procs]
            drop_ptrace = _ptrace_dropper()
        else:
            bwrap = shutil.which("bwrap", path=_TOOL_PATH)
            if plan.tool != "bwrap" or bwrap is None:
                raise SandboxError("fork server: bubblewrap is not available")
            # --as-pid-1: the server is the namespace's init, so a task's kill(getppid())
            # is ignored by the kernel, as it is under a fresh bubblewrap sandbox
            argv = [*bwrap_args(bwrap, scratch), "--as-pid-1", "--", *server, "bwrap"]
        per_task = (resource.RLIMIT_AS, resource.RLIMIT_CPU)  # the children's, not the server's
        server_limits = [item for item in _rlimits(limits, None) if item[0] not in per_task]
        try:
            self.proc = from_launcher(
                lambda: subprocess.Popen(
                    argv,
                    cwd=scratch,
                    env=sandbox_env(scratch),
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    # read only when the server dies before its first reply: bubblewrap
                    # says there why it could not set the sandbox up (the server is silent)
                    stderr=subprocess.PIPE,
                    start_new_session=True,
                    preexec_fn=_preexec(
                        server_limits,
                        cgroup.procs_file if cgroup is not None else None,
                        drop_ptrace,
                    ),
                )
            )
        except (OSError, subprocess.SubprocessError) as exc:
            self.close()
            raise SandboxError(f"could not start the fork server: {exc}") from None
        return self.proc

    def _refused_now(self) -> bool:
        """Whether the server's pids cgroup has refused a fork (False without one)."""
        return self.cgroup is not None and self.cgroup.refused()

    def close(self) -> None:
        """Stop the server (its sandbox, its cgroup, its scratch directory)."""
        proc, self.proc = self.proc, None
        if proc is not None:
            with contextlib.suppress(OSError):
                os.killpg(proc.pid, 9)
            with contextlib.suppress(OSError):
                proc.kill()
            proc.wait()
            for stream in (proc.stdin, proc.stdout, proc.stderr):
                if stream is not None:
                    with contextlib.suppress(OSError):
                        stream.close()
        if self.cgroup is not None:
            self.cgroup.remove()
            self.cgroup = None
        if self.scratch is not None:
            with contextlib.suppress(OSError):
                self.scratch.cleanup()
            self.scratch = None

    def run(
        self,
        files: Mapping[str, str],
        runner: str,
        runner_module: str,
        orders: Mapping[str, JsonValue],
        nonce: str,
        limits: Limits,
        env: Mapping[str, str],
        report_limit: int,
        paths: list[str] | None = None,
        cwd: str | None = None,
    ) -> tuple[CommandResult, bytes]:
        """Run ``runner``'s ``main(orders, nonce, 3)`` in a forked child with ``files`` in
        its directory, or in ``cwd`` as it is (a ``basic`` server: ``in_place``); the
        result and what the child wrote to its report channel. ``paths`` join the server's
        ``sys.path`` (it runs with ``-S``) before the runner is first loaded, which happens
        once per server, before any task's code."""
        proc = self.proc if self.proc is not None and self.proc.poll() is None else None
        if proc is None:
            self.close()
            proc = self._start()
            pauses = setup_pauses()
            while (failure := _not_ready(proc)) is not None:
                self.close()
                code, stderr = failure
                if not (pauses and lost_mount_race(code, stderr)):
                    raise SandboxError(f"the fork server did not start: {_why(code, stderr)}")
                time.sleep(pauses.pop(0))
                proc = self._start()
        assert proc.stdin is not None and proc.stdout is not None
        refused_before = self.cgroup.refused() if self.cgroup is not None else False
        nproc = None  # as a fresh run's: RLIMIT_NPROC counts all of the user's processes
        if self.cgroup is None and plan_for(self.isolation).processes == "rlimit":
            nproc = _user_process_count() + int(limits.processes) + WRAPPER_PROCESSES
        request = {
            "files": dict(files),
            "runner": runner,
            "runner_module": runner_module,
            "orders": dict(orders),
            "nonce": nonce,
            "env": dict(env),
            # RLIMIT_NOFILE stays the server's (the child keeps fds 0-3 only)
            "rlimits": [
                list(item) for item in _rlimits(limits, nproc) if item[0] != resource.RLIMIT_NOFILE
            ],
            "timeout_s": limits.timeout_s,
            "output_bytes": int(limits.output_bytes),
            "report_limit": report_limit,
            "paths": list(paths or []),
            "keep_bytes": KEEP_BACK_BYTES,
        }
        if cwd is not None:
            request["cwd"] = cwd
        if self.cgroup is None:  # the server counts the task's processes itself
            request["processes"] = int(limits.processes)
        start = time.monotonic()
        line = b""
        try:
            proc.stdin.write((json.dumps(request) + "\n").encode())
            proc.stdin.flush()
            # a refused fork stops the task as a fresh run's watch does: the server with it
            line = _read_line(proc, start + limits.timeout_s + _GRACE_S, self._refused_now)
        except OSError:
            line = b""
        elapsed = time.monotonic() - start
        self.kept = {}
        if not line:
            over = self._refused_now() and not refused_before
            self.close()  # the server died (a task killed it) or hung: a new one next time
            code = proc.returncode if proc.returncode is not None else -9
            sig = -code if code < 0 else (code - 128 if code > 128 else 9)
            reason = "processes" if over else f"parent signal {sig}"
            result = CommandResult(None, "", "", False, reason, False, elapsed)
            return result, b""
        reply: Reply = json.loads(line)  # our own server's line: its shape is known
        stdout, cut_out = cut_text(reply["cut"][0], reply["stdout"])
        stderr, cut_err = cut_text(reply["cut"][1], reply["stderr"])
        refused = self.cgroup is not None and self.cgroup.refused() and not refused_before
        if refused:
            self.close()  # the refused-fork count never goes down: start afresh
        signum, exit_code = reply["signal"], reply["exit_code"]
        if reply["timed_out"]:
            killed: str | None = "timeout"
        elif refused or reply["processes"]:
            killed = "processes"
        else:
            killed = killed_by(signum, exit_code, stderr[-4000:])
        result = CommandResult(
            exit_code=None if killed == "timeout" or signum is not None else exit_code,
            stdout=stdout,
            stderr=stderr,
            timed_out=bool(reply["timed_out"]),
            killed_by=killed,
            truncated=cut_out or cut_err,
            elapsed_s=float(reply["elapsed_s"]),
        )
        self.kept = {k: None if v is None else bytes.fromhex(v) for k, v in reply["files"].items()}
        return result, reply["report"].encode("utf-8")


def _read_line(
    proc: subprocess.Popen[bytes], deadline: float, stop_if: Callable[[], bool] | None = None
) -> bytes:
    """One reply line from the server, or b"" when it dies or misses ``deadline``, or when
    ``stop_if()`` (asked every ``_POLL_S`` while the server is silent) says so."""
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    chunks: list[bytes] = []
    with selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_READ)
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return b""
            if not selector.select(timeout=left if stop_if is None else min(left, _POLL_S)):
                if stop_if is not None and stop_if():
                    return b""
                continue
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                return b""
            chunks.append(chunk)
            if chunk.endswith(b"\n"):
                return b"".join(chunks)


def _not_ready(proc: subprocess.Popen[bytes]) -> tuple[int | None, str] | None:
    """None once a server just started says ``ready``; else how it ended (its exit status,
    None when it hangs, and its stderr: bubblewrap's reason, or Python's traceback), for
    ``isolation.lost_mount_race`` to tell a lost race from a failure."""
    if _read_line(proc, time.monotonic() + _SETUP_WAIT_S) == b"ready\n":
        return None
    try:
        code: int | None = proc.wait(timeout=_GRACE_S)
    except subprocess.TimeoutExpired:
        return None, ""
    assert proc.stderr is not None
    return code, proc.stderr.read(1 << 16).decode("utf-8", "replace")


def _why(code: int | None, stderr: str) -> str:
    if code is None:
        return f"it did not say it was ready within {_SETUP_WAIT_S:g} s"
    last = [line for line in stderr.strip().splitlines() if line.strip()][-3:]
    return f"it exited with status {code}" + (": " + " | ".join(last) if last else "")


_servers: dict[tuple[int, str], ForkServer] = {}
_lock = threading.Lock()


def server_for(slot: int, isolation: str) -> ForkServer:
    """The fork server of CPU slot ``slot`` in this process (made on first use)."""
    with _lock:
        key = (slot, isolation)
        if key not in _servers:
            _servers[key] = ForkServer(isolation)
        return _servers[key]


@atexit.register
def _close_all() -> None:
    with _lock:
        for server in _servers.values():
            server.close()
        _servers.clear()
