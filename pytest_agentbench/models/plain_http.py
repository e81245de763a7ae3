"""Our own HTTP/1.1 on plain sockets, for the requests of an ``http://`` endpoint reached
directly (no environment proxy, no credentials in the URL: models/connections.py
decides): a request's bytes written, the reply's status and headers parsed, its body
handed on as it arrives, as models/wire.py's types and exceptions. Neither httpx nor
httpcore and h11 are imported: at 128 rollouts in flight those were the largest share of a
rollout's CPU left (one thread against a local server: 0.56 ms a request through
``httpx.HTTPTransport``, 0.11 ms through this; docs/scale.md), and httpx alone was a
tenth of a one-task run's start-up.

What it does, as httpcore does it: keep-alive connections, reused only after a whole
response framed by ``content-length`` or chunked encoding (a ``connection: close``, an
HTTP/1.0 reply, a body read to the connection's close or a response closed early ends
the connection); an idle connection the server has closed (or sent anything on) is
dropped before reuse; informational (1xx) replies are skipped; a body is handed on as
its bytes arrive (a stream's events are not held back); connect, read and write
timeouts; models/wire.py's exception for every failure (ConnectError, ConnectTimeout,
ReadTimeout, WriteTimeout, ReadError, WriteError, RemoteProtocolError,
LocalProtocolError for a header that would split the request), with the messages httpx
gives them. The response's ``socket`` is the connection's (the deadline watchdog shuts
it), and every socket it opens is added to ``sockets`` (the watchdog of a request not yet
answered).

On Linux a connection's socket stays in blocking mode and its read and write timeouts are
the kernel's (``SO_RCVTIMEO``, ``SO_SNDTIMEO``, set only when they change): a socket with
a Python timeout polls before every send and receive and switches modes at each change,
and each of those calls lets the GIL go. A request went from eight system calls to three
(a look at an idle connection, the send, the first receive); at 128 rollouts in flight
each let-go is a hand-off of the GIL among a hundred threads (docs/scale.md, "The fourth
pass"). Elsewhere Python's timeouts are used as before.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import sys
import threading
from collections.abc import Iterator, Sequence

from pytest_agentbench.models.wire import (
    ByteStream,
    ConnectError,
    ConnectTimeout,
    Headers,
    LocalProtocolError,
    ReadError,
    ReadTimeout,
    RemoteProtocolError,
    Response,
    Target,
    Timeout,
    UnsupportedProtocol,
    WireError,
    WriteError,
    WriteTimeout,
)

#: the most a response's status line and headers may take, and a chunk-size line
HEAD_LIMIT = 65536
_READ = 65536
_KEEP_IDLE = 8
#: the kernel keeps the timeouts (see the module's docstring)
_KERNEL_TIMEOUTS = sys.platform.startswith("linux")


def _timeval(seconds: float | None) -> bytes:
    """``seconds`` as the ``struct timeval`` of SO_RCVTIMEO / SO_SNDTIMEO (0: none)."""
    if seconds is None:
        return struct.pack("@ll", 0, 0)
    micro = max(1, round(seconds * 1_000_000))  # never 0, which would mean no timeout
    return struct.pack("@ll", micro // 1_000_000, micro % 1_000_000)


class _Connection:
    """One socket and the bytes read from it beyond what was consumed: ``buffer`` from
    ``at`` (an offset, so reading many small chunks of one large read copies each byte
    once, not the rest of the buffer at every line)."""

    __slots__ = ("at", "buffer", "origin", "sock", "timeouts")

    def __init__(self, sock: socket.socket, origin: tuple[str, int]) -> None:
        self.sock = sock
        self.origin = origin
        self.buffer = b""
        self.at = 0
        #: the kernel's read and write timeouts of the socket (Linux)
        self.timeouts: list[float | None] = [None, None]
        if _KERNEL_TIMEOUTS:
            sock.settimeout(None)  # blocking: the kernel times each call out

    def timeout(self, write: bool, seconds: float | None) -> None:
        """The timeout of each receive (or each send, ``write``) from now on."""
        if not _KERNEL_TIMEOUTS:  # one Python timeout for both
            if self.sock.gettimeout() != seconds:
                self.sock.settimeout(seconds)
        elif self.timeouts[write] != seconds:
            option = socket.SO_SNDTIMEO if write else socket.SO_RCVTIMEO
            self.sock.setsockopt(socket.SOL_SOCKET, option, _timeval(seconds))
            self.timeouts[write] = seconds

    def _receive(self) -> bytes:
        try:
            return self.sock.recv(_READ)
        except (TimeoutError, BlockingIOError):  # (the kernel's timeout: EAGAIN)
            raise ReadTimeout("timed out") from None
        except OSError as exc:
            raise ReadError(str(exc)) from exc

    def line(self, what: str) -> bytes:
        """The next line, without its end (CRLF or LF)."""
        while True:
            end = self.buffer.find(b"\n", self.at)
            if end >= 0:
                line = self.buffer[self.at : end]
                self.at = end + 1
                return line[:-1] if line.endswith(b"\r") else line
            if len(self.buffer) - self.at > HEAD_LIMIT:
                raise RemoteProtocolError(f"{what} longer than {HEAD_LIMIT} bytes")
            data = self._receive()
            if not data:
                raise RemoteProtocolError(
                    "Server disconnected without sending a response."
                    if what == "status line"
                    else "peer closed connection without sending complete message body"
                )
            self.buffer = self.buffer[self.at :] + data
            self.at = 0

    def some(self, most: int) -> bytes:
        """Up to ``most`` bytes, as soon as any are there; b"" at the connection's end."""
        if self.at >= len(self.buffer):
            self.buffer = self._receive()
            self.at = 0
        data = self.buffer[self.at : self.at + most]
        self.at += len(data)
        return data

    def stale(self) -> bool:
        """Whether an idle connection cannot carry another request: the server closed
        it, or sent something unasked."""
        if self.at < len(self.buffer):
            return True
        try:
            if _KERNEL_TIMEOUTS:  # blocking: this one call does not wait
                self.sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
            else:
                self.sock.settimeout(0)
                self.sock.recv(1, socket.MSG_PEEK)  # b"": closed; a byte: something unasked
        except BlockingIOError:
            return False
        except OSError:
            pass
        return True

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()


class _Body:
    """A response's body (a ``wire.ByteStream``), yielded as it arrives; the connection goes
    back to the pool once the whole body was read, and is closed if the response is
    closed before."""

    def __init__(
        self,
        pool: PlainHTTPTransport,
        connection: _Connection,
        length: int | None,
        chunked: bool,
        keep: bool,
    ) -> None:
        self._pool = pool
        self._connection: _Connection | None = connection
        self._length = length
        self._chunked = chunked
        self._keep = keep
        self._done = False

    def __iter__(self) -> Iterator[bytes]:
        connection = self._connection
        if connection is None:
            return
        if self._chunked:
            yield from self._chunks(connection)
        elif self._length is not None:
            left = self._length
            while left:
                data = connection.some(min(left, _READ))
                if not data:
                    raise RemoteProtocolError(
                        "peer closed connection without sending complete message body"
                    )
                left -= len(data)
                yield data
        else:  # delimited by the connection's close
            self._keep = False
            while data := connection.some(_READ):
                yield data
        self._done = True
        self.close()

    @staticmethod
    def _chunks(connection: _Connection) -> Iterator[bytes]:
        while True:
            line = connection.line("chunk size")
            try:
                size = int(line.split(b";", 1)[0].strip(), 16)
            except ValueError:
                raise RemoteProtocolError(f"bad chunk size line {line[:40]!r}") from None
            if size < 0:
                raise RemoteProtocolError(f"bad chunk size line {line[:40]!r}")
            if size == 0:
                while connection.line("trailer"):  # trailers, up to the empty line
                    pass
                return
            while size:
                data = connection.some(size)
                if not data:
                    raise RemoteProtocolError(
                        "peer closed connection without sending complete message body"
                    )
                size -= len(data)
                yield data
            if connection.line("chunk end"):
                raise RemoteProtocolError("a chunk longer than its size")

    def close(self) -> None:
        connection, self._connection = self._connection, None
        if connection is None:
            return
        self._pool.release(connection, reuse=self._done and self._keep)


_BODY_METHODS = (b"POST", b"PUT", b"PATCH")


class PlainHTTPTransport:
    """HTTP/1.1 on plain sockets, for one thread's requests (see the module docstring).
    ``close`` may be called from another thread: it ends the requests in flight (their
    reads fail) and every later one."""

    def __init__(self, sockets: list[socket.socket] | None = None) -> None:
        self._sockets = sockets if sockets is not None else []
        self._idle: list[_Connection] = []
        self._busy: set[_Connection] = set()
        self._lock = threading.Lock()
        self._closed = False

    def send(
        self,
        method: str,
        target: Target,
        headers: Sequence[tuple[bytes, bytes]],
        content: bytes,
        timeout: Timeout,
    ) -> Response:
        """Send one request: ``host`` first, then ``headers`` as given, then the body's
        ``content-length``; the reply's status and headers read, its body not yet (read
        it, or close the response)."""
        if target.scheme != "http":
            raise UnsupportedProtocol(f"plain HTTP only, not {target.scheme!r}")
        verb = method.encode("ascii")
        head = [verb, b" ", target.path, b" HTTP/1.1\r\nhost: ", target.netloc, b"\r\n"]
        for name, value in headers:
            if b"\r" in name or b"\n" in name or b"\r" in value or b"\n" in value or not name:
                raise LocalProtocolError(
                    f"header {name[:40]!r} has a line break in its name or value"
                )
            head += (name, b": ", value, b"\r\n")
        if content or verb in _BODY_METHODS:
            head.append(b"content-length: %d\r\n" % len(content))
        head.append(b"\r\n")
        connection = self._connection(target, timeout.connect)
        try:
            return self._exchange(connection, b"".join(head) + content, timeout, verb)
        except BaseException:
            self.release(connection, reuse=False)
            raise

    def _connection(self, target: Target, timeout: float | None) -> _Connection:
        origin = (target.host, target.port)
        with self._lock:
            if self._closed:
                raise ConnectError("the client was closed")
            idle = self._idle
            for index in range(len(idle) - 1, -1, -1):
                if idle[index].origin != origin:
                    continue
                connection = idle.pop(index)
                if not connection.stale():
                    self._busy.add(connection)
                    return connection
                connection.close()
        try:
            # an ASCII host given as bytes: a str one is encoded by the idna codec, whose
            # import (with stringprep and unicodedata) costs more than the connection
            host = target.host.encode("ascii") if target.host.isascii() else target.host
            sock = socket.create_connection((host, target.port), timeout=timeout)  # type: ignore[arg-type]
        except TimeoutError:
            raise ConnectTimeout("timed out") from None
        except OSError as exc:
            raise ConnectError(str(exc)) from exc
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        connection = _Connection(sock, origin)
        with self._lock:
            if self._closed:
                connection.close()
                raise ConnectError("the client was closed")
            self._busy.add(connection)
            self._sockets[:] = [s for s in self._sockets if s.fileno() != -1]
            self._sockets.append(sock)
        return connection

    def _exchange(
        self, connection: _Connection, data: bytes, timeout: Timeout, method: bytes
    ) -> Response:
        sock = connection.sock
        sent: WireError | None = None
        try:
            connection.timeout(True, timeout.write)
            sock.sendall(data)
        except (TimeoutError, BlockingIOError):  # (the kernel's timeout: EAGAIN)
            raise WriteTimeout("timed out") from None
        except OSError as exc:
            # the server may have answered (and closed) before reading the whole body:
            # its answer, if there is one, says more than the broken write
            sent = WriteError(str(exc))
        connection.timeout(False, timeout.read)
        try:
            while True:
                version, status = _status(connection.line("status line"))
                headers: list[tuple[bytes, bytes]] = []
                while line := connection.line("header"):
                    name, colon, value = line.partition(b":")
                    if not colon or not name or name[-1:] in b" \t" or line[:1] in b" \t":
                        raise RemoteProtocolError(f"malformed header line {line[:40]!r}")
                    headers.append((name, value.strip(b" \t")))
                    if len(headers) > 256:
                        raise RemoteProtocolError("more than 256 header lines")
                if not 100 <= status < 200 or status == 101:
                    break
        except WireError as exc:
            if sent is not None:
                raise sent from exc
            raise
        length: int | None = None
        chunked = False
        keep = version == b"HTTP/1.1" and sent is None
        for name, value in headers:
            lower = name.lower()
            if lower == b"transfer-encoding":
                chunked = value.lower().endswith(b"chunked")
            elif lower == b"content-length":
                try:
                    length = int(value)
                except ValueError:
                    raise RemoteProtocolError(f"bad content-length {value[:40]!r}") from None
            elif lower == b"connection" and b"close" in value.lower():
                keep = False
        if status in (204, 304) or method == b"HEAD":
            length, chunked = 0, False
        elif chunked:
            length = None
        body: ByteStream = _Body(self, connection, length, chunked, keep)
        return Response(status, Headers.from_raw(headers), body, connection.sock)

    def release(self, connection: _Connection, reuse: bool) -> None:
        """A response is over: keep its connection for the next request, or close it."""
        with self._lock:
            self._busy.discard(connection)
            if reuse and not self._closed and len(self._idle) < _KEEP_IDLE:
                self._idle.append(connection)
                return
        connection.close()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
            busy = list(self._busy)
        for connection in idle:
            connection.close()
        for connection in busy:  # its thread closes it once its read fails
            with contextlib.suppress(OSError):
                connection.sock.shutdown(socket.SHUT_RDWR)


def _status(line: bytes) -> tuple[bytes, int]:
    version, _, rest = line.partition(b" ")
    code = rest[:3]
    if not version.startswith(b"HTTP/1.") or len(code) != 3 or not code.isdigit():
        raise RemoteProtocolError(f"not an HTTP/1 status line: {line[:40]!r}")
    if rest[3:4] not in (b"", b" "):
        raise RemoteProtocolError(f"not an HTTP/1 status line: {line[:40]!r}")
    return version, int(code)
