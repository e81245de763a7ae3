"""Every use of a pytest, pytest-xdist or pytest-timeout internal, in one place.

The rest of the plugin uses their public hooks and APIs only. What is here has no public
equivalent; each function says what it reads and why. tests/session/test_pytest_compat.py checks
every internal named here against the installed versions and names what changed, so an
upgrade that breaks one fails there, loudly, not somewhere in a run.

Every function degrades instead of raising where it can: a missing internal makes the
feature it serves slower or quieter (no look-ahead on a worker, no live line), never a
wrong result.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from typing import IO, TYPE_CHECKING, Protocol, TypeGuard

import pytest

if TYPE_CHECKING:
    from _pytest._io import TerminalWriter
    from execnet import XSpec

# --- xdist's and pytest-timeout's objects, as this plugin reads them -------------------
# Neither ships type information: each Protocol names what is read of one of their
# objects (xdist's own annotations say the same), so the rest of the plugin is typed.


class WorkerNode(Protocol):
    """xdist's ``WorkerController``: one worker, as the controller's hooks see it."""

    @property
    def config(self) -> pytest.Config: ...

    @property
    def workerinput(self) -> dict[str, object]: ...

    @property
    def shutting_down(self) -> bool: ...


class Scheduling(Protocol):
    """xdist's scheduler, as ``pytest_handlecrashitem`` hands it."""

    def mark_test_pending(self, item: str) -> None: ...


class WorkerInteractor(Protocol):
    """xdist's ``WorkerInteractor`` of a worker process (its queue is read with getattr:
    see worker_queue)."""

    @property
    def session(self) -> pytest.Session: ...


class TimeoutSettings(Protocol):
    """pytest-timeout's ``Settings`` (a namedtuple), as its timer hook hands it."""

    @property
    def timeout(self) -> float: ...

    def _replace(self, *, timeout: float) -> TimeoutSettings: ...


# --- pytest: the live status line -----------------------------------------------------


def terminal_stream(config: pytest.Config) -> tuple[TerminalWriter, IO[str]] | None:
    """pytest's terminal writer and the raw stream under it; None when there is none.

    The live status line writes backspaces that must not move the writer's own column
    count (``width_of_current_line``, which the line reads to know its room), so it
    writes to the stream beneath. ``TerminalWriter._file`` is that stream; pytest has no
    public accessor for it."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None:
        return None
    writer = config.get_terminal_writer()
    stream = getattr(writer, "_file", None)
    return None if stream is None else (writer, stream)


def uncaptured(config: pytest.Config) -> Callable[[], AbstractContextManager[None]] | None:
    """A context manager factory that suspends output capture (global and fixture), or
    None. ``CaptureManager.global_and_fixture_disabled`` is what pytest's own live
    logging uses; the capture manager's class is not exported."""
    capture = config.pluginmanager.get_plugin("capturemanager")
    found: Callable[[], AbstractContextManager[None]] | None = getattr(
        capture, "global_and_fixture_disabled", None
    )
    return found


# --- xdist worker: what this worker was sent ----------------------------------------


def find_interactor(config: pytest.Config) -> WorkerInteractor | None:
    """xdist's ``WorkerInteractor`` of this worker process, or None. xdist registers it
    as a plugin without a name; its queue (``torun``) is the only record of the items the
    controller sent this worker, which bounds what may run ahead here."""
    for plugin in config.pluginmanager.get_plugins():
        if _is_interactor(plugin):
            return plugin
    return None


def _is_interactor(plugin: object) -> TypeGuard[WorkerInteractor]:
    return type(plugin).__name__ == "WorkerInteractor" and hasattr(plugin, "torun")


def worker_queue(
    config: pytest.Config, interactor: WorkerInteractor | None, item: pytest.Item, size: int
) -> list[pytest.Item]:
    """``item``, then the items xdist sent this worker to run after it, ``size`` in all.

    Reads ``WorkerInteractor.nextitem_index`` (the next item, already taken off the
    queue), ``torun.lock()`` (the queue's deque, held still while copied) and
    ``interactor.session.items``. Under ``--dist worksteal`` only the very next item
    counts: the rest of the queue may be taken back for another worker. An unreadable
    queue (another xdist version) gives just ``item``: slower, never wrong."""
    if interactor is None or size <= 1:
        return [item]
    indices: list[object] = []
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


def _pending(queue: object) -> list[object]:
    lock = getattr(queue, "lock", None)
    if callable(lock):
        with lock() as pending:
            return list(pending)
    if not isinstance(queue, Iterable):  # None, or a queue of another xdist version
        return []
    try:
        return list(queue)
    except RuntimeError:  # changed while copied: look ahead less this once
        return []


# --- xdist controller: crashes and scheduling ----------------------------------------

#: What xdist's report for the item a dead worker was running says (DSession).
XDIST_CRASH_TEXT = "crashed while running"


def is_crash_report(report: pytest.TestReport) -> bool:
    """xdist's report for the item a worker was running when it died: a failed report
    whose text says so (xdist marks it no other way)."""
    return report.failed and XDIST_CRASH_TEXT in str(report.longrepr)


def report_worker(report: pytest.TestReport) -> str:
    """The id of the xdist worker (``gw0``…) a report came from, on the controller:
    xdist sets ``report.node`` (its WorkerController) without documenting it; "?" when
    absent."""
    gateway = getattr(getattr(report, "node", None), "gateway", None)
    return str(getattr(gateway, "id", "?"))


def give_workers_env(specs: Sequence[XSpec], env: dict[str, str]) -> None:
    """Have every xdist worker of ``specs`` (execnet ``XSpec``s, as handed to
    ``pytest_xdist_setupnodes``) set ``env`` in its ``os.environ`` over the execnet
    channel, right after it starts and before it imports pytest, so the values never
    reach the worker's command line or start-up environment block.

    ``XSpec.env`` (the ``env:NAME=value`` key) is execnet's public way; the internal is
    xdist's ``NodeManager.setup_node``, which makes a new spec from the string form of one
    whose ``execmodel`` is not ``main_thread_only`` (losing an ``env`` set on the object),
    so this sets that ``execmodel`` itself, as xdist would. A restarted worker reuses its
    predecessor's spec, ``env`` included."""
    for spec in specs:
        if getattr(spec, "execmodel", None) != "main_thread_only":
            spec.execmodel = "main_thread_only"
        spec.env.update(env)


def deep_load_scheduler(config: pytest.Config, log: object, depth: int) -> object | None:
    """xdist's ``load`` scheduler, keeping at least ``depth`` items queued on each worker
    while items are left (None when this xdist has no such scheduler to extend).

    xdist's own sizing keeps as few as two items queued per worker once fewer than eight
    per worker are pending, and holds back a worker whose last item took 0.1 s or more.
    That is right for tests that each take a core, but a worker here keeps
    ``--agentbench-concurrency`` rollouts in flight out of its queue (``worker_queue``):
    with two items queued it has two in flight. At the end of a run the workers may
    differ by up to ``depth`` items: a round of rollouts, not a round of tests.

    xdist offers a hook to supply a scheduler, not one to size its queues, so this
    subclasses ``LoadScheduling`` and uses its internals: ``node2pending``, ``pending``,
    ``_send_tests(node, num)`` and the worker's ``shutting_down``."""
    try:
        from xdist.scheduler import LoadScheduling
    except ImportError:
        return None
    if not hasattr(LoadScheduling, "_send_tests"):
        return None

    # xdist ships no type information, so mypy cannot see its class: subclassing an
    # unknown class is the one thing strict mypy refuses in this module.
    class DeepLoadScheduling(LoadScheduling):  # type: ignore[misc]
        def schedule(self) -> None:
            super().schedule()
            for node in list(self.node2pending):
                self._top_up(node)

        def check_schedule(self, node: WorkerNode, duration: float = 0) -> None:
            super().check_schedule(node, duration)
            self._top_up(node)

        def _top_up(self, node: WorkerNode) -> None:
            pending = self.node2pending.get(node)
            if pending is None or node.shutting_down or not self.pending:
                return
            missing = min(depth - len(pending), len(self.pending))
            if missing > 0:
                self._send_tests(node, missing)

    return DeepLoadScheduling(config, log)


# --- pytest-timeout ------------------------------------------------------------------


def set_timeout_timer(
    item: pytest.Item, settings: TimeoutSettings, timeout_s: float
) -> bool | None:
    """Set pytest-timeout's own timer for ``item`` at ``timeout_s`` instead of its limit.

    pytest-timeout's hook ``pytest_timeout_set_timer`` lets a plugin take the timer over
    but not change its length, so this calls pytest-timeout's own implementation with
    its ``Settings`` (a namedtuple) copied with another ``timeout``."""
    import pytest_timeout

    later = settings._replace(timeout=timeout_s)
    handled: bool | None = pytest_timeout.pytest_timeout_set_timer(item=item, settings=later)
    return handled
