"""The plain-HTTP/1.1 transport (models/plain_http.py) against raw socket servers on
127.0.0.1 that answer byte for byte what each test gives them: framing, keep-alive and
when a connection must not be reused, streaming as bytes arrive, every failure as
models/wire.py's exception (named and worded as httpx's), timeouts, and ``close`` from
another thread."""

from __future__ import annotations

import gzip
import socket
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from pytest_agentbench.models import wire
from pytest_agentbench.models.plain_http import PlainHTTPTransport
from pytest_agentbench.models.wire import Response, Target, Timeout

#: one connection's handler: the accepted socket and a reader of whole requests
Handler = Callable[[socket.socket, Callable[[], bytes]], None]


class RawServer:
    """Accepts connections on 127.0.0.1 and runs ``handler`` on each in a thread of its
    own; counts the connections and keeps every request's raw bytes."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}/v1/chat?x=1"
        self.connections = 0
        self.requests: list[bytes] = []
        self.threads: list[threading.Thread] = []
        self.accepting = threading.Thread(target=self._accept, daemon=True)
        self.accepting.start()

    def _accept(self) -> None:
        while True:
            try:
                sock, _ = self.listener.accept()
            except OSError:
                return
            self.connections += 1
            thread = threading.Thread(target=self._serve, args=(sock,), daemon=True)
            self.threads.append(thread)
            thread.start()

    def _serve(self, sock: socket.socket) -> None:
        buffer = b""

        def read_request() -> bytes:
            nonlocal buffer
            while b"\r\n\r\n" not in buffer:
                data = sock.recv(65536)
                if not data:
                    return b""
                buffer += data
            head, _, rest = buffer.partition(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            while len(rest) < length:
                rest += sock.recv(65536)
            request, buffer = head + b"\r\n\r\n" + rest[:length], rest[length:]
            self.requests.append(request)
            return request

        try:
            self.handler(sock, read_request)
        except OSError:
            pass
        finally:
            sock.close()

    def close(self) -> None:
        self.listener.close()


@pytest.fixture
def serve() -> Iterator[Callable[[Handler], RawServer]]:
    servers: list[RawServer] = []

    def start(handler: Handler) -> RawServer:
        server = RawServer(handler)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.close()


def answering(*replies: bytes) -> Handler:
    """A handler answering the connection's requests with ``replies`` in turn, then
    waiting for the client to close it."""

    def handle(sock: socket.socket, read_request: Callable[[], bytes]) -> None:
        for reply in replies:
            if not read_request():
                return
            sock.sendall(reply)
        read_request()

    return handle


def post(transport: PlainHTTPTransport, url: str, timeout: float | None = 5.0) -> Response:
    return transport.send(
        "POST",
        Target(url),
        [(b"content-type", b"application/json")],
        b'{"q": 1}',
        Timeout(timeout, timeout, timeout, timeout),
    )


def body_of(transport: PlainHTTPTransport, url: str) -> tuple[int, bytes]:
    response = post(transport, url)
    try:
        return response.status_code, b"".join(response.iter_bytes())
    finally:
        response.close()


LENGTH = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\nok"
CHUNKED = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
    b"6\r\ndata: \r\n3;ext=1\r\nabc\r\n0\r\nx-trailer: 1\r\n\r\n"
)


def test_the_request_is_sent_as_written_and_the_reply_read_by_its_framing(
    serve: Callable[[Handler], RawServer],
) -> None:
    server = serve(answering(LENGTH, CHUNKED))
    transport = PlainHTTPTransport()
    assert body_of(transport, server.url) == (200, b"ok")
    assert body_of(transport, server.url) == (200, b"data: abc")
    head, _, body = server.requests[0].partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    assert lines[0] == b"POST /v1/chat?x=1 HTTP/1.1"
    headers = {k.lower(): v for k, v in (line.split(b": ", 1) for line in lines[1:])}
    assert headers[b"host"] == server.url.split("/")[2].encode()
    assert headers[b"content-length"] == b"8"
    assert headers[b"content-type"] == b"application/json"
    assert body == b'{"q": 1}'
    assert server.connections == 1, "both requests on one keep-alive connection"
    transport.close()


@pytest.mark.parametrize(
    "first",
    [
        b"HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 2\r\n\r\nok",
        b"HTTP/1.0 200 OK\r\ncontent-length: 2\r\n\r\nok",
    ],
    ids=["connection-close", "http-1.0"],
)
def test_a_connection_the_reply_ends_is_not_reused(
    serve: Callable[[Handler], RawServer], first: bytes
) -> None:
    def handle(sock: socket.socket, read_request: Callable[[], bytes]) -> None:
        if server.connections == 1:
            read_request()
            sock.sendall(first)  # and keeps the socket open: the client must not reuse it
            time.sleep(1)
        else:
            answering(LENGTH)(sock, read_request)

    server = serve(handle)
    transport = PlainHTTPTransport()
    assert body_of(transport, server.url) == (200, b"ok")
    assert body_of(transport, server.url) == (200, b"ok")
    assert server.connections == 2
    transport.close()


def test_a_body_read_to_the_close_is_read_whole_and_its_connection_not_reused(
    serve: Callable[[Handler], RawServer],
) -> None:
    def handle(sock: socket.socket, read_request: Callable[[], bytes]) -> None:
        read_request()
        sock.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\n\r\nall of ")
        time.sleep(0.05)
        sock.sendall(b"it")

    server = serve(handle)
    transport = PlainHTTPTransport()
    assert body_of(transport, server.url) == (200, b"all of it")
    assert body_of(transport, server.url) == (200, b"all of it")
    assert server.connections == 2
    transport.close()


def test_a_response_closed_before_its_end_closes_its_connection(
    serve: Callable[[Handler], RawServer],
) -> None:
    """The rest of the first reply never comes (nothing unread waits on the socket to
    tell the connection is spent): only closing it keeps the next request off it."""
    done = threading.Event()

    def handle(sock: socket.socket, read_request: Callable[[], bytes]) -> None:
        if server.connections == 1:
            read_request()
            sock.sendall(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n6\r\ndata: ")
            done.wait(10)
        else:
            answering(LENGTH)(sock, read_request)

    server = serve(handle)
    transport = PlainHTTPTransport()
    response = post(transport, server.url)
    assert next(response.iter_raw()) == b"data: "
    response.close()
    second = post(transport, server.url, timeout=2)
    assert second.read() == b"ok"
    second.close()
    assert server.connections == 2, "the half-read reply's connection was not reused"
    done.set()
    transport.close()


def test_an_idle_connection_the_server_closed_is_replaced_not_failed(
    serve: Callable[[Handler], RawServer],
) -> None:
    def handle(sock: socket.socket, read_request: Callable[[], bytes]) -> None:
        read_request()
        sock.sendall(LENGTH)  # then closes: the client's idle connection is dead

    server = serve(handle)
    transport = PlainHTTPTransport()
    assert body_of(transport, server.url) == (200, b"ok")
    time.sleep(0.2)  # the server's close has reached the client's socket
    assert body_of(transport, server.url) == (200, b"ok")
    assert server.connections == 2
    transport.close()


def test_a_streamed_body_is_handed_on_as_it_arrives(serve: Callable[[Handler], RawServer]) -> None:
    got_first = threading.Event()

    def handle(sock: socket.socket, read_request: Callable[[], bytes]) -> None:
        read_request()
        sock.sendall(
            b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"
            b"20\r\n"  # a chunk of 32 bytes whose first 8 come now
            b"data: 1\n"
        )
        got_first.wait(5)  # the rest only once the client has handed on the first bytes
        sock.sendall(b"\ndata: 2" + b" " * 15 + b"\n\r\n0\r\n\r\n")

    server = serve(handle)
    transport = PlainHTTPTransport()
    response = post(transport, server.url)
    pieces = []
    for piece in response.iter_raw():
        pieces.append(piece)
        got_first.set()
    response.close()
    assert pieces[0] == b"data: 1\n"
    assert b"".join(pieces) == b"data: 1\n\ndata: 2" + b" " * 15 + b"\n"
    transport.close()


def test_informational_replies_are_skipped(serve: Callable[[Handler], RawServer]) -> None:
    server = serve(
        answering(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early\r\nx: y\r\n\r\n" + LENGTH)
    )
    transport = PlainHTTPTransport()
    assert body_of(transport, server.url) == (200, b"ok")
    transport.close()


def test_an_encoded_body_is_decoded_as_httpx_decodes_it(
    serve: Callable[[Handler], RawServer],
) -> None:
    packed = gzip.compress(b"x" * 1000)
    head = f"HTTP/1.1 200 OK\r\ncontent-encoding: gzip\r\ncontent-length: {len(packed)}\r\n\r\n"
    server = serve(answering(head.encode() + packed))
    transport = PlainHTTPTransport()
    response = post(transport, server.url)
    assert response.read() == b"x" * 1000
    response.close()
    transport.close()


@pytest.mark.parametrize(
    ("reply", "error", "words"),
    [
        (b"", wire.RemoteProtocolError, "Server disconnected"),
        (b"SSH-2.0-OpenSSH\r\n\r\n", wire.RemoteProtocolError, "not an HTTP/1 status line"),
        (
            b"HTTP/1.1 200 OK\r\ncontent-length: 9\r\n\r\nhalf",
            wire.RemoteProtocolError,
            "complete",
        ),
        (
            b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n9\r\nhalf",
            wire.RemoteProtocolError,
            "complete",
        ),
        (
            b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n",
            wire.RemoteProtocolError,
            "chunk size",
        ),
        (
            b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n",
            wire.RemoteProtocolError,
            "malformed header",
        ),
        (
            b"HTTP/1.1 200 OK\r\ncontent-length: many\r\n\r\n",
            wire.RemoteProtocolError,
            "content-length",
        ),
        (b"HTTP/1.1 200 OK\r\nx: " + b"a" * 70000, wire.RemoteProtocolError, "longer than"),
    ],
    ids=[
        "nothing",
        "not-http",
        "short-body",
        "short-chunk",
        "bad-chunk-size",
        "bad-header",
        "bad-length",
        "endless-header",
    ],
)
def test_a_broken_reply_is_a_protocol_error(
    serve: Callable[[Handler], RawServer], reply: bytes, error: type[Exception], words: str
) -> None:
    def handle(sock: socket.socket, read_request: Callable[[], bytes]) -> None:
        read_request()
        sock.sendall(reply)

    server = serve(handle)
    transport = PlainHTTPTransport()
    with pytest.raises(error, match=words):
        response = post(transport, server.url)
        try:
            response.read()
        finally:
            response.close()
    transport.close()


def test_connect_and_read_failures_are_named_as_httpx_names_them(
    serve: Callable[[Handler], RawServer],
) -> None:
    closed = socket.create_server(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()
    transport = PlainHTTPTransport()
    with pytest.raises(wire.ConnectError, match="refused"):
        post(transport, f"http://127.0.0.1:{port}/v1")

    def silent(sock: socket.socket, read_request: Callable[[], bytes]) -> None:
        read_request()
        time.sleep(3)

    server = serve(silent)
    started = time.monotonic()
    with pytest.raises(wire.ReadTimeout):
        post(transport, server.url, timeout=0.3)
    assert time.monotonic() - started < 2.5
    transport.close()


def test_a_write_the_server_never_reads_times_out_and_each_read_is_timed_alone(
    serve: Callable[[Handler], RawServer],
) -> None:
    """The write and read timeouts hold (on Linux the kernel's, set on a blocking
    socket): a body the server never reads ends in WriteTimeout, and a reply whose bytes
    come closer together than the read timeout is read whole however long it takes."""

    def deaf(sock: socket.socket, read_request: Callable[[], bytes]) -> None:
        time.sleep(4)

    transport = PlainHTTPTransport()
    started = time.monotonic()
    with pytest.raises(wire.WriteTimeout):
        transport.send(
            "POST", Target(serve(deaf).url), [], b"x" * 64_000_000, Timeout(5, 5, 0.3, 5)
        )
    assert time.monotonic() - started < 3

    def slow(sock: socket.socket, read_request: Callable[[], bytes]) -> None:
        read_request()
        sock.sendall(LENGTH[:-2])
        for byte in (b"o", b"k"):
            time.sleep(0.2)
            sock.sendall(byte)

    response = transport.send("POST", Target(serve(slow).url), [], b"{}", Timeout(5, 0.35, 5, 5))
    assert b"".join(response.iter_bytes()) == b"ok"  # 0.4 s in all, 0.2 s at most apart
    response.close()
    transport.close()


def test_a_header_with_a_line_break_is_refused_before_anything_is_sent(
    serve: Callable[[Handler], RawServer],
) -> None:
    server = serve(answering(LENGTH))
    transport = PlainHTTPTransport()
    with pytest.raises(wire.LocalProtocolError, match="line break"):
        transport.send(
            "POST",
            Target(server.url),
            [(b"x-evil", b"a\r\nx-injected: 1")],
            b"{}",
            Timeout(5, 5, 5, 5),
        )
    assert server.connections == 0
    transport.close()


def test_the_socket_is_given_to_the_watchdog_and_close_ends_a_blocked_read(
    serve: Callable[[Handler], RawServer],
) -> None:
    """models/deadline.py shuts a request's socket: the one the transport lists as it
    connects, and the one its response names; ``close`` from another thread (the run
    stopping) ends a read blocked on a server that never answers, and every later
    request."""
    release = threading.Event()

    def slow(sock: socket.socket, read_request: Callable[[], bytes]) -> None:
        read_request()
        sock.sendall(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n")
        release.wait(10)

    server = serve(slow)
    sockets: list[socket.socket] = []
    transport = PlainHTTPTransport(sockets)
    response = post(transport, server.url, timeout=None)
    assert response.socket is sockets[0]
    closer = threading.Timer(0.3, transport.close)
    closer.start()
    started = time.monotonic()
    with pytest.raises(wire.RemoteProtocolError):
        response.read()
    assert time.monotonic() - started < 5
    response.close()
    release.set()
    with pytest.raises(wire.ConnectError, match="closed"):
        post(transport, server.url)


def test_other_requests_go_the_same_way(serve: Callable[[Handler], RawServer]) -> None:
    """The scripted client's registration and the slots probe send on this transport
    too: a GET carries no body and no content-length; a request to another origin never
    takes an idle connection of the first."""
    server = serve(answering(LENGTH, LENGTH))
    other = serve(answering(LENGTH))
    transport = PlainHTTPTransport()
    for url in (server.url, other.url, server.url):
        response = transport.send("GET", Target(url), [], b"", Timeout(5, 5, 5, 5))
        assert response.read() == b"ok"
    assert server.requests[0].startswith(b"GET /v1/chat?x=1 HTTP/1.1\r\n")
    assert b"content-length" not in server.requests[0].lower()
    assert (server.connections, other.connections) == (1, 1)
    assert len(server.requests) == 2
    transport.close()
