"""The HTTP exchange as our model clients see it: where a request goes (``Target``), its
timeouts (``Timeout``), a reply's headers (``Headers``, case-insensitive) and the reply
itself read as it arrives (``Response``), and every failure of the wire as one tree of
exceptions.

Both ways a request can go produce these: our own HTTP/1.1 on plain sockets for an
``http://`` endpoint reached directly (models/plain_http.py), and httpx for the rest
(TLS, an environment's proxy, credentials in the URL: models/httpx_path.py, which adapts
httpx's responses and translates its exceptions at that boundary). Nothing downstream
(models/http.py, the readers, the protocol clients, the deadline watchdog) imports httpx,
so a run against a plain-HTTP server never does.

The exceptions, named as httpx names its own (a message that falls back on a failure's
name reads the same on both ways)::

    WireError
    ├── WireTimeout: ConnectTimeout, ReadTimeout, WriteTimeout, PoolTimeout
    ├── ConnectError, ReadError, WriteError, CloseError
    ├── RemoteProtocolError, LocalProtocolError
    ├── ProxyError, UnsupportedProtocol
    └── DecodingError
"""

from __future__ import annotations

import json
import socket
import zlib
from collections.abc import Iterable, Iterator
from typing import Protocol, overload
from urllib.parse import quote, urlsplit

from pytest_agentbench.core.jsontypes import JsonValue


class WireError(Exception):
    """A request failed on the wire: no complete reply came (not an HTTP error status)."""


class WireTimeout(WireError):
    """A request's connect, read, write or pool timeout passed."""


class ConnectTimeout(WireTimeout):
    pass


class ReadTimeout(WireTimeout):
    pass


class WriteTimeout(WireTimeout):
    pass


class PoolTimeout(WireTimeout):
    pass


class ConnectError(WireError):
    pass


class ReadError(WireError):
    pass


class WriteError(WireError):
    pass


class CloseError(WireError):
    pass


class RemoteProtocolError(WireError):
    """The server's bytes are not HTTP/1.1 as it must be sent (or stopped too soon)."""


class LocalProtocolError(WireError):
    """The request cannot be sent as HTTP/1.1 (a header that would split it)."""


class ProxyError(WireError):
    pass


class UnsupportedProtocol(WireError):
    pass


class DecodingError(WireError):
    """A body's content encoding (gzip, deflate) could not be decoded."""


class Timeout:
    """The timeouts of one request, in seconds (None: none): connecting, each read, each
    write, and waiting for a connection of a pool. (A plain class, not a dataclass: one is
    made per request, and a dataclass's generated methods cost start-up.)"""

    __slots__ = ("connect", "pool", "read", "write")

    def __init__(
        self, connect: float | None, read: float | None, write: float | None, pool: float | None
    ) -> None:
        self.connect = connect
        self.read = read
        self.write = write
        self.pool = pool

    def __repr__(self) -> str:
        return (
            f"Timeout(connect={self.connect}, read={self.read}, write={self.write}, "
            f"pool={self.pool})"
        )


class Target:
    """A URL as a request is sent to it: ``host`` (lower case) and ``port``, ``path`` as
    the request line carries it (path and query, percent-encoded), ``netloc`` as the
    ``host`` header carries it (the default port left out), and whether the URL holds a
    user or a password (``credentials``)."""

    __slots__ = ("credentials", "host", "netloc", "path", "port", "scheme")

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self.scheme = parts.scheme.lower()
        self.host = host = (parts.hostname or "").lower()
        default = 443 if self.scheme == "https" else 80
        self.port = port = parts.port or default
        shown = f"[{host}]" if ":" in host else host
        netloc = shown if port == default else f"{shown}:{port}"
        self.netloc = netloc.encode("idna" if not netloc.isascii() else "ascii")
        path = quote(parts.path or "/", safe="/%:@!$&'()*+,;=-._~")
        if parts.query:
            path += "?" + quote(parts.query, safe="/%:@!$&'()*+,;=-._~?")
        self.path = path.encode("ascii")
        self.credentials = parts.username is not None or parts.password is not None

    def __repr__(self) -> str:
        return f"Target({self.scheme}://{self.netloc.decode()}{self.path.decode()})"


class Headers:
    """A reply's headers: names case-insensitive (kept in lower case), a name may come
    more than once (``get`` joins its values with ", ", as HTTP allows)."""

    __slots__ = ("_items",)

    def __init__(self, items: Iterable[tuple[str, str]] = ()) -> None:
        self._items = [(name.lower(), value) for name, value in items]

    @classmethod
    def from_raw(cls, raw: Iterable[tuple[bytes, bytes]]) -> Headers:
        """Headers as they came off the wire: names ASCII, values UTF-8 when they decode
        as such, else Latin-1 (what HTTP/1.1 allowed)."""
        headers = cls()
        items = headers._items
        for name, value in raw:
            try:
                text = value.decode()
            except UnicodeDecodeError:
                text = value.decode("latin-1")
            items.append((name.decode("latin-1").lower(), text))
        return headers

    @overload
    def get(self, name: str) -> str | None: ...

    @overload
    def get(self, name: str, default: str) -> str: ...

    def get(self, name: str, default: str | None = None) -> str | None:
        """The value of ``name`` (its values joined by ", "), ``default`` when absent."""
        name = name.lower()
        values = [value for key, value in self._items if key == name]
        return ", ".join(values) if values else default

    def get_list(self, name: str) -> list[str]:
        """Every value of ``name``, in order."""
        name = name.lower()
        return [value for key, value in self._items if key == name]

    def __getitem__(self, name: str) -> str:
        value = self.get(name)
        if value is None:
            raise KeyError(name)
        return value

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and any(key == name.lower() for key, _ in self._items)

    def __len__(self) -> int:
        return len(self._items)

    def multi_items(self) -> list[tuple[str, str]]:
        """Every header, names in lower case, in the order they came."""
        return list(self._items)

    def __repr__(self) -> str:
        return f"Headers({self._items!r})"


class ByteStream(Protocol):
    """A reply's body as its bytes arrive (encoded as the server sent it); ``close`` ends
    it early and frees its connection."""

    def __iter__(self) -> Iterator[bytes]: ...

    def close(self) -> None: ...


class BytesBody:
    """A body held whole in memory (a recorded reply replayed)."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def __iter__(self) -> Iterator[bytes]:
        if self.data:
            yield self.data

    def close(self) -> None:
        pass


class _Decoder(Protocol):
    def decode(self, data: bytes) -> bytes: ...

    def flush(self) -> bytes: ...


class _Zlib:
    """gzip or deflate; a deflate body is tried as zlib-wrapped first, then raw (servers
    send both under that name)."""

    def __init__(self, gzip: bool) -> None:
        self._first = not gzip
        self._inflate = zlib.decompressobj(zlib.MAX_WBITS | 16 if gzip else zlib.MAX_WBITS)

    def decode(self, data: bytes) -> bytes:
        first, self._first = self._first, False
        try:
            return self._inflate.decompress(data)
        except zlib.error as exc:
            if first:
                self._inflate = zlib.decompressobj(-zlib.MAX_WBITS)
                return self.decode(data)
            raise DecodingError(str(exc)) from exc

    def flush(self) -> bytes:
        try:
            return self._inflate.flush()
        except zlib.error as exc:
            raise DecodingError(str(exc)) from exc


def _decoders(headers: Headers) -> list[_Decoder]:
    """The decoders of a body, in the order they apply (encodings we do not decode are
    passed through: none was asked for)."""
    found: list[_Decoder] = []
    for value in headers.get_list("content-encoding"):
        for coding in value.split(","):
            coding = coding.strip().lower()
            if coding in ("gzip", "x-gzip", "deflate"):
                found.append(_Zlib(gzip=coding != "deflate"))
    found.reverse()  # the last encoding applied is undone first
    return found


class Response:
    """An HTTP reply whose body is read as it arrives: ``iter_bytes`` (decoded),
    ``iter_raw`` (as sent; what a relay or the response cache keeps), or ``read`` whole,
    once. ``stream`` may be replaced by a wrapper before the body is read. ``socket``:
    the connection's socket (the deadline watchdog shuts it), None when there is none.
    ``close`` frees the connection; a body read to its end closes the response."""

    __slots__ = ("_consumed", "_content", "closed", "headers", "socket", "status_code", "stream")

    def __init__(
        self,
        status_code: int,
        headers: Headers,
        stream: ByteStream,
        sock: socket.socket | None = None,
    ) -> None:
        self.status_code = status_code
        self.headers = headers
        self.stream = stream
        self.socket = sock
        self.closed = False
        self._consumed = False
        self._content: bytes | None = None

    def iter_raw(self) -> Iterator[bytes]:
        if self._consumed:
            raise RuntimeError("the reply's body was already read")
        if self.closed:
            raise RuntimeError("the reply was closed before its body was read")
        self._consumed = True
        for chunk in self.stream:
            if chunk:
                yield chunk
        self.close()

    def iter_bytes(self) -> Iterator[bytes]:
        if self._content is not None:
            if self._content:
                yield self._content
            return
        decoders = _decoders(self.headers)
        if not decoders:
            yield from self.iter_raw()
            return
        for chunk in self.iter_raw():
            for decoder in decoders:
                chunk = decoder.decode(chunk)
            if chunk:
                yield chunk
        tail = b""
        for decoder in decoders:
            tail = decoder.decode(tail) + decoder.flush() if tail else decoder.flush()
        if tail:
            yield tail

    def read(self) -> bytes:
        """The whole body, decoded (kept: later reads and ``iter_bytes`` give it again)."""
        if self._content is None:
            self._content = b"".join(self.iter_bytes())
        return self._content

    @property
    def text(self) -> str:
        """The body read whole as text, in the charset the reply names (UTF-8 if none)."""
        charset = "utf-8"
        for param in (self.headers.get("content-type") or "").split(";")[1:]:
            key, _, value = param.partition("=")
            if key.strip().lower() == "charset" and value.strip():
                charset = value.strip().strip('"')
        try:
            return self.read().decode(charset, "replace")
        except LookupError:
            return self.read().decode("utf-8", "replace")

    def json(self) -> JsonValue:
        """The body read whole as JSON (ValueError when it is not)."""
        value: JsonValue = json.loads(self.read())
        return value

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.stream.close()
