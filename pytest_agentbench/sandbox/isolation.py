"""Which isolation this machine gives sandboxed commands, and how a command is wrapped in it.

Levels, best first, detected at run time by trying each tool once per process:

- ``strong`` — bubblewrap (``bwrap``): no network, the host read-only, a private ``/tmp``,
  ``/proc`` and pid namespace (host processes are invisible, so their environments are
  too), every capability dropped; only the workspace is writable.
- ``basic`` with ``unshare`` (util-linux): no network and a private pid namespace with its
  own ``/proc``, but the host file system stays writable for the command's user.
- ``basic`` without a tool: rlimits, a scrubbed environment and an own process group only.
  The command runs as our user: it can read what we can read, including our own
  ``/proc/<pid>/environ``.

Processes are bounded by a pids cgroup when one can be made (exact, holds for root), else
by ``RLIMIT_NPROC`` (not enforced for root), else (root without cgroups) by a watcher that
counts the command's session and kills it past the limit — ``processes`` in the report.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from pytest_agentbench.core.choices import ISOLATION_MODES as ISOLATION_MODES
from pytest_agentbench.core.choices import Isolation as Isolation
from pytest_agentbench.core.fastclass import dataclass
from pytest_agentbench.core.jsontypes import JsonObject
from pytest_agentbench.errors import SandboxError
from pytest_agentbench.sandbox.environ_guard import guard_harness
from pytest_agentbench.sandbox.pidcap import pids_root

#: Directories tried for the tools, so a scrubbed or odd PATH cannot hide or fake them.
_TOOL_PATH = "/usr/bin:/bin:/usr/sbin:/sbin:/usr/local/bin"
_PROBE_TIMEOUT_S = 10.0
#: Size of the private /tmp under bubblewrap (RAM-backed, so it is capped).
TMPFS_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class Plan:
    """How commands are contained. ``network`` says whether a command can reach the
    network; ``readonly_host`` whether everything outside the workspace is read-only;
    ``processes`` names the process bound: ``cgroup``, ``rlimit`` or ``watch``."""

    level: str
    tool: str | None
    network: bool
    readonly_host: bool
    processes: str
    detail: str

    def as_dict(self) -> JsonObject:
        return {
            "level": self.level,
            "tool": self.tool,
            "network": self.network,
            "readonly_host": self.readonly_host,
            "processes": self.processes,
            "detail": self.detail,
        }


def _tool(name: str) -> str | None:
    return shutil.which(name, path=_TOOL_PATH)


def _runtime_binds() -> list[str]:
    """Read-only binds that bring back, over the private ``/tmp``, what commands need from
    there: the Python running us (a virtualenv or a checkout may live under /tmp, as in a
    CI clone) and this package (the inner test plugin is loaded from it by path)."""
    import site
    import sys

    package = Path(__file__).resolve().parents[1]
    wanted = {
        sys.prefix,
        sys.exec_prefix,
        sys.base_prefix,
        os.path.dirname(os.path.realpath(sys.executable)),
        str(package),
        *site.getsitepackages(),
    }
    binds: list[str] = []
    for path in sorted(wanted):
        real = os.path.realpath(path)
        if (real == "/tmp" or real.startswith("/tmp/")) and os.path.isdir(real):
            binds += ["--ro-bind", real, real]
            if path != real and (path == "/tmp" or path.startswith("/tmp/")):
                binds += ["--ro-bind", real, path]
    return binds


def bwrap_args(
    bwrap: str,
    workspace: Path,
    read_only: Sequence[Path] = (),
    writable: Sequence[Path] = (),
) -> list[str]:
    """The bubblewrap command line before ``--`` for a command in ``workspace``;
    ``read_only`` folders (or files) under the private ``/tmp`` are bound back read-only
    and ``writable`` ones (a socket's folder) writable, before the workspace, which may
    lie inside one of them and stays writable."""
    ws = str(workspace)
    kept: list[str] = []
    for how, folders in (("--ro-bind", read_only), ("--bind", writable)):
        for folder in folders:
            real = os.path.realpath(folder)
            if (real == "/tmp" or real.startswith("/tmp/")) and os.path.exists(real):
                kept += [how, real, real]
    return [
        bwrap,
        "--die-with-parent",
        "--unshare-all",
        "--cap-drop",
        "ALL",
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        "--size",
        str(TMPFS_BYTES),
        "--tmpfs",
        "/tmp",
        *_runtime_binds(),
        *kept,
        "--bind",
        ws,
        ws,
        "--chdir",
        ws,
    ]


def unshare_args(unshare: str) -> list[str]:
    """The unshare command line before ``--``: new network, pid and mount namespaces with
    a private ``/proc``; as a normal user inside a user namespace."""
    user = [] if os.geteuid() == 0 else ["--user", "--map-root-user"]
    return [unshare, *user, "--net", "--pid", "--fork", "--kill-child", "--mount-proc"]


#: The parent shim when coreutils' ``timeout`` is missing or refuses our arguments (as
#: some minimal ``timeout`` builds do): it runs the command as its child, passes on its
#: exit status or signal, and kills its whole process group at the deadline, so neither a
#: dead harness nor a ``kill(getppid())`` leaves the command unsupervised or the harness hit.
_PYTHON_SHIM = """\
import os, signal, sys
deadline, argv = float(sys.argv[1]), sys.argv[2:]
pid = os.fork()
if pid == 0:
    try:
        os.execvp(argv[0], argv)
    except OSError as exc:
        os.write(2, f"{argv[0]}: {exc.strerror}\\n".encode())
    os._exit(127)
signal.signal(signal.SIGALRM, lambda *_: os.killpg(0, signal.SIGKILL))
signal.setitimer(signal.ITIMER_REAL, deadline)
status = os.waitpid(pid, 0)[1]
if os.WIFSIGNALED(status):
    signal.signal(os.WTERMSIG(status), signal.SIG_DFL)
    os.kill(os.getpid(), os.WTERMSIG(status))
    os._exit(128 + os.WTERMSIG(status))
os._exit(os.WEXITSTATUS(status))
"""


@functools.cache
def _timeout_usable() -> str | None:
    """coreutils' ``timeout`` when it is installed and accepts ``-k``; else None."""
    tool = _tool("timeout")
    if tool is None:
        return None
    true = _tool("true") or "/bin/true"
    return tool if _probe([tool, "-k", "1", "5", true]) is None else None


def timeout_shim(timeout_s: float) -> list[str]:
    """The command's parent: it waits for the command and passes on its exit status or
    signal, so a command that kills its parent kills only this shim, never the harness;
    and it stops the command if the harness itself dies. ``timeout``, else a Python one."""
    deadline = f"{timeout_s + 2:g}"
    tool = _timeout_usable()
    if tool is not None:
        return [tool, "-k", "1", deadline]
    import sys

    return [sys.executable, "-I", "-S", "-c", _PYTHON_SHIM, deadline]


def probe_env() -> dict[str, str]:
    """A probe's whole environment: the tool path and the locale, nothing that could
    carry a key (a probe is a process of ours that another could read while it runs)."""
    env = {name: os.environ[name] for name in ("LANG", "LC_ALL") if name in os.environ}
    return env | {"PATH": _TOOL_PATH}


#: How often a bubblewrap start that lost the mount-table race is tried again, and the
#: first pause between tries (doubled each time).
SETUP_RETRIES, SETUP_PAUSE_S = 7, 0.005


def lost_mount_race(exit_code: int | None, stderr: str) -> bool:
    """Whether bubblewrap failed while setting up its sandbox, before the command ran,
    because the host's mount table changed under it (bubblewrap issue 650: it remounts each
    mount below ``/`` read-only, and one that is unmounted meanwhile fails the remount).
    Containers starting and stopping on the host do exactly that; the start is safe to try
    again, since nothing of the command ran. The message names bubblewrap's own
    ``/newroot/`` staging path, which no command's output starts with."""
    first = stderr.lstrip().partition("\n")[0]
    return exit_code == 1 and first.startswith("bwrap: Can't ") and "/newroot/" in first


def setup_pauses() -> list[float]:
    """The pauses before each further try of a bubblewrap start that lost the race."""
    return [SETUP_PAUSE_S * 2**n for n in range(SETUP_RETRIES)]


def _probe(argv: list[str]) -> str | None:
    """None when ``argv`` runs and exits 0; else why not, in a few words."""
    try:
        for pause in [*setup_pauses(), None]:
            done = subprocess.run(
                argv,
                capture_output=True,
                text=True,
                timeout=_PROBE_TIMEOUT_S,
                check=False,
                stdin=subprocess.DEVNULL,
                env=probe_env(),
            )
            if pause is None or not lost_mount_race(done.returncode, done.stderr):
                break
            time.sleep(pause)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"{type(exc).__name__}: {exc}"
    if done.returncode == 0:
        return None
    lines = [line for line in done.stderr.strip().splitlines() if line.strip()]
    return f"exit {done.returncode}" + (f": {lines[-1][:200]}" if lines else "")


def _processes() -> tuple[str, str]:
    if pids_root() is not None:
        return "cgroup", "processes bounded by a pids cgroup"
    if os.geteuid() != 0:
        return "rlimit", "processes bounded by RLIMIT_NPROC (counts all of this user's)"
    return "watch", "running as root without a usable pids cgroup: a watcher bounds processes"


@functools.cache
def plan_for(isolation: str = "auto") -> Plan:
    """The containment commands get under ``isolation`` (one of :data:`ISOLATION_MODES`),
    probed once per process. Raises SandboxError for ``strict`` without bubblewrap."""
    if isolation not in ISOLATION_MODES:
        modes = ", ".join(ISOLATION_MODES)
        raise SandboxError(f"unknown sandbox isolation {isolation!r}; use one of: {modes}")
    guard_harness()  # a process that plans to run untrusted code hides its secrets first
    processes, processes_note = _processes()
    notes: list[str] = []
    if isolation != "basic":
        bwrap = _tool("bwrap")
        if bwrap is None:
            notes.append("bwrap not installed (Debian package: bubblewrap)")
        else:
            with tempfile.TemporaryDirectory(prefix="agentbench-probe-") as scratch:
                true = _tool("true") or "/bin/true"
                failed = _probe([*bwrap_args(bwrap, Path(scratch)), "--", true])
            if failed is None:
                detail = (
                    "bubblewrap: no network, read-only host, private /tmp, /proc and pid "
                    f"namespace, capabilities dropped; {processes_note}"
                )
                return Plan("strong", "bwrap", False, True, processes, detail)
            notes.append(f"bwrap refused: {failed}")
    if isolation == "strict":
        raise SandboxError(
            "strict sandbox: strong isolation is not available on this machine "
            f"({'; '.join(notes)}); install bubblewrap or allow the basic sandbox"
        )
    if isolation == "auto":
        unshare = _tool("unshare")
        if unshare is None:
            notes.append("unshare not installed (util-linux)")
        else:
            true = _tool("true") or "/bin/true"
            failed = _probe([*unshare_args(unshare), "--", true])
            if failed is None:
                detail = (
                    "unshare: no network, private pid namespace and /proc; the host file "
                    f"system is writable ({'; '.join(notes)}); {processes_note}"
                )
                return Plan("basic", "unshare", False, False, processes, detail)
            notes.append(f"unshare refused: {failed}")
    else:
        notes.append("namespaces not used (isolation=basic)")
    detail = (
        "rlimits, scrubbed environment, own process group; network and host file system "
        f"reachable ({'; '.join(notes)}); {processes_note}"
    )
    return Plan("basic", None, True, False, processes, detail)


def containment(isolation: str = "auto") -> JsonObject:
    """What isolation sandboxed commands get on this machine: ``level`` (``strong`` /
    ``basic``), ``tool`` (``bwrap`` / ``unshare`` / None), ``network`` (True when a command
    can reach the network), ``readonly_host``, ``processes`` (the process bound) and
    ``detail`` (a sentence, including why a better level was not used)."""
    return plan_for(isolation).as_dict()


def wrap(
    plan: Plan,
    argv: list[str],
    workspace: Path,
    timeout_s: float,
    *,
    network: bool = False,
    read_only: Sequence[Path] = (),
    writable: Sequence[Path] = (),
) -> list[str]:
    """``argv`` as run under ``plan``, with the parent shim where the plan needs one.
    ``network`` keeps the host's network namespace (everything else stays contained);
    ``read_only`` folders are visible read-only even where the plan hides them (under the
    private ``/tmp``: an agent's own program next to its suite)."""
    if plan.tool == "bwrap":
        bwrap = _tool("bwrap")
        if bwrap is None:
            raise SandboxError("bwrap disappeared since the sandbox was probed")
        shared = ["--share-net"] if network else []
        return [*bwrap_args(bwrap, workspace, read_only, writable), *shared, "--", *argv]
    if plan.tool == "unshare":
        unshare = _tool("unshare")
        if unshare is None:
            raise SandboxError("unshare disappeared since the sandbox was probed")
        own = [arg for arg in unshare_args(unshare) if not (network and arg == "--net")]
        return [*own, "--", *timeout_shim(timeout_s), *argv]
    return [*timeout_shim(timeout_s), *argv]
