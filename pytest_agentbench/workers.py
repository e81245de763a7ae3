"""xdist workers: the queue a worker may run ahead in, and the task that took one down.

Look-ahead: on a worker ``session.items`` is the whole collection, but the worker runs
only the items the scheduler sends it; running ahead in ``session.items`` would start
tasks another worker runs too. ``worker_queue`` reads what this worker was sent.

Crashes: a verifier that ends its process (``os._exit``, a segfault, the OOM killer)
takes every rollout in flight on that worker with it, and xdist blames the item the
worker was on, which with look-ahead need not be the one verifying. So every
verification on a worker leaves a mark on disk while it runs (``VerifyMarks``); a dead
worker's marks name what it was verifying. The controller turns xdist's crash report
into a harness-error record that says so (``crash_record``), and a task that xdist sends
to another worker after its verification killed one is not verified again: its verifier
raises ``WorkerCrashed`` instead, a harness error like any crashing verifier.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None  # type: ignore[assignment]

from pytest_agentbench.artifacts.record import record_without_rollout
from pytest_agentbench.core.usage import sum_usage
from pytest_agentbench.errors import VerifierError
from pytest_agentbench.verifiers.base import Check, Verdict, Verifier


def find_interactor(config: pytest.Config) -> Any:
    """xdist's WorkerInteractor of this worker process, or None."""
    for plugin in config.pluginmanager.get_plugins():
        if type(plugin).__name__ == "WorkerInteractor" and hasattr(plugin, "torun"):
            return plugin
    return None


def worker_queue(config: pytest.Config, interactor: Any, item: Any, size: int) -> list[Any]:
    """``item``, then the items xdist sent this worker to run after it, ``size`` in all.

    Under ``--dist worksteal`` only the very next item counts: the rest of the queue may
    be taken back for another worker. An unreadable queue (another xdist version) gives
    just ``item``: slower, never wrong."""
    if interactor is None or size <= 1:
        return [item]
    indices: list[Any] = []
    following = getattr(interactor, "nextitem_index", None)
    if isinstance(following, int):
        indices.append(following)
    if config.getoption("dist", None) != "worksteal":
        indices.extend(_pending(getattr(interactor, "torun", None)))
    elif not indices:
        indices.extend(_pending(getattr(interactor, "torun", None))[:1])
    items = interactor.session.items
    ahead = [item]
    for index in indices:
        if len(ahead) >= size:
            break
        if isinstance(index, int) and 0 <= index < len(items) and items[index] is not item:
            ahead.append(items[index])
    return ahead


def _pending(queue: Any) -> list[Any]:
    lock = getattr(queue, "lock", None)
    if callable(lock):
        with lock() as pending:
            return list(pending)
    try:
        return list(queue or ())
    except RuntimeError:  # changed while copied: look ahead less this once
        return []


class WorkerCrashed(VerifierError):
    """This task's verification killed an xdist worker before; it is not run again."""


class VerifyMarks:
    """One small JSON file per verification in progress, in a folder every process of
    the run shares: ``{"pid", "worker", "key", "suite", "task_id", "rollout_dir"}``.
    Written before a verifier runs, removed after; a process that dies leaves its own."""

    def __init__(self, directory: Path, worker: str) -> None:
        self.directory = directory
        self.worker = worker

    def path(self, key: str) -> Path:
        return self.directory / f"{hashlib.sha256(key.encode()).hexdigest()[:24]}.json"

    def guard(self, verifier: Verifier) -> Verifier:
        return MarkedVerifier(verifier, self)


class MarkedVerifier:
    """A verifier that marks its verifications (see VerifyMarks) and refuses a task whose
    mark a dead process left behind."""

    def __init__(self, inner: Verifier, marks: VerifyMarks) -> None:
        self.inner = inner
        self.marks = marks
        self.kind = inner.kind
        self.options_schema = inner.options_schema

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def verify(self, check: Check) -> Verdict:
        task = check.task
        path = self.marks.path(task.key)
        self.marks.directory.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            if not _lock(fd):  # a live process verifies this very task (--dist each)
                return self.inner.verify(check)
            left = _parse(os.read(fd, 65536))
            if left is not None and left.get("pid") != os.getpid():
                raise WorkerCrashed(
                    f"xdist worker {left.get('worker', '?')} died while verifying this task "
                    f"(process {left.get('pid')}); not verified again"
                )
            rollout_dir = check.verifier_dir.parent if check.verifier_dir is not None else None
            mark = {
                "pid": os.getpid(),
                "worker": self.marks.worker,
                "key": task.key,
                "suite": task.suite,
                "task_id": task.id,
                "rollout_dir": str(rollout_dir) if rollout_dir is not None else None,
            }
            os.lseek(fd, 0, os.SEEK_SET)
            os.write(fd, json.dumps(mark).encode())
            try:
                return self.inner.verify(check)
            finally:
                with contextlib.suppress(OSError):
                    os.unlink(path)
        finally:
            os.close(fd)


def _lock(fd: int) -> bool:
    """Hold an exclusive lock on the mark for as long as ``fd`` is open (the system drops
    it when the process dies, however it dies); False when another process holds it.
    Without fcntl (Windows) every mark counts as unlocked."""
    if fcntl is None:
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False
    return True


def _parse(data: bytes) -> dict[str, Any] | None:
    try:
        mark = json.loads(data)
    except ValueError:
        return None
    return mark if isinstance(mark, dict) else None


def _read_mark(path: Path) -> dict[str, Any] | None:
    try:
        return _parse(path.read_bytes())
    except OSError:
        return None


def is_crash_report(report: pytest.TestReport) -> bool:
    """xdist's report for the item a worker was running when it died."""
    return report.failed and "crashed while running" in str(report.longrepr)


def crash_record(
    nodeid: str,
    worker: str,
    *,
    model: str,
    marks_dir: Path | None,
    suites: Mapping[str, str],
    start_ms: int | None,
    now_ms: int,
) -> dict[str, Any]:
    """The harness-error record the controller reports for ``nodeid``, which xdist says
    worker ``worker`` was running when it died. The worker's marks say whether this task
    was being verified then, or which others were."""
    file, _, task_id = nodeid.rpartition("::")
    marks = [m for m in _marks(marks_dir) if m.get("worker") == worker]
    own = [m for m in marks if _names(str(m.get("key", "")), nodeid)]
    others = sorted(f"{m.get('suite')}/{m.get('task_id')}" for m in marks if m not in own)
    if own or not others:
        doing = "verifying" if own else "running"
        reason = (
            f"xdist worker {worker} crashed while {doing} this task: its process died "
            "(a verifier or plugin exited, or the process was killed)"
        )
    else:
        reason = (
            f"xdist worker {worker} crashed while this task was in flight, verifying "
            f"{', '.join(others)}; run it again with --agentbench-resume"
        )
    rollout_dir = own[0].get("rollout_dir") if own else None
    start = start_ms if start_ms and 0 < start_ms <= now_ms else None
    suite = own[0].get("suite") if own else None
    record = record_without_rollout(
        nodeid=nodeid,
        file=file,
        suite=str(suite or suites.get(file, Path(file).stem.removeprefix("bench_"))),
        task_id=task_id,
        model=model,
        outcome="harness_error",
        cause=reason,
        failure_kind="harness",
        start_ms=start or 0,
        duration_ms=now_ms - start if start else 0,
        rollout_dir=str(rollout_dir) if rollout_dir else None,
        usage=sum_usage([]),
    )
    record["crashed_worker"] = worker
    return record


def interrupted_only(nodeid: str, worker: str, marks_dir: Path | None) -> bool:
    """Whether worker ``worker`` died verifying other tasks, not ``nodeid``: then
    ``nodeid`` was only in flight there and may run again elsewhere."""
    marks = [m for m in _marks(marks_dir) if m.get("worker") == worker]
    return bool(marks) and not any(_names(str(m.get("key", "")), nodeid) for m in marks)


def _names(key: str, nodeid: str) -> bool:
    """Whether a task key (absolute suite path ``::`` id) is the task of ``nodeid``
    (rootdir-relative path ``::`` id)."""
    return key == nodeid or key.endswith("/" + nodeid)


def _marks(directory: Path | None) -> list[dict[str, Any]]:
    if directory is None or not directory.is_dir():
        return []
    found = []
    for path in sorted(directory.glob("*.json")):
        mark = _read_mark(path)
        if mark is not None:
            found.append(mark)
    return found


def deep_load_scheduler(config: pytest.Config, log: Any, depth: int) -> Any:
    """xdist's ``load`` scheduler, keeping at least ``depth`` items queued on each worker
    while items are left (None when this xdist has no such scheduler to extend).

    xdist's own sizing keeps as few as two items queued per worker once fewer than eight
    per worker are pending, and holds back a worker whose last item took 0.1 s or more.
    That is right for tests that each take a core, but a worker here keeps
    ``--agentbench-concurrency`` rollouts in flight out of its queue (``worker_queue``):
    with two items queued it has two in flight. At the end of a run the workers may
    differ by up to ``depth`` items: a round of rollouts, not a round of tests."""
    try:
        from xdist.scheduler import LoadScheduling
    except ImportError:
        return None
    if not hasattr(LoadScheduling, "_send_tests"):
        return None

    # xdist ships no type information, so its class is Any here: subclassing Any is the
    # one thing strict mypy refuses in this module.
    class DeepLoadScheduling(LoadScheduling):  # type: ignore[misc]
        def schedule(self) -> None:
            super().schedule()
            for node in list(self.node2pending):
                self._top_up(node)

        def check_schedule(self, node: Any, duration: float = 0) -> None:
            super().check_schedule(node, duration)
            self._top_up(node)

        def _top_up(self, node: Any) -> None:
            pending = self.node2pending.get(node)
            if pending is None or node.shutting_down or not self.pending:
                return
            missing = min(depth - len(pending), len(self.pending))
            if missing > 0:
                self._send_tests(node, missing)

    return DeepLoadScheduling(config, log)
