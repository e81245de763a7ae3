"""xdist workers: the task that took one down. (The controller's own hooks are
controller.py; what a worker may run ahead in, and the scheduler that keeps its queue
deep, read xdist internals: see pytest_compat.py.)

Crashes: a verifier that ends its process (``os._exit``, a segfault, the OOM killer)
takes every rollout in flight on that worker with it, and xdist blames the item the
worker was on, which with look-ahead need not be the one verifying. So every
verification on a worker leaves a mark on disk while it runs (``VerifyMarks``); a dead
worker's marks name what it was verifying. The controller turns xdist's crash report
into a harness-error record that says so (``crash_record``), and a task that xdist sends
to another worker after its verification killed one is not verified again: its verifier
raises ``WorkerCrashed`` instead, a harness error with the same reason (``crash_reason``).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None  # type: ignore[assignment]

from pytest_agentbench.artifacts.record import record_without_rollout
from pytest_agentbench.core.task_record import TaskRecord
from pytest_agentbench.errors import WorkerCrashed
from pytest_agentbench.verifiers.base import Check, Verdict, Verifier

if TYPE_CHECKING:
    from pytest_agentbench.core.jsontypes import JsonObject, JsonValue


#: what ends a worker's process under a task (short: the one-line reason is cut at 100)
CRASH_CAUSES = "a verifier or plugin exited, or it was killed"


def crash_reason(worker: str, doing: str = "verifying") -> str:
    """Why a task is a harness error when worker ``worker`` died while ``doing`` it: one
    text, whether the controller reports the crash or the task, sent again, is refused."""
    return f"xdist worker {worker} crashed while {doing} this task: {CRASH_CAUSES}"


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

    @property
    def options_schema(self) -> Mapping[str, JsonValue]:
        return self.inner.options_schema  # read when used (a lazy verifier loads then)

    def __getattr__(self, name: str) -> object:
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
                raise WorkerCrashed(crash_reason(str(left.get("worker", "?"))))
            rollout_dir = check.verifier_dir.parent if check.verifier_dir is not None else None
            from pytest_agentbench.session.names import item_name

            mark = {
                "pid": os.getpid(),
                "worker": self.marks.worker,
                "key": task.key,
                # the item's name: its task id, or with several models or epochs
                # ``id[model:epochK]``, as the crashed item's node id ends
                "node": f"{task.path.as_posix()}::{item_name(task)}",
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


def _parse(data: bytes) -> JsonObject | None:
    try:
        mark = json.loads(data)
    except ValueError:
        return None
    return mark if isinstance(mark, dict) else None


def _read_mark(path: Path) -> JsonObject | None:
    try:
        return _parse(path.read_bytes())
    except OSError:
        return None


def crash_record(
    nodeid: str,
    worker: str,
    *,
    model: str,
    marks_dir: Path | None,
    suites: Mapping[str, str],
    start_ms: int | None,
    now_ms: int,
    sample: tuple[str, str, int] | None = None,
) -> TaskRecord:
    """The harness-error record the controller reports for ``nodeid``, which xdist says
    worker ``worker`` was running when it died. The worker's marks say whether this task
    was being verified then, or which others were. ``sample`` is the item's (task id,
    model name, epoch) when it is one of several models or epochs (names.item_parts)."""
    file, _, task_id = nodeid.rpartition("::")
    if sample is not None:
        task_id, model_name, _ = sample
        model = model_name or model
    marks = [m for m in _marks(marks_dir) if m.get("worker") == worker]
    own = [m for m in marks if _names(m, nodeid)]
    others = sorted(f"{m.get('suite')}/{m.get('task_id')}" for m in marks if m not in own)
    if own or not others:
        reason = crash_reason(worker, "verifying" if own else "running")
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
    )
    # labelled like a rollout's harness error, so a killer that xdist sends to another
    # worker (refused there with WorkerCrashed) reads the same
    record = replace(record, message=f"harness error: {reason}", crashed_worker=worker)
    if sample is not None and sample[2]:
        return replace(record, epoch=sample[2])
    return record


def interrupted_only(nodeid: str, worker: str, marks_dir: Path | None) -> bool:
    """Whether worker ``worker`` died verifying other tasks, not ``nodeid``: then
    ``nodeid`` was only in flight there and may run again elsewhere."""
    marks = [m for m in _marks(marks_dir) if m.get("worker") == worker]
    return bool(marks) and not any(_names(m, nodeid) for m in marks)


def _names(mark: Mapping[str, JsonValue], nodeid: str) -> bool:
    """Whether a mark's item (absolute suite path ``::`` item name; a mark without one:
    its task key) is the item ``nodeid`` (rootdir-relative path ``::`` item name)."""
    node = str(mark.get("node") or mark.get("key", ""))
    return node == nodeid or node.endswith("/" + nodeid)


def _marks(directory: Path | None) -> list[JsonObject]:
    if directory is None or not directory.is_dir():
        return []
    found = []
    for path in sorted(directory.glob("*.json")):
        mark = _read_mark(path)
        if mark is not None:
            found.append(mark)
    return found
