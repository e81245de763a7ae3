"""models/wire.py: the reply's headers and body as our readers use them, and one tree of
failures on both ways a request goes. A reply that breaks the same way over plain HTTP
(our own sockets), over TLS and through an environment's proxy (httpx, its exceptions
translated at models/httpx_path.py) fails with the same error kind and the same words,
against real servers on 127.0.0.1 (the TLS one with a certificate made by openssl)."""

from __future__ import annotations

import gzip
import shutil
import socket
import ssl
import subprocess
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from pytest_agentbench.errors import ModelTimeout, TransportError
from pytest_agentbench.models import wire
from pytest_agentbench.models.base import ModelRequest, ModelSpec
from pytest_agentbench.models.httpx_path import HttpxThread, translated
from pytest_agentbench.models.openai_chat import OpenAIChatClient

# --- headers and bodies ----------------------------------------------------------------


def test_header_names_are_case_insensitive_and_repeated_ones_joined() -> None:
    headers = wire.Headers.from_raw(
        [(b"Content-Type", b"text/event-stream"), (b"X-Seen", b"1"), (b"x-seen", b"2")]
    )
    assert headers.get("content-type") == headers["CONTENT-TYPE"] == "text/event-stream"
    assert "Content-type" in headers and "x-missing" not in headers
    assert headers.get("X-SEEN") == "1, 2"
    assert headers.get("x-missing") is None and headers.get("x-missing", "") == ""
    assert headers.multi_items()[0] == ("content-type", "text/event-stream")
    with pytest.raises(KeyError):
        headers["x-missing"]
    assert wire.Headers.from_raw([(b"x-name", "é".encode("latin-1"))]).get("x-name") == "é"


def _response(body: bytes, *chunks: bytes, encoding: str = "") -> wire.Response:
    headers = [("content-type", "application/json; charset=utf-8")]
    if encoding:
        headers.append(("content-encoding", encoding))

    class Chunks:
        closed = False

        def __iter__(self) -> Iterator[bytes]:
            yield from chunks or (body,)

        def close(self) -> None:
            Chunks.closed = True

    return wire.Response(200, wire.Headers(headers), Chunks())


def test_a_body_read_whole_is_given_again_and_its_stream_closed() -> None:
    response = _response(b'{"a": 1}', b'{"a"', b": 1}")
    assert response.read() == b'{"a": 1}'
    assert list(response.iter_bytes()) == [b'{"a": 1}']
    assert response.json() == {"a": 1} and response.text == '{"a": 1}'
    assert response.closed
    with pytest.raises(RuntimeError, match="already read"):
        next(response.iter_raw())


@pytest.mark.parametrize(
    ("encoding", "pack"),
    [
        ("gzip", gzip.compress),
        ("deflate", zlib.compress),
        ("deflate", lambda data: zlib.compress(data)[2:-4]),  # raw deflate, as some send it
    ],
    ids=["gzip", "deflate", "raw-deflate"],
)
def test_an_encoded_body_is_decoded_chunk_by_chunk(
    encoding: str, pack: Callable[[bytes], bytes]
) -> None:
    packed = pack(b"data: x\n\n" * 500)
    pieces = [packed[i : i + 7] for i in range(0, len(packed), 7)]
    response = _response(b"", *pieces, encoding=encoding)
    assert b"".join(response.iter_bytes()) == b"data: x\n\n" * 500
    raw = _response(b"", *pieces, encoding=encoding)
    assert b"".join(raw.iter_raw()) == packed, "the raw stream is as sent (cache, relay)"


def test_a_body_that_does_not_decode_is_a_decoding_error() -> None:
    with pytest.raises(wire.DecodingError):
        _response(b"not gzip at all", encoding="gzip").read()


# --- httpx's exceptions translated -------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        "ConnectTimeout",
        "ReadTimeout",
        "WriteTimeout",
        "PoolTimeout",
        "ConnectError",
        "ReadError",
        "WriteError",
        "CloseError",
        "RemoteProtocolError",
        "LocalProtocolError",
        "ProxyError",
        "UnsupportedProtocol",
        "DecodingError",
    ],
)
def test_each_httpx_failure_becomes_ours_of_the_same_name_and_words(name: str) -> None:
    kind: type[httpx.HTTPError] = getattr(httpx, name)
    ours = translated(kind("the words"))
    assert type(ours).__name__ == name
    assert str(ours) == "the words"
    assert isinstance(ours, wire.WireTimeout) == name.endswith("Timeout")


def test_an_httpx_failure_we_have_no_class_for_keeps_its_name() -> None:
    ours = translated(httpx.TooManyRedirects(""))
    assert type(ours) is wire.WireError
    assert str(ours) == "TooManyRedirects"


# --- the same failure on every way -------------------------------------------------------

STREAM_START = b'data: {"choices":[{"index":0,"delta":{"content":"he"},"finish_reason":null}]}\n\n'
WHOLE = STREAM_START + (
    b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'
)


def _head(length: int) -> bytes:
    return (
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: %d\r\n\r\n" % length
    )


def _drip(sock: socket.socket) -> None:
    """A stream that never ends: an SSE comment byte every 0.2 s (no read times out)."""
    sock.sendall(_head(500) + STREAM_START)
    for _ in range(25):
        time.sleep(0.2)
        sock.sendall(b":")


#: what the server does with a request: answer whole, cut the body short, stall after
#: the first event, or drip bytes that never make an event
REPLIES: dict[str, Callable[[socket.socket], None]] = {
    "drip": _drip,
    "whole": lambda sock: sock.sendall(_head(len(WHOLE)) + WHOLE),
    "cut": lambda sock: sock.sendall(_head(500) + STREAM_START),
    "stall": lambda sock: (sock.sendall(_head(500) + STREAM_START), time.sleep(3)),
}


class Server:
    """A raw HTTP/1.1 server on 127.0.0.1, over TLS when given a context: reads one
    request and does ``reply`` with it, then closes."""

    def __init__(self, reply: Callable[[socket.socket], None], tls: ssl.SSLContext | None):
        self.reply = reply
        self.tls = tls
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                sock, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(sock,), daemon=True).start()

    def _serve(self, sock: socket.socket) -> None:
        try:
            if self.tls is not None:
                sock = self.tls.wrap_socket(sock, server_side=True)
            data = b""
            while b"\r\n\r\n" not in data:
                more = sock.recv(65536)
                if not more:
                    return
                data += more
            head, _, body = data.partition(b"\r\n\r\n")
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    while len(body) < int(line.split(b":")[1]):
                        body += sock.recv(65536)
            self.reply(sock)
        except OSError:
            pass
        finally:
            sock.close()

    def close(self) -> None:
        self.listener.close()


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A self-signed certificate for 127.0.0.1 (its key beside it), made by openssl."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed (Debian package: openssl)")
    folder = tmp_path_factory.mktemp("tls")
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt"),
            *("ec_paramgen_curve:prime256v1", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1"),
            *("-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(folder / "key.pem")),
            *("-out", str(folder / "cert.pem")),
        ],
        check=True,
        capture_output=True,
    )
    return folder / "cert.pem"


Way = Callable[[str], tuple[OpenAIChatClient, str]]
ASK = ModelRequest(messages=({"role": "user", "content": "q"},))


@pytest.fixture(params=["plain", "tls", "proxy"])
def way(
    request: pytest.FixtureRequest, certificate: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Way]:
    """A client whose requests reach a server doing REPLIES[name]: on plain sockets, over
    TLS, or through a proxy the environment names; with the endpoint its errors name."""
    for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy", "HTTPS_PROXY", "https_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("HTTP_PROXY", raising=False)
    monkeypatch.delenv("http_proxy", raising=False)
    made: list[tuple[Server, OpenAIChatClient]] = []

    def make(reply: str) -> tuple[OpenAIChatClient, str]:
        tls = None
        if request.param == "tls":
            tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            tls.load_cert_chain(certificate, certificate.parent / "key.pem")
            monkeypatch.setenv("SSL_CERT_FILE", str(certificate))
        server = Server(REPLIES[reply], tls)
        base = f"http://127.0.0.1:{server.port}/v1"
        if request.param == "tls":
            base = f"https://127.0.0.1:{server.port}/v1"
        elif request.param == "proxy":
            monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{server.port}")
            base = "http://127.0.0.1:9/v1"  # nothing listens there: only the proxy answers
        client = OpenAIChatClient(ModelSpec("openai-compat", "m"), base, idle_timeout_s=0.5)
        made.append((server, client))
        return client, f"{base}/chat/completions"

    yield make
    for server, client in made:
        client.close()
        server.close()


def _failure(client: OpenAIChatClient, timeout_s: float = 30) -> BaseException:
    with pytest.raises((TransportError, ModelTimeout)) as info:
        client.generate(ModelRequest(messages=ASK.messages, timeout_s=timeout_s))
    return info.value


def test_a_whole_reply_reads_the_same_on_every_way(way: Way) -> None:
    client, endpoint = way("whole")
    assert client.generate(ASK).text == "he"
    plain = endpoint.startswith("http://") and not endpoint.startswith("http://127.0.0.1:9/")
    assert isinstance(client._way, HttpxThread) != plain


def test_a_body_cut_short_is_a_broken_connection_on_every_way(way: Way) -> None:
    client, endpoint = way("cut")
    error = _failure(client)
    assert type(error) is TransportError
    assert str(error).startswith(
        f"openai-compat/m: the connection to {endpoint} broke: "
        "peer closed connection without sending complete message body"
    )
    assert error.partial is not None and error.partial.text == "he"  # type: ignore[attr-defined]


def test_a_stalled_stream_is_the_idle_timeout_on_every_way(way: Way) -> None:
    client, endpoint = way("stall")
    error = _failure(client)
    assert type(error) is ModelTimeout
    assert str(error) == f"openai-compat/m: no byte from {endpoint} for 0.5 s (the idle timeout)"


def test_a_dripping_stream_ends_at_its_deadline_on_every_way(way: Way) -> None:
    """Only the watchdog can end a stream whose every read gets a byte: it shuts the
    reply's socket at the deadline, which each way hands over."""
    client, endpoint = way("drip")
    client.idle_timeout_s = None
    started = time.monotonic()
    error = _failure(client, timeout_s=1)
    assert time.monotonic() - started < 2.5
    assert type(error) is ModelTimeout
    assert str(error) == (
        f"openai-compat/m: no complete reply from {endpoint} within the 1 s deadline"
    )


def test_an_untrusted_certificate_cannot_connect(
    certificate: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls.load_cert_chain(certificate, certificate.parent / "key.pem")
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    server = Server(REPLIES["whole"], tls)
    base = f"https://127.0.0.1:{server.port}/v1"
    client = OpenAIChatClient(ModelSpec("openai-compat", "m"), base, trust_env=False)
    try:
        error = _failure(client)
    finally:
        client.close()
        server.close()
    assert type(error) is TransportError
    assert str(error).startswith(f"openai-compat/m: cannot connect to {base}/chat/completions: ")
    assert "CERTIFICATE_VERIFY_FAILED" in str(error)


def test_a_refused_connection_reads_the_same_on_both_ways() -> None:
    closed = socket.create_server(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()
    messages = []
    for base in (f"http://127.0.0.1:{port}/v1", f"http://u:p@127.0.0.1:{port}/v1"):
        client = OpenAIChatClient(ModelSpec("openai-compat", "m"), base, trust_env=False)
        try:
            messages.append(str(_failure(client)))
            assert isinstance(client._way, HttpxThread) == ("u:p" in base)
        finally:
            client.close()
    endpoint = f"http://127.0.0.1:{port}/v1/chat/completions"
    refused = f"openai-compat/m: cannot connect to {endpoint}: [Errno 111] Connection refused"
    assert messages == [refused] * 2
