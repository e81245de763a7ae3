"""A sandboxed command we talk to while it runs (an ACP agent over its stdin and stdout).

Same containment as :func:`~pytest_agentbench.sandbox.process.run_command` — the plan's
wrapper, rlimits set before exec, an environment the caller built with ``sandbox_env``,
its own session and process group, a pids cgroup where one can be made — but stdin and
stdout stay open pipes for the caller. stderr is kept (head and tail, capped) by a
thread; a watcher thread enforces the wall clock and the process bound, and once the main
process has exited it kills whatever it left running in its group. :meth:`kill` stops the
whole group at once (a loop, a deadline, a cancelled task).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO

from pytest_agentbench.core.capture import OutputCapture
from pytest_agentbench.sandbox.isolation import Plan
from pytest_agentbench.sandbox.pidcap import PidsCgroup
from pytest_agentbench.sandbox.process import (
    CommandResult,
    Limits,
    start_sandboxed,
)
from pytest_agentbench.sandbox.watch import (
    kill_group,
    killed_by,
    over_process_limit,
    signal_of,
)

_POLL_S = 0.05


class LiveCommand:
    """One running sandboxed command with open stdin and stdout pipes."""

    def __init__(
        self,
        proc: subprocess.Popen[bytes],
        limits: Limits,
        plan: Plan,
        cgroup: PidsCgroup | None,
        start: float,
    ) -> None:
        self.proc = proc
        self.limits = limits
        self.plan = plan
        self.cgroup = cgroup
        self.start = start
        self.deadline = start + limits.timeout_s
        self.err = OutputCapture(limits.output_bytes)
        self.reason: str | None = None
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._stderr = threading.Thread(target=self._read_stderr, daemon=True)
        self._watch = threading.Thread(target=self._watch_loop, daemon=True)
        self._stderr.start()
        self._watch.start()

    @classmethod
    def start_command(
        cls,
        argv: Sequence[str],
        *,
        cwd: Path,
        env: Mapping[str, str],
        limits: Limits,
        plan: Plan,
        network: bool = False,
        read_only: Sequence[Path] = (),
        writable: Sequence[Path] = (),
    ) -> LiveCommand:
        """Start ``argv`` in ``cwd`` under ``plan`` and ``limits`` (``network``,
        ``read_only`` and ``writable`` as for ``run_command``). Raises SandboxError
        when it cannot be started."""
        proc, cgroup, start, _ = start_sandboxed(
            argv,
            cwd=cwd,
            env=env,
            limits=limits,
            plan=plan,
            stdin=subprocess.PIPE,
            network=network,
            read_only=read_only,
            writable=writable,
        )
        return cls(proc, limits, plan, cgroup, start)

    @property
    def stdin(self) -> IO[bytes]:
        assert self.proc.stdin is not None
        return self.proc.stdin

    @property
    def stdout(self) -> IO[bytes]:
        assert self.proc.stdout is not None
        return self.proc.stdout

    def stderr_text(self) -> str:
        """What is kept of its stderr so far."""
        return self.err.text()

    def exit_code(self) -> int | None:
        """Its exit status, or None while it runs."""
        return self.proc.poll()

    def _read_stderr(self) -> None:
        stream = self.proc.stderr
        if stream is None:
            return
        runaway = self.limits.runaway_bytes
        fd = stream.fileno()
        while True:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                break
            if not chunk:
                break
            self.err.add(chunk)
            if self.err.total > runaway:
                self.kill("output")
                break

    def _watch_loop(self) -> None:
        next_scan = 0.0
        while not self._done.is_set():
            now = time.monotonic()
            if now >= self.deadline:
                self.kill("timeout")
                break
            if self.proc.poll() is not None:
                self.kill(None)  # the main process is done: so are its leftovers
                break
            if now >= next_scan:
                next_scan = now + _POLL_S * 2
                if self._over_process_limit():
                    self.kill("processes")
                    break
            self._done.wait(_POLL_S)

    def _over_process_limit(self) -> bool:
        return over_process_limit(self.proc, self.cgroup, self.plan, self.limits.processes)

    def kill(self, reason: str | None) -> None:
        """SIGKILL the whole group (and cgroup); the first reason given is kept."""
        with self._lock:
            if self.reason is None:
                self.reason = reason
        kill_group(self.proc, self.cgroup)

    def wait(self, timeout: float) -> bool:
        """True when the main process has exited within ``timeout`` seconds."""
        try:
            self.proc.wait(timeout=max(0.0, timeout))
        except subprocess.TimeoutExpired:
            return False
        return True

    def finish(self, reason: str | None = None) -> CommandResult:
        """End it (``reason`` when it still runs), reap it, and say how it ended."""
        if self.proc.poll() is None:
            self.kill(reason)
        else:
            self.kill(None)  # leftovers of an exited main process
        self.proc.wait()
        self._done.set()
        self._watch.join(5)
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                with contextlib.suppress(OSError, ValueError):
                    stream.close()
        self._stderr.join(2)
        if self.proc.stderr is not None:
            with contextlib.suppress(OSError):
                self.proc.stderr.close()
        if self.cgroup is not None:
            self.cgroup.remove()
        stderr = self.err.text()
        signum = None if self.reason is not None else signal_of(self.proc.returncode)
        exit_code = None if self.reason is not None or signum is not None else self.proc.returncode
        return CommandResult(
            exit_code=exit_code,
            stdout="",
            stderr=stderr,
            timed_out=self.reason == "timeout",
            killed_by=self.reason or killed_by(signum, exit_code, stderr[-4000:]),
            truncated=self.err.truncated,
            elapsed_s=time.monotonic() - self.start,
        )
