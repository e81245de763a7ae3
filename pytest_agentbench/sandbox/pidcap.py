"""A pids cgroup per command: the one process bound that also holds for root.

``RLIMIT_NPROC`` counts every process of the user and is not enforced for root, so when
the machine lets us create a cgroup with a ``pids`` controller (cgroup v1 ``pids``, or a
v2 cgroup whose parent delegates ``pids``), each command runs in its own child cgroup with
``pids.max`` set: a fork past it fails with EAGAIN, and ``pids.events`` tells us it
happened. Nothing here raises for a machine without cgroups: :func:`pids_root` is None.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
import secrets
import signal
import time
from pathlib import Path

_PREFIX = "agentbench-"
_COUNTER = itertools.count()


def _mounts() -> list[tuple[str, str, str]]:
    """(mount point, fstype, super options) of every cgroup mount."""
    found = []
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            left, _, right = line.partition(" - ")
            fields, tail = left.split(), right.split()
            if len(fields) >= 5 and len(tail) >= 3 and tail[0] in ("cgroup", "cgroup2"):
                found.append((fields[4].replace("\\040", " "), tail[0], tail[2]))
    return found


def _candidates() -> list[Path]:
    """Our own cgroup in the v1 ``pids`` hierarchy and in the v2 hierarchy, when mounted."""
    own: dict[str, str] = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            if controllers == "":
                own["cgroup2"] = path
            elif "pids" in controllers.split(","):
                own["pids"] = path
    paths = []
    for point, fstype, options in _mounts():
        if fstype == "cgroup" and "pids" in options.split(",") and "pids" in own:
            paths.append(Path(point + own["pids"]))
        elif fstype == "cgroup2" and "cgroup2" in own:
            paths.append(Path(point + own["cgroup2"]))
    return paths


@functools.lru_cache(maxsize=1)
def pids_root() -> Path | None:
    """The cgroup under which per-command pids cgroups can be made, or None. Probed once
    per process by creating (and removing) a child cgroup."""
    for base in _candidates():
        probe = base / f"{_PREFIX}probe-{os.getpid()}-{secrets.token_hex(3)}"
        try:
            probe.mkdir()
        except OSError:
            continue
        usable = (probe / "pids.max").exists() and os.access(probe / "cgroup.procs", os.W_OK)
        with contextlib.suppress(OSError):
            probe.rmdir()
        if usable:
            return base
    return None


class PidsCgroup:
    """One command's pids cgroup: made before the command starts, joined by the command
    itself (``procs_file`` is written from the child before exec), removed afterwards."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.procs_file = str(path / "cgroup.procs")

    @classmethod
    def create(cls, max_pids: int) -> PidsCgroup | None:
        """A fresh cgroup allowing ``max_pids`` processes; None when cgroups are not
        usable here or the creation failed."""
        base = pids_root()
        if base is None:
            return None
        path = base / f"{_PREFIX}{os.getpid()}-{next(_COUNTER)}-{secrets.token_hex(3)}"
        try:
            path.mkdir()
            (path / "pids.max").write_text(str(max_pids))
        except OSError:
            with contextlib.suppress(OSError):
                path.rmdir()
            return None
        return cls(path)

    def refused(self) -> bool:
        """True once a fork was refused for hitting ``pids.max``."""
        try:
            text = (self.path / "pids.events").read_text()
        except OSError:
            return False
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            if key == "max" and value.strip().isdigit():
                return int(value) > 0
        return False

    def members(self) -> list[int]:
        try:
            text = Path(self.procs_file).read_text()
        except OSError:
            return []
        return [int(pid) for pid in text.split() if pid.isdigit()]

    def kill_all(self) -> None:
        """SIGKILL every member, including those that left the process group."""
        for pid in self.members():
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)

    def remove(self, wait_s: float = 2.0) -> None:
        """Kill what is left and remove the cgroup (the kernel refuses while members
        remain, so retry briefly; an empty leftover directory is harmless)."""
        deadline = time.monotonic() + wait_s
        while True:
            self.kill_all()
            try:
                self.path.rmdir()
                return
            except OSError:
                if time.monotonic() >= deadline:
                    return
                time.sleep(0.01)
