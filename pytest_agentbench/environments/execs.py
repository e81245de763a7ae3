"""How one ``exec`` in a container runs: its mark, its deadline, its pipes.

Stopping an engine's ``exec`` client leaves its processes running inside the container,
so every ``exec`` carries a mark of its own in its environment (``EXEC_MARK``), and
ending it means killing, inside, every process carrying the mark (``KILL_MARKED``, run
by ``Container.kill_marked``). An ``exec`` either runs to its end with its output
captured (``Container.exec``: :func:`wait_for` and the pipe threads here), or stays open
while the caller talks to it over its stdin and stdout (:class:`LiveExec`: an ACP agent
in its task's container).

Podman drops an exec's output when its command ends while the client still has stdin
for it (measured: most of the time when the command exits at once, a request unread), so
a command given stdin reads what is left of it after it ended (``DRAIN_STDIN``), and a
live one says on stderr that it ended before it does so (``SAY_EXIT``): the caller
closes stdin then, and the exec ends with the command's status and all of its output.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from typing import IO

from pytest_agentbench.core.capture import OutputCapture
from pytest_agentbench.core.fastclass import dataclass

#: The environment variable that marks the processes of one ``exec``.
EXEC_MARK = "AGENTBENCH_EXEC"

#: Kills, inside the container, every process whose environment holds the mark given as
#: $1, in rounds until none is left (a process forked during a round is caught by the
#: next). PID 1 and the killer itself are spared.
KILL_MARKED = r"""
mark="$1"; self=$$; round=0
while [ "$round" -lt 50 ]; do
  found=0
  for p in /proc/[0-9]*; do
    pid=${p#/proc/}
    if [ "$pid" = 1 ] || [ "$pid" = "$self" ]; then continue; fi
    case "$(cat "$p/environ" 2>/dev/null)" in
      *"$mark"*) kill -9 "$pid" 2>/dev/null && found=1 ;;
    esac
  done
  [ "$found" = 0 ] && exit 0
  round=$((round + 1))
done
exit 1
"""

#: Runs "$@", then reads what is left of stdin, and exits with the command's status.
DRAIN_STDIN = '"$@"; status=$?; cat >/dev/null 2>&1; exit "$status"'

#: Runs "$@" after its first argument (a token), prints "<token> <status>" on a line of
#: stderr when the command ended, then reads stdin to its end and exits with the status.
SAY_EXIT = (
    'token=$1; shift; "$@"; status=$?; printf "\\n%s %s\\n" "$token" "$status" >&2; '
    'cat >/dev/null 2>&1; exit "$status"'
)

_POLL_S = 0.05


@dataclass(frozen=True)
class ExecResult:
    """How one ``exec`` ended. ``exit_code`` is None when it timed out or was killed;
    ``stdout`` and ``stderr`` keep head and tail within the cap asked for (``truncated``
    when either lost bytes); ``stopped`` when the caller's stop event ended it."""

    exit_code: int | None
    stdout: str
    stderr: str
    timed_out: bool
    elapsed_s: float
    truncated: bool = False
    stopped: bool = False


@dataclass
class RawExec:
    """An ``exec``'s outcome with its output as captured bytes (:meth:`Container.exec_raw`:
    for callers that need the bytes, e.g. a file's)."""

    exit_code: int | None
    stdout: OutputCapture
    stderr: OutputCapture
    timed_out: bool
    elapsed_s: float
    stopped: bool = False


@dataclass(frozen=True)
class LiveEnd:
    """How a :class:`LiveExec` ended: the command's exit status (None when it was
    killed: ``killed_by`` says why, the first reason given), its stderr (head and tail)."""

    exit_code: int | None
    stderr: str
    killed_by: str | None
    truncated: bool
    elapsed_s: float


class LiveExec:
    """An ``exec`` we talk to while it runs: ``stdin`` and ``stdout`` are open pipes, stderr
    is kept (head and tail within ``err_cap``) by a thread; a watcher ends it at its
    deadline (``timeout``) and when stderr passes ``runaway`` bytes (``output``).
    Ending it (:meth:`kill`, :meth:`finish`) kills every process of the exec inside the
    container, not only the engine's client. Made by ``Container.exec_live``."""

    def __init__(
        self,
        args: Sequence[str],
        *,
        environ: dict[str, str],
        mark: str,
        token: str,
        kill_inside: Callable[[str], None],
        timeout_s: float,
        err_cap: int,
        runaway: int,
    ) -> None:
        self.token = token.encode()
        self.mark = mark
        self._kill_inside = kill_inside
        self.start = time.monotonic()
        self.deadline = self.start + timeout_s
        self.runaway = runaway
        self.err = OutputCapture(err_cap)
        self.reason: str | None = None
        self.exit_status: int | None = None
        self._lock = threading.Lock()
        self._done = threading.Event()
        self.proc = subprocess.Popen(
            list(args),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            env=environ,
        )
        self._stderr = threading.Thread(target=self._read_stderr, daemon=True)
        self._watch = threading.Thread(target=self._watch_loop, daemon=True)
        self._stderr.start()
        self._watch.start()

    @property
    def stdin(self) -> IO[bytes]:
        assert self.proc.stdin is not None
        return self.proc.stdin

    @property
    def stdout(self) -> IO[bytes]:
        assert self.proc.stdout is not None
        return self.proc.stdout

    def _read_stderr(self) -> None:
        """Keep stderr; on the command's exit line, note its status and close stdin (the
        exec then ends: SAY_EXIT)."""
        stream = self.proc.stderr
        if stream is None:
            return
        marker = b"\n" + self.token + b" "
        carry = b""
        fd = stream.fileno()
        with stream:
            while chunk := _read_some(fd):
                carry += chunk
                found = carry.find(marker)
                if found >= 0 and carry.find(b"\n", found + len(marker)) >= 0:
                    line_end = carry.find(b"\n", found + len(marker))
                    status = carry[found + len(marker) : line_end].strip()
                    self.exit_status = int(status) if status.isdigit() else None
                    self.err.add(carry[:found])
                    carry = b""
                    with contextlib.suppress(OSError, ValueError):
                        self.stdin.close()
                    continue
                keep = len(marker) + 8
                if len(carry) > keep:
                    self.err.add(carry[:-keep])
                    carry = carry[-keep:]
                if self.err.total > self.runaway:
                    self.kill("output")
        self.err.add(carry)

    def _watch_loop(self) -> None:
        while not self._done.is_set():
            if time.monotonic() >= self.deadline:
                self.kill("timeout")
                return
            if self.proc.poll() is not None:
                return
            self._done.wait(_POLL_S)

    def kill(self, reason: str | None) -> None:
        """End the exec: every process carrying its mark, inside, and the engine's client;
        the first reason given is kept."""
        with self._lock:
            if self.reason is None and self.exit_status is None:
                self.reason = reason
        with contextlib.suppress(Exception):  # a container gone: its processes are too
            self._kill_inside(self.mark)
        with contextlib.suppress(OSError):
            self.proc.kill()

    def wait(self, timeout: float) -> bool:
        """True when the exec ended within ``timeout`` seconds (or its command did, having
        said so on stderr)."""
        end = time.monotonic() + max(0.0, timeout)
        while True:
            if self.proc.poll() is not None or self.exit_status is not None:
                return True
            left = end - time.monotonic()
            if left <= 0:
                return False
            time.sleep(min(left, _POLL_S))

    def exit_code(self) -> int | None:
        """The command's exit status once it ended (said so, or its exec is over), else
        None."""
        if self.exit_status is not None:
            return self.exit_status
        return self.proc.poll()

    def stderr_text(self) -> str:
        """What is kept of its stderr so far."""
        return self.err.text()

    def finish(self, reason: str | None = None) -> LiveEnd:
        """End it (``reason`` when it still runs), reap the client, say how it ended."""
        if self.exit_status is None and self.proc.poll() is None:
            self.kill(reason)
        with contextlib.suppress(OSError, ValueError):
            self.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.kill(reason)
            self.proc.wait()
        self._done.set()
        self._watch.join(5)
        self._stderr.join(5)
        with contextlib.suppress(OSError, ValueError):
            self.stdout.close()
        code = self.exit_status if self.exit_status is not None else self.proc.returncode
        return LiveEnd(
            exit_code=None if self.reason is not None or code is None or code < 0 else code,
            stderr=self.err.text(),
            killed_by=self.reason,
            truncated=self.err.truncated,
            elapsed_s=time.monotonic() - self.start,
        )


def _read_some(fd: int) -> bytes:
    try:
        return os.read(fd, 65536)
    except OSError:
        return b""


def wait_for(
    process: subprocess.Popen[bytes], deadline: float, stop: threading.Event | None
) -> int | None:
    """``process``'s exit status, or None once ``deadline`` passed or ``stop`` was set."""
    while True:
        left = deadline - time.monotonic()
        if stop is not None and stop.is_set():
            return None
        if left <= 0:
            return None
        try:
            return process.wait(timeout=min(left, 0.1) if stop is not None else left)
        except subprocess.TimeoutExpired:
            continue


def drain(stream: IO[bytes] | None, capture: OutputCapture) -> None:
    """Read ``stream`` to its end into ``capture``."""
    if stream is None:
        return
    with stream:
        while chunk := stream.read1(65536) if hasattr(stream, "read1") else stream.read(65536):
            capture.add(chunk)


def feed(stream: IO[bytes] | None, data: bytes) -> None:
    """Write ``data`` to ``stream`` and close it (a command gone early is no error)."""
    if stream is None:
        return
    try:
        with stream:
            stream.write(data)
    except OSError:
        return
