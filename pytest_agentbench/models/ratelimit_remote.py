"""The run's SharedLimit served to xdist workers over loopback TCP.

The controller serves its limit on 127.0.0.1 (``LimitService``, a line protocol) and
hands the address to the workers. Each worker's ``RemoteLimit`` asks over a connection
that stays open and carries the slot while its request runs: one round trip to acquire,
one one-way line to release. A worker that dies closes its connections and the service
frees what they held, so a crash never leaks a slot. A lock file in the run folder was
the alternative; it cannot wake a waiter when a slot frees (waiters poll), and the
adaptive window and the bucket would need a read-modify-write of shared state per request.
"""

from __future__ import annotations

import contextlib
import io
import socket
import socketserver
import threading
import time

from pytest_agentbench.core.durations import seconds_text
from pytest_agentbench.core.fastclass import dataclass
from pytest_agentbench.models.ratelimit import (
    LimitClosed,
    LimitTimeout,
    Outcome,
    Permit,
    SharedLimit,
)

_OUTCOMES: dict[str, Outcome] = {"ok": "ok", "limited": "limited", "error": "error"}


@dataclass
class _Line:
    """One connection to the service, with a buffered reader for its replies."""

    sock: socket.socket
    reader: io.BufferedReader

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            self.reader.close()
            self.sock.close()


class RemoteLimit:
    """The controller's SharedLimit, asked from an xdist worker over loopback TCP.

    A connection carries one request's slot at a time and is kept for the next one, so
    the steady cost is one round trip per grant. ``close`` shuts every connection, which
    wakes a thread waiting for a grant (LimitClosed)."""

    def __init__(self, address: str, *, connect_timeout_s: float = 10.0) -> None:
        host, _, port = address.rpartition(":")
        if host not in ("127.0.0.1", "localhost") or not port.isdigit():
            raise ValueError(f"the run's limit service listens on 127.0.0.1; got {address!r}")
        self.address = address
        self._target = ("127.0.0.1", int(port))
        self._connect_timeout_s = connect_timeout_s
        self._lock = threading.Lock()
        self._idle: list[_Line] = []
        self._lines: dict[int, _Line] = {}
        self._closed = False

    def acquire(self, timeout_s: float | None) -> Permit:
        line = self._checkout()
        started = time.monotonic()
        wait = "-" if timeout_s is None else f"{max(timeout_s, 0.0):.6f}"
        try:
            line.sock.sendall(f"acquire {wait}\n".encode())
            reply = line.reader.readline().split()
        except (OSError, ValueError):
            reply = []
        if reply[:1] == [b"ok"] and len(reply) == 2:
            return Permit(int(reply[1]), time.monotonic() - started, line)
        if reply == [b"timeout"]:
            self._checkin(line)
            raise LimitTimeout(
                f"no slot within {seconds_text(timeout_s or 0)} s (the run's limit service)"
            )
        self._drop(line)
        if self._closed or reply == [b"closed"]:
            raise LimitClosed("the run is stopping")
        raise LimitClosed(f"the run's limit service at {self.address} stopped answering")

    def release(self, permit: Permit, outcome: Outcome, retry_after_s: float | None = None) -> None:
        line = permit.handle
        if not isinstance(line, _Line):
            return
        after = "-" if retry_after_s is None else f"{retry_after_s:.3f}"
        try:
            line.sock.sendall(f"release {permit.epoch} {outcome} {after}\n".encode())
        except OSError:
            self._drop(line)  # the service frees a slot whose connection closed
            return
        self._checkin(line)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            lines = list(self._lines.values())
            self._idle.clear()
        for line in lines:
            line.close()

    def _checkout(self) -> _Line:
        with self._lock:
            if self._closed:
                raise LimitClosed("the run is stopping")
            if self._idle:
                return self._idle.pop()
        try:
            sock = socket.create_connection(self._target, timeout=self._connect_timeout_s)
        except OSError as exc:
            raise LimitClosed(
                f"cannot reach the run's limit service at {self.address}: {exc}"
            ) from None
        sock.settimeout(None)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        line = _Line(sock, sock.makefile("rb"))
        with self._lock:
            self._lines[id(line)] = line
            closed = self._closed
        if closed:
            self._drop(line)
            raise LimitClosed("the run is stopping")
        return line

    def _checkin(self, line: _Line) -> None:
        with self._lock:
            if not self._closed:
                self._idle.append(line)
                return
        self._drop(line)

    def _drop(self, line: _Line) -> None:
        with self._lock:
            self._lines.pop(id(line), None)
        line.close()


class _LimitServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 512

    def __init__(self, limit: SharedLimit) -> None:
        self.limit = limit
        self.connections: set[socket.socket] = set()
        self.connections_lock = threading.Lock()
        super().__init__(("127.0.0.1", 0), _LimitHandler)


class _LimitHandler(socketserver.StreamRequestHandler):
    """One worker connection: ``acquire <timeout|->`` answered ``ok <epoch>`` / ``timeout``
    / ``closed``; ``release <epoch> <outcome> <retry_after|->`` answered with nothing.
    Slots still held when the connection ends are given back."""

    server: _LimitServer

    def handle(self) -> None:
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with self.server.connections_lock:
            self.server.connections.add(self.connection)
        held: list[int] = []
        limit = self.server.limit
        try:
            for raw in self.rfile:
                words = raw.decode("ascii", "replace").split()
                if words[:1] == ["acquire"] and len(words) == 2:
                    timeout = None if words[1] == "-" else float(words[1])
                    try:
                        permit = limit.acquire(timeout)
                    except LimitTimeout:
                        self.wfile.write(b"timeout\n")
                        continue
                    except LimitClosed:
                        self.wfile.write(b"closed\n")
                        return
                    held.append(permit.epoch)
                    self.wfile.write(b"ok %d\n" % permit.epoch)
                elif words[:1] == ["release"] and len(words) == 4 and int(words[1]) in held:
                    epoch = int(words[1])
                    held.remove(epoch)
                    outcome = _OUTCOMES.get(words[2], "error")
                    after = None if words[3] == "-" else float(words[3])
                    limit.release(Permit(epoch), outcome, after)
        except (OSError, ValueError):
            pass
        finally:
            for epoch in held:
                limit.release(Permit(epoch), "error")
            with self.server.connections_lock:
                self.server.connections.discard(self.connection)


class LimitService:
    """Serves a SharedLimit to the run's other processes on 127.0.0.1 (a free port)."""

    def __init__(self, limit: SharedLimit) -> None:
        self.limit = limit
        self._server: _LimitServer | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> str:
        """Serve in a daemon thread; return the address, ``127.0.0.1:PORT``."""
        if self._server is None:
            self._server = _LimitServer(self.limit)
            self._thread = threading.Thread(
                target=self._server.serve_forever,
                kwargs={"poll_interval": 0.05},
                name="agentbench-limit",
                daemon=True,
            )
            self._thread.start()
        return f"127.0.0.1:{self._server.server_address[1]}"

    def stop(self) -> None:
        """Close the limit (waiters get ``closed``), stop serving, drop connections."""
        server, self._server = self._server, None
        if server is None:
            return
        self.limit.close()
        server.shutdown()
        with server.connections_lock:
            connections = list(server.connections)
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
        server.server_close()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
