"""The live status line: what is in flight while an item waits for its rollout, so a long
generation never looks hung.

Only on a terminal, never under ``-q`` or xdist. The line is written after whatever pytest
has already put on the current line and erased with backspaces before pytest writes again,
so pytest's own progress output is never disturbed.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import field
from typing import IO

from pytest_agentbench.core.fastclass import dataclass
from pytest_agentbench.core.stream import StreamEvent

CHARS_PER_TOKEN = 4


@dataclass
class _Progress:
    label: str
    started: float = field(default_factory=time.monotonic)
    phase: str = "waiting"
    chars: int = 0
    reported_tokens: int | None = None
    loop_score: float = 0.0

    def tokens(self) -> str:
        if self.reported_tokens is not None:
            return f"{self.reported_tokens:,} tok"
        return f"~{self.chars // CHARS_PER_TOKEN:,} tok" if self.chars else ""


class LiveStatus:
    """In-flight rollouts and what each is doing. Thread-safe: rollout threads report,
    the main thread renders."""

    def __init__(self) -> None:
        self._tasks: dict[str, _Progress] = {}
        self._lock = threading.Lock()

    def begin(self, key: str, label: str) -> None:
        with self._lock:
            self._tasks[key] = _Progress(label)

    def end(self, key: str) -> None:
        with self._lock:
            self._tasks.pop(key, None)

    def phase(self, key: str, phase: str) -> None:
        with self._lock:
            if key in self._tasks:
                self._tasks[key].phase = phase

    def event(self, key: str, event: StreamEvent) -> None:
        with self._lock:
            progress = self._tasks.get(key)
            if progress is None:
                return
            if event.kind in ("text", "thinking"):
                progress.chars += len(event.text)
                progress.phase = "answering" if event.kind == "text" else "thinking"
            elif event.kind == "loop":
                score = event.data.get("score", 0.0)
                progress.loop_score = float(score) if isinstance(score, int | float) else 0.0
            elif event.kind == "usage":
                output = event.data.get("completion_tokens", event.data.get("output_tokens"))
                if isinstance(output, int) and not isinstance(output, bool):
                    progress.reported_tokens = output

    def line(self, key: str) -> str:
        """The status of ``key`` (the task being waited for) and how many others run."""
        with self._lock:
            progress = self._tasks.get(key)
            others = len(self._tasks) - (1 if progress else 0)
            if progress is None:
                return ""
            elapsed = time.monotonic() - progress.started
            parts = [f"{progress.phase} {elapsed:.1f}s"]
            if progress.tokens():
                parts.append(progress.tokens())
            if progress.loop_score >= 0.5:
                parts.append(f"loop {progress.loop_score:.1f}")
            if others:
                parts.append(f"+{others} in flight")
            return " · ".join(parts)


class StatusWriter:
    """Writes a transient status at the end of the current terminal line."""

    def __init__(
        self,
        stream: IO[str],
        width: int,
        column: Callable[[], int],
        uncaptured: Callable[[], AbstractContextManager[object]] | None = None,
    ) -> None:
        self._stream = stream
        self._width = width
        self._column = column  # the current line's width so far
        self._uncaptured = uncaptured or contextlib.nullcontext
        self._shown = 0

    def show(self, text: str) -> None:
        room = max(0, self._width - int(self._column()) - 2)
        text = f" {text}"[:room]
        with self._uncaptured():  # output capture would swallow it otherwise
            self._erase(len(text))
            self._stream.write(text)
            self._stream.flush()
        self._shown = len(text)

    def clear(self) -> None:
        if not self._shown:
            return
        with self._uncaptured():
            self._erase(0)
            self._stream.flush()

    def _erase(self, next_length: int) -> None:
        if self._shown:
            blank = max(self._shown, next_length)
            self._stream.write("\b" * self._shown + " " * blank + "\b" * blank)
            self._shown = 0
