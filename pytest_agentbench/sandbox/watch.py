"""One started sandboxed command watched to its end (``process.py`` starts it): a loop
in the calling thread feeds its stdin, reads stdout and stderr as they come (a head and
a tail of each, never more than the cap in memory), enforces the wall clock, the output
flood and the process bound, and kills the whole group (and its pids cgroup) when
anything runs over; and how such an end is read back (``signal_of``, ``killed_by``)."""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import subprocess
import threading
import time
from typing import Protocol

from pytest_agentbench.core.capture import OutputCapture
from pytest_agentbench.sandbox.isolation import Plan
from pytest_agentbench.sandbox.pidcap import PidsCgroup

_READ_CHUNK = 65536
_POLL_S = 0.05
#: Processes the wrappers themselves add (bwrap twice, unshare, the timeout shim).
WRAPPER_PROCESSES = 4
_DRAIN_GRACE_S = 1.0
_MEMORY_WORDS = ("MemoryError", "Cannot allocate memory", "std::bad_alloc", "out of memory")
_FILE_SIZE_WORDS = ("File too large",)


class Bounds(Protocol):
    """What the watch reads of a command's limits (``process.Limits``)."""

    @property
    def output_bytes(self) -> int: ...

    @property
    def processes(self) -> int: ...

    @property
    def runaway_bytes(self) -> int: ...


def session_size(session: int) -> int:
    """Processes in the command's session or process group (a watcher's count)."""
    count = 0
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as stat:
                fields = stat.read().rpartition(b")")[2].split()
        except OSError:
            continue
        if len(fields) > 4 and session in (int(fields[2]), int(fields[3])):
            count += 1
    return count


def signal_of(returncode: int) -> int | None:
    """The signal that ended the command, if any. Shells, bwrap and unshare report a
    child's death by signal N as status 128 + N, so such a status is read as a signal."""
    if returncode < 0:
        return -returncode
    if 128 < returncode <= 128 + 64:
        return returncode - 128
    return None


def killed_by(signum: int | None, exit_code: int | None, stderr_tail: str) -> str | None:
    """Which limit stopped a command that ended on its own (None: it simply exited)."""
    if signum == signal.SIGXCPU:
        return "cpu"
    if signum == signal.SIGXFSZ:
        return "file_size"
    if signum is not None:
        return f"signal {signum}"
    if exit_code:
        if any(word in stderr_tail for word in _MEMORY_WORDS):
            return "memory"
        if any(word in stderr_tail for word in _FILE_SIZE_WORDS):
            return "file_size"
    return None


def kill_group(proc: subprocess.Popen[bytes], cgroup: PidsCgroup | None) -> None:
    """SIGKILL the command's whole process group, the command, and its pids cgroup."""
    with contextlib.suppress(OSError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(OSError):
        proc.kill()
    if cgroup is not None:
        cgroup.kill_all()


def over_process_limit(
    proc: subprocess.Popen[bytes], cgroup: PidsCgroup | None, plan: Plan, processes: int
) -> bool:
    """Whether the command has more processes than ``processes`` (its cgroup refused a
    fork, or its session counted from /proc; not free: callers space their checks)."""
    if cgroup is not None:
        return cgroup.refused()
    count = session_size(proc.pid)
    if plan.processes == "rlimit":  # the rlimit stops forks at the bound itself
        return count >= processes
    return count > processes + WRAPPER_PROCESSES


class CommandWatch:
    """The state of one running command; :meth:`loop` drives it to the end."""

    def __init__(
        self,
        proc: subprocess.Popen[bytes],
        limits: Bounds,
        plan: Plan,
        cgroup: PidsCgroup | None,
        shimmed: bool = False,
    ) -> None:
        self.proc = proc
        self.shimmed = shimmed
        self.limits = limits
        self.plan = plan
        self.cgroup = cgroup
        self.out = OutputCapture(limits.output_bytes)
        self.err = OutputCapture(limits.output_bytes)
        self.reason: str | None = None
        self.drain_until: float | None = None
        self.next_check = 0.0

    def kill(self, reason: str | None) -> None:
        """SIGKILL the group (and the cgroup); then read what is left for a short grace."""
        if self.reason is None:
            self.reason = reason
        kill_group(self.proc, self.cgroup)
        grace = time.monotonic() + _DRAIN_GRACE_S
        self.drain_until = grace if self.drain_until is None else min(self.drain_until, grace)

    def parent_killed(self) -> str | None:
        """``parent signal N`` when the shim we started (the command's parent) died by a
        signal while something of the command still ran: we did not send it, so the
        command (or, rarely, the kernel's OOM killer) did. When the command itself dies by
        a signal, the shim reaps it first and then raises the same signal on itself, so
        the session is empty by then, unless the command left background processes
        behind; such a run is also read as a killed parent, which fails it either way."""
        code = self.proc.returncode
        if not self.shimmed or code is None or code >= 0:
            return None
        alive = self.cgroup.members() if self.cgroup is not None else []
        if alive or session_size(self.proc.pid) > 0:
            return f"parent signal {-code}"
        return None

    def over_process_limit(self) -> bool:
        """Checked at most every poll interval: a /proc scan is not free."""
        now = time.monotonic()
        if now < self.next_check:
            return False
        self.next_check = now + _POLL_S
        return over_process_limit(self.proc, self.cgroup, self.plan, self.limits.processes)

    def loop(
        self, stdin: bytes | None, deadline: float, stop: threading.Event | None = None
    ) -> None:
        selector = selectors.DefaultSelector()
        captures: dict[int, OutputCapture] = {}
        for stream, capture in ((self.proc.stdout, self.out), (self.proc.stderr, self.err)):
            if stream is not None:
                selector.register(stream, selectors.EVENT_READ)
                captures[stream.fileno()] = capture
        pending = memoryview(stdin or b"")
        writer = self.proc.stdin
        if writer is not None:
            os.set_blocking(writer.fileno(), False)
            if pending:
                selector.register(writer, selectors.EVENT_WRITE)
            else:
                writer.close()
        runaway = self.limits.runaway_bytes
        exited = False
        while True:
            now = time.monotonic()
            if self.drain_until is not None and now >= self.drain_until:
                break
            if self.drain_until is None and now >= deadline:
                self.kill("timeout")
                continue
            if self.drain_until is None and stop is not None and stop.is_set():
                self.kill("stopped")
                continue
            if not exited and self.proc.poll() is not None:
                exited = True
                self.kill(self.parent_killed())  # the main process is done: so are its leftovers
            if not selector.get_map():
                if exited:
                    break
                wait = min(_POLL_S, max(0.0, (self.drain_until or deadline) - now))
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.proc.wait(timeout=wait)
                continue
            wait = min(_POLL_S, max(0.0, (self.drain_until or deadline) - now))
            for key, _ in selector.select(timeout=wait):
                if writer is not None and key.fileobj is writer:
                    try:
                        pending = pending[os.write(key.fd, pending[:_READ_CHUNK]) :]
                    except BlockingIOError:
                        continue
                    except OSError:
                        pending = pending[:0]
                    if not pending:
                        selector.unregister(writer)
                        with contextlib.suppress(OSError):
                            writer.close()
                    continue
                chunk = os.read(key.fd, _READ_CHUNK)
                if not chunk:
                    selector.unregister(key.fileobj)
                    continue
                capture = captures[key.fd]
                capture.add(chunk)
                if capture.total > runaway and self.reason is None:
                    self.kill("output")
            if self.reason is None and not exited and self.over_process_limit():
                self.kill("processes")
        selector.close()
