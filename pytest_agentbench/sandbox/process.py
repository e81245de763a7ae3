"""Run one untrusted command: limits, a scrubbed environment, capped output, a sure kill.

The command runs in its own session and process group, with rlimits set in the child
before exec (CPU, address space, file size, open files, no core dumps, and processes where
``RLIMIT_NPROC`` means something), under the isolation plan's wrapper. One loop in the
calling thread feeds stdin, reads stdout and stderr as they come (keeping a head and a
tail of each, never more than the cap in memory), enforces the wall clock and the process
bound, and kills the whole group (and its pids cgroup) when anything runs over.

This module starts the command (its limits, environment and the child's setup before
exec) and says how it ended; the loop that watches it to its end is ``watch.py``'s.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import math
import os
import resource
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from pytest_agentbench.core.fastclass import dataclass
from pytest_agentbench.errors import SandboxError
from pytest_agentbench.sandbox.environ_guard import guard_harness, secret_like
from pytest_agentbench.sandbox.isolation import Plan, lost_mount_race, setup_pauses, wrap
from pytest_agentbench.sandbox.pidcap import PidsCgroup
from pytest_agentbench.sandbox.watch import WRAPPER_PROCESSES, CommandWatch, killed_by, signal_of

#: Output beyond this many times the cap kills the command (``killed_by="output"``).
RUNAWAY_FACTOR = 20
_SYSTEM_PATH = ("/usr/local/bin", "/usr/bin", "/bin")
#: The command's HOME and TMPDIR, inside the workspace.
HOME_DIR = ".home"
TMP_DIR = ".tmp"
_KEPT_HOST_VARS = ("LANG", "LC_ALL", "LC_CTYPE", "TZ")
_PR_CAPBSET_DROP = 24
_CAP_SYS_PTRACE = 19


@dataclass(frozen=True)
class Limits:
    """What one command may use. ``timeout_s`` is wall-clock seconds, ``cpu_s`` CPU
    seconds; ``output_bytes`` caps what is kept of stdout and of stderr (each)."""

    timeout_s: float = 30
    cpu_s: float = 30
    memory_mb: int = 1024
    processes: int = 64
    file_size_mb: int = 64
    open_files: int = 256
    output_bytes: int = 1_000_000

    def __post_init__(self) -> None:
        for name, value in vars(self).items():
            if not isinstance(value, int | float) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"sandbox limit {name} must be a positive number; got {value!r}")

    @property
    def runaway_bytes(self) -> int:
        """Output past this on stdout or on stderr kills the command (``killed_by``
        ``output``): a flood, not an answer."""
        return int(self.output_bytes * RUNAWAY_FACTOR)


@dataclass(frozen=True)
class CommandResult:
    """How a command ended. ``exit_code`` is None when it did not exit on its own (a
    signal, or we killed it). ``killed_by`` says why it stopped short: ``timeout``,
    ``output``, ``processes`` (we killed it), ``cpu``, ``file_size``, ``memory`` (a limit
    stopped it), ``signal N``, ``parent signal N`` (the shim that is the command's parent
    died by signal N, which we did not send: the command or its children killed it, and
    with it the command); None when it simply exited. ``truncated`` is True when
    stdout or stderr lost bytes to the cap (a marker in the text shows where)."""

    exit_code: int | None
    stdout: str
    stderr: str
    timed_out: bool
    killed_by: str | None
    truncated: bool
    elapsed_s: float


def sandbox_env(workspace: Path, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The whole environment of a sandboxed command, built from nothing: a minimal PATH
    (this Python's directory first), HOME and TMPDIR inside the workspace, UTF-8, no
    bytecode files, the locale of the host, and ``extra``. Raises SandboxError when
    ``extra`` names a variable that looks like a credential or a proxy setting."""
    env = {name: os.environ[name] for name in _KEPT_HOST_VARS if name in os.environ}
    env.setdefault("LANG", "C.UTF-8")
    env |= {
        "PATH": os.pathsep.join([os.path.dirname(sys.executable), *_SYSTEM_PATH]),
        "HOME": str(workspace / HOME_DIR),
        "TMPDIR": str(workspace / TMP_DIR),
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONNOUSERSITE": "1",
        "PYTHONUTF8": "1",
    }
    for name, value in (extra or {}).items():
        if secret_like(name):
            raise SandboxError(
                f"refusing to pass {name} into the sandbox: its name looks like a credential "
                "or proxy setting"
            )
        env[name] = value
    return env


def _rlimits(limits: Limits, nproc: int | None) -> list[tuple[int, tuple[int, int]]]:
    cpu = max(1, math.ceil(limits.cpu_s))
    if limits.cpu_s >= limits.timeout_s:
        # a one-thread spin spends CPU as fast as the wall clock runs: with equal budgets
        # which limit speaks first is a race; a second's grace lets the wall clock say
        # "timeout", and a command burning more than one core still meets the CPU limit
        cpu += 1
    memory = int(limits.memory_mb * 1024 * 1024)
    found = [
        (resource.RLIMIT_CPU, (cpu, cpu + 1)),
        (resource.RLIMIT_AS, (memory, memory)),
        (resource.RLIMIT_FSIZE, (int(limits.file_size_mb * 1024 * 1024),) * 2),
        (resource.RLIMIT_NOFILE, (int(limits.open_files),) * 2),
        (resource.RLIMIT_CORE, (0, 0)),
    ]
    if nproc is not None:
        found.append((resource.RLIMIT_NPROC, (nproc, nproc)))
    return found


def _user_process_count() -> int:
    uid, count = os.getuid(), 0
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                count += os.stat(entry.path).st_uid == uid
    return count


@functools.cache
def _ptrace_dropper() -> Callable[[], object] | None:
    """For root: a call that removes ``CAP_SYS_PTRACE`` from the bounding set, so the
    command (root, but without that capability after exec) cannot read a non-dumpable
    harness's ``/proc/<pid>/environ`` or ``mem``. None for other users (they never hold
    it) or where libc cannot be loaded."""
    if os.geteuid() != 0:
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)  # the process's own symbols hold libc's
        prctl = libc.prctl
    except (OSError, AttributeError):
        return None
    return functools.partial(prctl, _PR_CAPBSET_DROP, _CAP_SYS_PTRACE, 0, 0, 0)


def _preexec(
    limits: list[tuple[int, tuple[int, int]]],
    procs_file: str | None,
    drop_ptrace: Callable[[], object] | None = None,
) -> Callable[[], None]:
    """Runs in the child between fork and exec: only plain system calls, no imports."""
    setrlimit, os_open, os_write, os_close = resource.setrlimit, os.open, os.write, os.close
    flags = os.O_WRONLY

    def setup() -> None:
        if procs_file is not None:
            fd = os_open(procs_file, flags)
            os_write(fd, b"0")
            os_close(fd)
        if drop_ptrace is not None:
            drop_ptrace()
        for which, value in limits:
            setrlimit(which, value)

    return setup


def start_sandboxed(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    limits: Limits,
    plan: Plan,
    stdin: int,
    pass_fds: Sequence[int] = (),
    network: bool = False,
    read_only: Sequence[Path] = (),
    writable: Sequence[Path] = (),
) -> tuple[subprocess.Popen[bytes], PidsCgroup | None, float, list[str]]:
    """Start ``argv`` under ``plan`` and ``limits`` in a session of its own, its stdout and
    stderr piped: the process, its pids cgroup (None without one), when it started and
    the wrapped command line. The one place a sandboxed command is started (``run_command``
    waits for it; sandbox/live.py keeps talking to it). Raises SandboxError when it cannot
    be started."""
    nproc = None
    if plan.processes == "rlimit":
        nproc = _user_process_count() + int(limits.processes) + WRAPPER_PROCESSES
    cgroup = None
    if plan.processes == "cgroup":
        cgroup = PidsCgroup.create(int(limits.processes) + WRAPPER_PROCESSES)
    guard_harness()
    full = wrap(
        plan,
        list(argv),
        cwd,
        limits.timeout_s,
        network=network,
        read_only=read_only,
        writable=writable,
    )
    drop_ptrace = _ptrace_dropper() if plan.tool is None else None
    start = time.monotonic()
    try:
        proc = subprocess.Popen(
            full,
            cwd=cwd,
            env=dict(env),
            stdin=stdin,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            pass_fds=tuple(pass_fds),
            preexec_fn=_preexec(
                _rlimits(limits, nproc),
                cgroup.procs_file if cgroup is not None else None,
                drop_ptrace,
            ),
        )
    except (OSError, subprocess.SubprocessError) as exc:
        if cgroup is not None:
            cgroup.remove()
        raise SandboxError(f"could not start {full[0]!r} in {cwd}: {exc}") from None
    return proc, cgroup, start, full


def run_command(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    limits: Limits,
    plan: Plan,
    stdin: str | None = None,
    pass_fds: Sequence[int] = (),
    stop: threading.Event | None = None,
    network: bool = False,
    read_only: Sequence[Path] = (),
    writable: Sequence[Path] = (),
) -> CommandResult:
    """Run ``argv`` in ``cwd`` under ``plan`` and ``limits``; wait for it, however it ends.
    Raises SandboxError only when the command could not be started at all. ``stop``, once
    set, kills the command's whole group (``killed_by`` ``stopped``); ``network`` keeps
    the host's network in a namespaced plan (an agent under test reaching its gateway);
    ``read_only`` folders stay visible, read-only, inside the sandbox, ``writable`` ones
    writable (bubblewrap only). A bubblewrap start that lost the race with the host's
    mount table (``isolation.lost_mount_race``: nothing of the command ran) is tried
    again after a short pause, a few times."""
    pauses = setup_pauses() if plan.tool == "bwrap" else []
    while True:
        result = _run_once(
            argv,
            cwd=cwd,
            env=env,
            limits=limits,
            plan=plan,
            stdin=stdin,
            pass_fds=pass_fds,
            stop=stop,
            network=network,
            read_only=read_only,
            writable=writable,
        )
        if not pauses or not lost_mount_race(result.exit_code, result.stderr):
            return result
        if stop is not None and stop.is_set():
            return result
        time.sleep(pauses.pop(0))


def _run_once(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    limits: Limits,
    plan: Plan,
    stdin: str | None,
    pass_fds: Sequence[int],
    stop: threading.Event | None,
    network: bool,
    read_only: Sequence[Path],
    writable: Sequence[Path],
) -> CommandResult:
    proc, cgroup, start, full = start_sandboxed(
        argv,
        cwd=cwd,
        env=env,
        limits=limits,
        plan=plan,
        stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
        pass_fds=pass_fds,
        network=network,
        read_only=read_only,
        writable=writable,
    )
    run = CommandWatch(
        proc, limits, plan, cgroup, shimmed=plan.tool is None and len(full) > len(argv)
    )
    try:
        run.loop(
            stdin.encode("utf-8") if stdin is not None else None,
            start + limits.timeout_s,
            stop,
        )
    finally:
        if run.proc.poll() is None:
            run.kill(run.reason)
            run.proc.wait()
        for stream in (proc.stdout, proc.stderr, proc.stdin):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        if cgroup is not None:
            cgroup.remove()
    stderr = run.err.text()
    signum = None if run.reason is not None else signal_of(proc.returncode)
    exit_code = None if run.reason is not None or signum is not None else proc.returncode
    return CommandResult(
        exit_code=exit_code,
        stdout=run.out.text(),
        stderr=stderr,
        timed_out=run.reason == "timeout",
        killed_by=run.reason or killed_by(signum, exit_code, stderr[-4000:]),
        truncated=run.out.truncated or run.err.truncated,
        elapsed_s=time.monotonic() - start,
    )
