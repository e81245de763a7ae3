"""Processes started from one thread that lives as long as the harness process.

The kernel's parent-death signal (``PR_SET_PDEATHSIG``, bubblewrap's
``--die-with-parent``) is sent when the *thread* that started a process ends, not the
process: a fork server started from a rollout's thread would die with that thread. Its
start is handed to this one thread instead (sandbox/forkserver.py).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")
_launcher_lock = threading.Lock()

_launches: queue.Queue[tuple[Callable[[], None], threading.Event]] = queue.Queue()
_launcher: list[threading.Thread] = []


def _launch_loop() -> None:
    while True:
        call, done = _launches.get()
        call()
        done.set()


def from_launcher(start: Callable[[], T]) -> T:
    """``start()`` called in one thread that lives as long as the process. bubblewrap's
    ``--die-with-parent`` is the kernel's parent-death signal, sent when the *thread* that
    started it ends; a server started from a rollout's thread would die with that thread."""
    with _launcher_lock:
        if not _launcher:
            thread = threading.Thread(
                target=_launch_loop, name="agentbench-forkserver", daemon=True
            )
            thread.start()
            _launcher.append(thread)
    results: list[T] = []
    errors: list[BaseException] = []

    def call() -> None:
        try:
            results.append(start())
        except BaseException as exc:  # handed back to the caller
            errors.append(exc)

    done = threading.Event()
    _launches.put((call, done))
    done.wait()
    if errors:
        raise errors[0]
    return results[0]
