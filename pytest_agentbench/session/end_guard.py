"""The guard around the end of a run: a Ctrl-C or SIGTERM while the reports and the
terminal summary are written (session/finish.py) is noted and they are finished; a
second one interrupts at once.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Generator, Iterator
from types import FrameType

import pytest

from pytest_agentbench.session.stash import STATE_KEY


@contextlib.contextmanager
def held_interrupts() -> Iterator[list[int]]:
    """Hold SIGINT and SIGTERM while the block runs: the first one is noted (the yielded
    list gets its number) and the block carries on; a second one interrupts at once, as
    a user who insists expects. Outside the main thread nothing is held."""
    held: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield held
        return

    def hold(signum: int, frame: FrameType | None) -> None:
        if held:
            raise KeyboardInterrupt(f"signal {signum}")
        held.append(signum)

    previous = {}
    for signum in (signal.SIGINT, signal.SIGTERM):
        try:
            previous[signum] = signal.signal(signum, hold)
        except (ValueError, OSError):  # pragma: no cover - no such signal here
            continue
    try:
        yield held
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


class SessionEndGuard:
    """Wraps the end of the session (our reports, then pytest's terminal summary with
    our section): a signal there no longer ends in a KeyboardInterrupt traceback and a
    half-written summary. The run's exit status then says it was interrupted."""

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_sessionfinish(
        self, session: pytest.Session, exitstatus: int
    ) -> Generator[None, object, object]:
        with held_interrupts() as held:
            result = yield
        if held:
            state = session.config.stash.get(STATE_KEY, None)
            name = signal.Signals(held[0]).name
            reporter = session.config.pluginmanager.get_plugin("terminalreporter")
            if reporter is not None:
                written = state is not None and (state.results.records or state.folder.started)
                what = "the reports above are complete" if written else "nothing was written"
                reporter.write_line(f"agentbench: {name} while the run was ending; {what}")
            session.exitstatus = pytest.ExitCode.INTERRUPTED
        return result
