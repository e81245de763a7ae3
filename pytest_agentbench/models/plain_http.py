"""A plain-HTTP/1.1 transport for a generation's POST to an ``http://`` endpoint.

An httpx transport (the client code sees ``httpx.Request``, ``httpx.Response`` and
httpx's exceptions, as from ``httpx.HTTPTransport``) that speaks HTTP/1.1 itself on a
keep-alive socket, without httpcore and h11: at 128 rollouts in flight those two were
the largest share of a rollout's CPU left (one thread against a local server: 0.56 ms a
request through ``httpx.HTTPTransport``, 0.11 ms through this one; docs/scale.md). It is
used only where nothing of what httpcore adds is needed: plain HTTP (no TLS), no proxy,
HTTP/1.1, one request at a time per connection (models/connections.py decides).

What it does, as httpcore does it: keep-alive connections, reused only after a whole
response framed by ``content-length`` or chunked encoding (a ``connection: close``, an
HTTP/1.0 reply, a body read to the connection's close or a response closed early ends
the connection); an idle connection the server has closed (or sent anything on) is
dropped before reuse; informational (1xx) replies are skipped; a body is handed on as
its bytes arrive (a stream's events are not held back); httpx's connect, read and write
timeouts; httpx's exception types for every failure (ConnectError, ConnectTimeout,
ReadTimeout, WriteTimeout, ReadError, WriteError, RemoteProtocolError,
LocalProtocolError for a header that would split the request). The response's
``network_stream`` extension gives its socket (the deadline watchdog shuts it), and every
socket it opens is added to ``sockets`` (the watchdog of a request not yet answered).
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator

import httpx

#: the most a response's status line and headers may take, and a chunk-size line
HEAD_LIMIT = 65536
_READ = 65536
_KEEP_IDLE = 8


class _Connection:
    """One socket and the bytes read from it beyond what was consumed: ``buffer`` from
    ``at`` (an offset, so reading many small chunks of one large read copies each byte
    once, not the rest of the buffer at every line)."""

    __slots__ = ("at", "buffer", "sock")

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buffer = b""
        self.at = 0

    def get_extra_info(self, info: str) -> object:
        """As httpcore's network stream answers it (models/deadline.py asks for the socket)."""
        return self.sock if info == "socket" else None

    def _receive(self) -> bytes:
        try:
            return self.sock.recv(_READ)
        except TimeoutError:
            raise httpx.ReadTimeout("timed out") from None
        except OSError as exc:
            raise httpx.ReadError(str(exc)) from exc

    def line(self, what: str) -> bytes:
        """The next line, without its end (CRLF or LF)."""
        while True:
            end = self.buffer.find(b"\n", self.at)
            if end >= 0:
                line = self.buffer[self.at : end]
                self.at = end + 1
                return line[:-1] if line.endswith(b"\r") else line
            if len(self.buffer) - self.at > HEAD_LIMIT:
                raise httpx.RemoteProtocolError(f"{what} longer than {HEAD_LIMIT} bytes")
            data = self._receive()
            if not data:
                raise httpx.RemoteProtocolError(
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


class _Body(httpx.SyncByteStream):
    """A response's body, yielded as it arrives; the connection goes back to the pool
    once the whole body was read, and is closed if the response is closed before."""

    def __init__(
        self,
        pool: PlainHTTPTransport,
        connection: _Connection,
        length: int | None,
        chunked: bool,
        keep: bool,
    ) -> None:
        self._pool = pool
        self._connection = connection
        self._length = length
        self._chunked = chunked
        self._keep = keep
        self._done = False

    def __iter__(self) -> Iterator[bytes]:
        connection = self._connection
        if self._chunked:
            yield from self._chunks(connection)
        elif self._length is not None:
            left = self._length
            while left:
                data = connection.some(min(left, _READ))
                if not data:
                    raise httpx.RemoteProtocolError(
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
                raise httpx.RemoteProtocolError(f"bad chunk size line {line[:40]!r}") from None
            if size < 0:
                raise httpx.RemoteProtocolError(f"bad chunk size line {line[:40]!r}")
            if size == 0:
                while connection.line("trailer"):  # trailers, up to the empty line
                    pass
                return
            while size:
                data = connection.some(size)
                if not data:
                    raise httpx.RemoteProtocolError(
                        "peer closed connection without sending complete message body"
                    )
                size -= len(data)
                yield data
            if connection.line("chunk end"):
                raise httpx.RemoteProtocolError("a chunk longer than its size")

    def close(self) -> None:
        connection, self._connection = self._connection, None  # type: ignore[assignment]
        if connection is None:
            return
        self._pool.release(connection, reuse=self._done and self._keep)


class PlainHTTPTransport(httpx.BaseTransport):
    """HTTP/1.1 on plain sockets, for one thread's requests (see the module docstring).
    ``close`` may be called from another thread: it ends the requests in flight (their
    reads fail) and every later one."""

    def __init__(self, sockets: list[socket.socket] | None = None) -> None:
        self._sockets = sockets if sockets is not None else []
        self._idle: list[_Connection] = []
        self._busy: set[_Connection] = set()
        self._lock = threading.Lock()
        self._closed = False

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        timeouts = request.extensions.get("timeout", {})
        url = request.url
        if url.scheme != "http":
            raise httpx.UnsupportedProtocol(f"plain HTTP only, not {url.scheme!r}", request=request)
        head = [request.method.encode("ascii"), b" ", url.raw_path, b" HTTP/1.1\r\n"]
        chunked = False
        for name, value in request.headers.raw:
            if b"\r" in name or b"\n" in name or b"\r" in value or b"\n" in value or not name:
                raise httpx.LocalProtocolError(
                    f"header {name[:40]!r} has a line break in its name or value", request=request
                )
            head += (name, b": ", value, b"\r\n")
            if name.lower() == b"transfer-encoding":
                chunked = value.lower().endswith(b"chunked")
        head.append(b"\r\n")
        content = request.read()  # (a streamed body, a file's upload, is read whole)
        if chunked:  # a body of unknown length (httpx's framing for a generator's)
            content = (
                b"%x\r\n%s\r\n0\r\n\r\n" % (len(content), content) if content else b"0\r\n\r\n"
            )
        connection = self._connection(url, timeouts.get("connect"), request)
        try:
            response = self._exchange(connection, b"".join(head) + content, timeouts, request)
        except BaseException:
            self.release(connection, reuse=False)
            raise
        return response

    def _connection(
        self, url: httpx.URL, timeout: float | None, request: httpx.Request
    ) -> _Connection:
        with self._lock:
            if self._closed:
                raise httpx.ConnectError("the client was closed", request=request)
            while self._idle:
                connection = self._idle.pop()
                if not connection.stale():
                    self._busy.add(connection)
                    return connection
                connection.close()
        try:
            sock = socket.create_connection((url.host, url.port or 80), timeout=timeout)
        except TimeoutError:
            raise httpx.ConnectTimeout("timed out", request=request) from None
        except OSError as exc:
            raise httpx.ConnectError(str(exc), request=request) from exc
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        connection = _Connection(sock)
        with self._lock:
            if self._closed:
                connection.close()
                raise httpx.ConnectError("the client was closed", request=request)
            self._busy.add(connection)
            self._sockets[:] = [s for s in self._sockets if s.fileno() != -1]
            self._sockets.append(sock)
        return connection

    def _exchange(
        self,
        connection: _Connection,
        data: bytes,
        timeouts: dict[str, float | None],
        request: httpx.Request,
    ) -> httpx.Response:
        sock = connection.sock
        sent: httpx.TransportError | None = None
        try:
            sock.settimeout(timeouts.get("write"))
            sock.sendall(data)
        except TimeoutError:
            raise httpx.WriteTimeout("timed out", request=request) from None
        except OSError as exc:
            # the server may have answered (and closed) before reading the whole body:
            # its answer, if there is one, says more than the broken write
            sent = httpx.WriteError(str(exc), request=request)
        sock.settimeout(timeouts.get("read"))
        try:
            while True:
                version, status, reason = _status(connection.line("status line"))
                headers: list[tuple[bytes, bytes]] = []
                while line := connection.line("header"):
                    name, colon, value = line.partition(b":")
                    if not colon or not name or name[-1:] in b" \t" or line[:1] in b" \t":
                        raise httpx.RemoteProtocolError(f"malformed header line {line[:40]!r}")
                    headers.append((name, value.strip(b" \t")))
                    if len(headers) > 256:
                        raise httpx.RemoteProtocolError("more than 256 header lines")
                if not 100 <= status < 200 or status == 101:
                    break
        except httpx.HTTPError as exc:
            if sent is not None:
                raise sent from exc
            exc.request = request
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
                    raise httpx.RemoteProtocolError(
                        f"bad content-length {value[:40]!r}", request=request
                    ) from None
            elif lower == b"connection" and b"close" in value.lower():
                keep = False
        if status in (204, 304) or request.method == "HEAD":
            length, chunked = 0, False
        elif chunked:
            length = None
        return httpx.Response(
            status,
            headers=headers,
            stream=_Body(self, connection, length, chunked, keep),
            request=request,
            extensions={
                "http_version": version,
                "reason_phrase": reason,
                "network_stream": connection,
            },
        )

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


def _status(line: bytes) -> tuple[bytes, int, bytes]:
    version, _, rest = line.partition(b" ")
    code, _, reason = rest.partition(b" ")
    if not version.startswith(b"HTTP/1.") or len(code) != 3 or not code.isdigit():
        raise httpx.RemoteProtocolError(f"not an HTTP/1 status line: {line[:40]!r}")
    return version, int(code), reason
