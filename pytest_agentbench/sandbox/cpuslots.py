"""CPU slots: at most one verification per core at a time on this machine.

A model call waits on the network; a verification keeps a core busy. Rollouts in flight
(``--agentbench-concurrency``) are sized for the first, so the code-running verifiers take
a slot here for the second: one of ``slot_count()`` lock files in a per-user directory,
held with ``flock`` for the length of one sandboxed command. The locks are the kernel's,
so they bound every thread of this process, every xdist worker and every other run of this
user on the machine together, and a process that dies releases its slot with it.
``AGENTBENCH_VERIFY_SLOTS`` sets the count (default: the cores this process may use).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

SLOTS_VARIABLE = "AGENTBENCH_VERIFY_SLOTS"


def slot_count() -> int:
    """How many sandboxed verifications may run at once on this machine."""
    raw = os.environ.get(SLOTS_VARIABLE, "").strip()
    if raw:
        try:
            value = int(raw)
        except ValueError:
            raise ValueError(
                f"{SLOTS_VARIABLE}={raw!r} is not a whole number; give the number of "
                "verifications that may run at once (at least 1)"
            ) from None
        if value < 1:
            raise ValueError(f"{SLOTS_VARIABLE}={raw!r}: give at least 1")
        return value
    return max(1, len(os.sched_getaffinity(0)))


def slots_dir() -> Path:
    """The directory of the lock files (per user, in the system's temporary directory)."""
    path = Path(tempfile.gettempdir()) / f"agentbench-cpu-slots-{os.getuid()}"
    path.mkdir(mode=0o700, exist_ok=True)
    return path


@contextlib.contextmanager
def cpu_slot() -> Iterator[int]:
    """Hold one slot (its number) for the ``with`` body; wait for one when all are taken."""
    count = slot_count()
    directory = slots_dir()
    descriptors: list[int] = []
    try:
        for number in range(count):
            fd = os.open(directory / f"slot-{number}", os.O_RDWR | os.O_CREAT, 0o600)
            descriptors.append(fd)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue
            yield number
            return
        # every slot is taken: wait on one, spread by process and thread
        number = (os.getpid() + id(descriptors)) % count
        fcntl.flock(descriptors[number], fcntl.LOCK_EX)
        yield number
    finally:
        for fd in descriptors:
            os.close(fd)  # closing the descriptor releases its lock
