"""HTTP pieces every model client shares: the request life, timeouts, Retry-After, error
messages, URLs (the deadline watchdog is in models/deadline.py)."""

from __future__ import annotations

import contextlib
import dataclasses
import email.utils
import json
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar

import httpx

from pytest_agentbench.core.durations import seconds_text
from pytest_agentbench.core.jsontypes import JsonObject, JsonValue
from pytest_agentbench.core.stream import EventSink, StreamEvent
from pytest_agentbench.core.urls import public_url
from pytest_agentbench.errors import (
    RATE_LIMIT_STATUSES,
    ModelError,
    ModelTimeout,
    ProviderError,
    QueueTimeout,
    RateLimited,
    TransportError,
)
from pytest_agentbench.models.base import (
    REQUEST_EPOCH,
    FinishReason,
    Generation,
    ModelRequest,
    ModelSpec,
    Relay,
    ToolCall,
    Usage,
)
from pytest_agentbench.models.deadline import Watchdog
from pytest_agentbench.models.overflow import context_overflow, error_object, overflow_error
from pytest_agentbench.models.queue import Place, ServerQueue, wait_limit_s
from pytest_agentbench.models.sse import SSEParser, StringSlot, parse_json
from pytest_agentbench.models.usage import recovered_usage

if TYPE_CHECKING:  # (imported where used: a run with neither pays nothing for them)
    from pytest_agentbench.models.batch_store import BatchStore
    from pytest_agentbench.models.response_cache import Recorded, ResponseCache

CONNECT_TIMEOUT_S = 10.0
ERROR_BODY_LIMIT = 65536
DETAIL_LIMIT = 300


def retry_after_seconds(headers: httpx.Headers) -> float | None:
    """Seconds the server asks us to wait (``retry-after-ms``, ``Retry-After`` as seconds or
    an HTTP date); None when it did not say."""
    millis = headers.get("retry-after-ms")
    if millis is not None:
        try:
            return max(float(millis) / 1000, 0.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(when.timestamp() - time.time(), 0.0)


def error_detail(text: str) -> str:
    """The provider's own error message when the body has one, else the body; one line."""
    detail = text
    try:
        body = json.loads(text)
    except ValueError:
        body = None
    if isinstance(body, Mapping):
        error = body.get("error")
        if isinstance(error, Mapping) and error.get("message"):
            detail = str(error["message"])
        elif isinstance(error, str):
            detail = error
        elif body.get("message"):
            detail = str(body["message"])
        elif body.get("detail"):
            detail = str(body["detail"])
    detail = " ".join(detail.split()) or "(empty body)"
    return detail if len(detail) <= DETAIL_LIMIT else detail[: DETAIL_LIMIT - 1] + "…"


_NO_DEADLINE = httpx.Timeout(None, connect=CONNECT_TIMEOUT_S)

#: Request bodies as httpx's ``json=`` would encode them, by the C encoder built once.
_BODY_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def timeout_for(deadline: float | None) -> httpx.Timeout:
    """httpx timeouts for a request that must finish by ``deadline`` (monotonic)."""
    if deadline is None:
        return _NO_DEADLINE
    remaining = max(deadline - time.monotonic(), 0.001)
    return httpx.Timeout(remaining, connect=min(CONNECT_TIMEOUT_S, remaining))


def _socket_tracer(sockets: list[socket.socket]) -> Callable[[str, JsonObject], None]:
    """An httpcore trace hook that keeps the socket of each connection it opens in
    ``sockets``: a request waiting for its response headers has no other handle on its
    socket (the watchdog of a queued request shuts it: models/queue.py)."""

    def trace(event: str, info: JsonObject) -> None:
        if event == "connection.connect_tcp.complete":
            stream: object = info.get("return_value")
            extra = getattr(stream, "get_extra_info", None)
            sock = extra("socket") if extra is not None else None
            if isinstance(sock, socket.socket):
                sockets[:] = [s for s in sockets if s.fileno() != -1]
                sockets.append(sock)

    return trace


def _traced(sockets: list[socket.socket]) -> Callable[[httpx.Request], None]:
    """An httpx request hook that sets ``_socket_tracer(sockets)`` as the request's trace."""
    trace = _socket_tracer(sockets)

    def hook(request: httpx.Request) -> None:
        request.extensions["trace"] = trace

    return hook


class ErrorMapping:
    """How every client turns HTTP failures into our error tree. Mixed into a client that
    has ``spec`` (its label names the model) and ``public_endpoint`` (no credentials);
    ``idle_timeout_s``, when the client has one, names the idle-timeout case."""

    spec: ModelSpec
    public_endpoint: str

    def _status_error(self, response: httpx.Response) -> ProviderError:
        """ProviderError (RateLimited for 429/529) with the provider's own message and
        ``retry_after`` from the response headers."""
        raw = bytearray()
        for chunk in response.iter_bytes():
            raw += chunk
            if len(raw) >= ERROR_BODY_LIMIT:
                break
        status = response.status_code
        text = raw.decode("utf-8", "replace")
        counts = context_overflow(error_object(text), text)
        if counts is not None:
            return overflow_error(
                self.spec.label, self.public_endpoint, status, counts, error_detail(text)
            )
        kind = RateLimited if status in RATE_LIMIT_STATUSES else ProviderError
        detail = error_detail(text)
        error = kind(
            f"{self.spec.label}: HTTP {status} from {self.public_endpoint}: {detail}",
            endpoint=self.public_endpoint,
            status=status,
            detail=detail,
        )
        error.retry_after = retry_after_seconds(response.headers)
        return error

    def _timeout_error(self, request: ModelRequest) -> ModelTimeout:
        return ModelTimeout(
            f"{self.spec.label}: no complete reply from {self.public_endpoint} within the "
            f"{seconds_text(request.timeout_s or 0)} s deadline",
            endpoint=self.public_endpoint,
        )

    def _transport_error(
        self, exc: httpx.HTTPError, request: ModelRequest, deadline: float | None, fired: bool
    ) -> ModelError:
        past_deadline = deadline is not None and time.monotonic() >= deadline - 0.001
        if fired or (isinstance(exc, httpx.TimeoutException) and past_deadline):
            return self._timeout_error(request)
        idle = getattr(self, "idle_timeout_s", None)
        if isinstance(exc, httpx.ReadTimeout) and idle is not None:
            return ModelTimeout(
                f"{self.spec.label}: no byte from {self.public_endpoint} for "
                f"{seconds_text(idle)} s (the idle timeout)",
                endpoint=self.public_endpoint,
            )
        if isinstance(exc, httpx.TimeoutException):
            what = "could not connect" if isinstance(exc, httpx.ConnectTimeout) else "timed out"
            return TransportError(
                f"{self.spec.label}: {what} to {self.public_endpoint} "
                f"within {CONNECT_TIMEOUT_S:g} s",
                endpoint=self.public_endpoint,
            )
        if isinstance(exc, httpx.ConnectError):
            what = f"cannot connect to {self.public_endpoint}"
        else:
            what = f"the connection to {self.public_endpoint} broke"
        detail = " ".join(str(exc).split()) or type(exc).__name__
        return TransportError(f"{self.spec.label}: {what}: {detail}", endpoint=self.public_endpoint)


def media_type(response: httpx.Response) -> str:
    """The response's media type, lower case, without parameters ("" when none)."""
    content_type: str = response.headers.get("content-type", "")
    return content_type.partition(";")[0].strip().lower()


def _is_json(media: str) -> bool:
    return media == "application/json" or media.endswith("+json")


_SSE_STARTS = (b"data:", b"event:", b"id:", b":")


def _reads_as_stream(response: httpx.Response, asked: bool) -> bool:
    """Whether to read the reply as an SSE stream: a streamed request unless one JSON
    document came back; a non-streamed one only when the server sent SSE (said so, and
    the body, read whole, starts like it: a JSON body mislabelled as a stream stays a
    body)."""
    media = media_type(response)
    if asked:
        return not _is_json(media)
    if media != "text/event-stream":
        return False
    return response.read().lstrip().startswith(_SSE_STARTS)


class EmptyStream(TransportError):
    """A streamed reply (HTTP 200) that ended without one event: nothing arrived, not
    even the reason. ``ask_unstreamed`` (errors.py) is set where asking the same request
    again unstreamed can learn why (see ``ProtocolClient._may_overflow``)."""


def attach_partial(
    error: ModelError, partial: Generation | None, waited_s: float = 0.0
) -> ModelError:
    """Give ``error`` the contract every client keeps: ``partial`` (what arrived, or None),
    ``retry_after`` (None unless the server said) and ``waited_s`` (seconds its request
    waited in the server's queue: not the model's time)."""
    error.partial = partial
    error.waited_s = waited_s
    return error


def ignore_events(event: StreamEvent) -> None:
    """The event sink of a request nobody listens to: clients skip building the stream
    events of text and tool-call deltas for it (``emit is ignore_events``)."""


class _Tapped(httpx.SyncByteStream):
    """A response's raw byte stream that hands each chunk on to a ``Relay`` as it is read
    (encoded as the server sent it: the relay forwards the server's headers too)."""

    def __init__(self, inner: httpx.SyncByteStream, relay: Relay) -> None:
        self._inner = inner
        self._relay = relay

    def __iter__(self) -> Iterator[bytes]:
        send = self._relay.send
        for chunk in self._inner:
            send(chunk)
            yield chunk

    def close(self) -> None:
        self._inner.close()


class Received(Protocol):
    """What has arrived of one reply, as the shared request life reads it (each client
    keeps its own record of the rest)."""

    status: int | None
    #: The reply is complete: later events are ignored.
    done: bool
    #: The stream's repeating delta once learned (``StringSlot``), else None.
    slot: StringSlot | None
    #: The answer text and the thinking as they arrived, in pieces.
    text: list[str]
    thinking: list[str]
    #: The provider's own usage object, when it sent one.
    usage: JsonObject | None

    @property
    def anything(self) -> bool:
        """Whether anything arrived (a partial reply is worth keeping)."""
        ...

    def take_slot(self, piece: str, emit: EventSink) -> None:
        """The text of an event that matched ``slot``."""
        ...


ReceivedT = TypeVar("ReceivedT", bound=Received)


class ProtocolClient(ErrorMapping, Generic[ReceivedT]):
    """The request life every protocol client shares: build the body, POST it, map the
    HTTP status, arm the deadline watchdog, read the stream or the body, and turn any
    failure into our error tree with what arrived kept as ``partial``. Exceptions raised by
    ``on_event`` propagate unchanged (that is how a caller cancels a stream).

    A subclass calls ``_connect`` and supplies ``build_body``, ``_new_received``,
    ``_on_stream_event`` (one SSE event), ``_read_body`` (a whole JSON reply), what a
    finished stream shows (``_stream_finished``, named by ``STREAM_FINISH``) and the parts
    of a Generation only it knows (``_tool_calls``, ``_finish_reason``, ``_native_finish``,
    ``_normalise_usage``; ``_usage`` and ``_reasoning_blocks`` when it needs more); it
    overrides ``_settle`` if it holds text back. The stream loop, the "ended before its
    finish" error and the assembly of the Generation are here, once."""

    endpoint: str
    #: The response cache (models/response_cache.py), when the run has one.
    cache: ResponseCache | None = None
    #: The run's batch store (models/batch_store.py, ``--agentbench-batch``), when it has one.
    batch: BatchStore | None = None
    #: What a complete stream of the protocol carries, as the "ended before its finish"
    #: error names it.
    STREAM_FINISH = ""

    def _connect(
        self, spec: ModelSpec, endpoint: str, headers: Mapping[str, str], trust_env: bool
    ) -> None:
        """Set the endpoint and the options of this model's keep-alive HTTP/1.1 clients:
        one per thread (see ``_http``), sharing one TLS context."""
        self.spec = spec
        self.endpoint = endpoint
        self.public_endpoint = public_url(endpoint)
        self._url = httpx.URL(endpoint)  # parsed once, not on every request
        self._headers = {
            "user-agent": "pytest-agentbench",
            "content-type": "application/json",
            **headers,
        }
        self._trust_env = trust_env
        self._limits = httpx.Limits(max_connections=64, max_keepalive_connections=8)
        self._tls: ssl.SSLContext | None = None
        self._local = threading.local()
        self._clients: list[httpx.Client] = []
        self._clients_lock = threading.Lock()
        self._closed = False
        self._queue = ServerQueue()  # this model's requests in flight, in order
        self._answered = 0  # the largest request body a whole stream answered, in bytes

    @property
    def _http(self) -> httpx.Client:
        """This thread's httpx client. One client (one connection pool) per thread, not
        one for all: httpcore checks every idle connection of a pool (a ``poll`` call,
        under the pool's lock) each time it hands one out, so with one pool for 64
        rollout threads the pool, not the model, set the pace; per thread, a request
        costs the same at 64 or 128 in flight as at 8."""
        client: httpx.Client | None = getattr(self._local, "client", None)
        if client is None:
            with self._clients_lock:
                if self._tls is None and self._url.scheme == "http":
                    # never used (no redirects are followed): loading the CA bundle for
                    # a plain-HTTP endpoint (a local server) was ~20 ms of CPU per run
                    self._tls = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
                elif self._tls is None:
                    self._tls = httpx.create_ssl_context(verify=True, trust_env=self._trust_env)
            sockets: list[socket.socket] = []
            # made outside the lock: 128 rollout threads starting at once queued on it
            # (a thread-aware profile of a 128-in-flight run: 7.6 % of the threads' time)
            client = httpx.Client(
                verify=self._tls,
                headers=self._headers,
                http1=True,
                http2=False,
                trust_env=self._trust_env,
                limits=self._limits,
                # every request of this client (the scripted one's admin requests
                # too: they may open the connection a generation reuses) keeps the
                # sockets it opens
                event_hooks={"request": [_traced(sockets)]},
            )
            with self._clients_lock:
                if self._closed:
                    client.close()  # requests after close() fail as with a closed client
                else:
                    self._clients.append(client)
            self._local.client = client
            self._local.sockets = sockets
        return client

    @property
    def http(self) -> httpx.Client:
        """This thread's keep-alive httpx client, sending this model's headers (its key
        among them): for the provider's other endpoints (models/batch.py)."""
        return self._http

    @property
    def _sockets(self) -> list[socket.socket]:
        """The sockets of this thread's connections (closed ones pruned as new ones
        come), kept by the trace of its requests (``_socket_tracer``)."""
        self._http  # noqa: B018 (makes this thread's client and its list)
        sockets: list[socket.socket] = self._local.sockets
        return sockets

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.spec.label!r}, {self.public_endpoint!r})"

    def close(self) -> None:
        """Close every thread's client: requests in flight end promptly, later ones fail."""
        with self._clients_lock:
            self._closed = True
            clients, self._clients = self._clients, []
        for client in clients:
            client.close()

    def _assemble(
        self,
        *,
        text: str,
        thinking: str,
        tool_calls: tuple[ToolCall, ...],
        finish_reason: FinishReason | None,
        usage: Usage,
        native_usage: JsonObject | None,
        native_finish: JsonObject,
        status: int | None,
        body: JsonObject,
        started: float,
        error: str | None,
        waited_s: float = 0.0,
    ) -> Generation:
        """The Generation of a request, with its trajectory entry: the request body and
        the reply as received (``native_finish`` holds the protocol's own finish fields),
        and the seconds it waited in the server's queue when it did."""
        elapsed = time.monotonic() - started
        reply: JsonObject = {
            "status": status,
            "text": text,
            "thinking": thinking,
            "tool_calls": [
                {"id": call.id, "name": call.name, "arguments": call.raw_arguments}
                for call in tool_calls
            ],
            **native_finish,
            "usage": native_usage,
        }
        if error is not None:
            reply["error"] = error
        return Generation(
            text=text,
            thinking=thinking,
            tool_calls=tool_calls,
            finish_reason=finish_reason,
            usage=usage,
            usage_native=native_usage,
            exchange={
                "request": {"url": self.public_endpoint, "body": body},
                "response": reply,
                "elapsed_s": round(elapsed, 3),
                **({"waited_s": round(waited_s, 3)} if waited_s >= 0.0005 else {}),
            },
            elapsed_s=elapsed,
            waited_s=waited_s,
        )

    def _read_events(
        self,
        response: httpx.Response,
        received: ReceivedT,
        emit: EventSink,
        began: Callable[[], object] | None = None,
    ) -> None:
        """Every SSE event of the stream to ``_on_stream_event(type, data, received,
        emit)`` until ``received.done``. Once the handler has learned ``received.slot``
        (the stream's repeating delta), an event that matches it goes straight to
        ``received.take_slot`` with its text, undecoded, and a chunk that is exactly one
        such event is not even parsed."""
        parser = SSEParser()
        on_event = self._on_stream_event
        framed = framed_for = None
        for chunk in response.iter_bytes():
            if framed is not None and not received.done:
                piece = parser.feed_slot(chunk, framed)
                if piece is not None:
                    received.take_slot(piece, emit)
                    continue
            for event_type, data, _ in parser.feed_fields(chunk):
                if began is not None:  # the first event: the reply has begun
                    began()
                    began = None
                if received.done:
                    continue
                slot = received.slot
                if slot is not None:
                    piece = slot.match(data)
                    if piece is not None:
                        received.take_slot(piece, emit)
                        continue
                on_event(event_type, data, received, emit)
            if received.slot is not framed_for:  # framed on the chunk that taught the slot
                framed_for = received.slot
                framed = parser.framed(framed_for) if framed_for is not None else None

    def _json_object(self, data: str, what: str) -> JsonObject:
        """``data`` decoded as the JSON object it must be; anything else is a
        TransportError naming the endpoint and what arrived."""
        try:
            obj = parse_json(data)
        except ValueError:
            obj = None
        if not isinstance(obj, dict):
            raise TransportError(
                f"{self.spec.label}: malformed {what} from {self.public_endpoint}: "
                f"{error_detail(data)}",
                endpoint=self.public_endpoint,
            )
        return obj

    def _read_stream(
        self,
        response: httpx.Response,
        received: ReceivedT,
        emit: EventSink,
        began: Callable[[], object] | None = None,
    ) -> None:
        """A streamed reply, event by event (``began`` is called at the first event); a
        stream that ends without the protocol's finish is a TransportError (what arrived
        is kept as the partial)."""
        self._read_events(response, received, emit, began)
        self._stream_ended(received, emit)
        if not self._stream_finished(received):
            kind = TransportError if received.anything else EmptyStream
            raise kind(
                f"{self.spec.label}: the stream from {self.public_endpoint} ended before "
                f"its finish ({self.STREAM_FINISH})",
                endpoint=self.public_endpoint,
                status=received.status,
            )

    def _stream_ended(self, received: ReceivedT, emit: EventSink) -> None:
        """What a client completes when its stream's bytes end (nothing, unless it holds
        text back)."""

    def _usage(self, received: ReceivedT, text: str, thinking: str) -> Usage:
        """The usage the provider reported, normalised; counted from the text (flagged
        ``recovered``) when it reported none."""
        if received.usage is not None:
            return self._normalise_usage(received.usage)
        return recovered_usage(text, thinking)

    def _reasoning_blocks(self, received: ReceivedT) -> tuple[JsonObject, ...]:
        """Protocol-native reasoning blocks to send back unchanged (none by default)."""
        return ()

    def _generation(
        self,
        received: ReceivedT,
        body: JsonObject,
        started: float,
        error: str | None = None,
        waited_s: float = 0.0,
    ) -> Generation:
        """The Generation of what arrived (the whole reply, or a failed one's part)."""
        text = "".join(received.text)
        thinking = "".join(received.thinking)
        tool_calls = self._tool_calls(received)
        finish = self._finish_reason(received, tool_calls)
        generation = self._assemble(
            text=text,
            thinking=thinking,
            tool_calls=tool_calls,
            finish_reason=finish,
            usage=self._usage(received, text, thinking),
            native_usage=received.usage,
            native_finish=self._native_finish(received, finish),
            status=received.status,
            body=body,
            started=started,
            error=error,
            waited_s=waited_s,
        )
        blocks = self._reasoning_blocks(received)
        if blocks:
            generation = dataclasses.replace(generation, reasoning_blocks=blocks)
        return generation

    def _with_partial(
        self,
        error: ModelError,
        received: ReceivedT,
        body: JsonObject,
        started: float,
        place: Place | None = None,
    ) -> ModelError:
        """``error`` with what arrived as its ``partial`` Generation (None when nothing
        did) and the time its request waited in the server's queue."""
        self._settle(received)
        waited = place.waited_s if place is not None else 0.0
        partial = None
        if received.anything:
            partial = self._generation(received, body, started, error=str(error), waited_s=waited)
        return attach_partial(error, partial, waited)

    @staticmethod
    def _settle(received: ReceivedT) -> None:
        """What a client completes in ``received`` before a partial reply is assembled
        (nothing, unless the client holds text back)."""

    def request_headers(self, request: ModelRequest) -> dict[str, str]:
        """Headers specific to one request (none here; the scripted clients add some)."""
        return {}

    def _timeouts(self, deadline: float | None) -> httpx.Timeout:
        return timeout_for(deadline)

    def _key_endpoint(self, request: ModelRequest) -> str:
        """Where the request goes, as its cache key holds it: the endpoint without
        credentials (the scripted clients name their script instead, models/scripted.py)."""
        return self.public_endpoint

    def _cache_key(
        self, request: ModelRequest, body: JsonObject, headers: Mapping[str, str]
    ) -> str:
        from pytest_agentbench.models.response_cache import request_key

        return request_key(
            protocol=type(self).__name__,
            endpoint=self._key_endpoint(request),
            body=body,
            headers={**self._headers, **headers},
            epoch=request.metadata.get(REQUEST_EPOCH),
        )

    def replays(self, request: ModelRequest) -> bool:
        """Whether the response cache or the run's batch store holds the reply to
        ``request``, so it would be replayed, not sent (the spending cap reserves nothing
        for it: a batched reply was reserved and charged when its batch was submitted)."""
        cache, batch = self.cache, self.batch
        if (cache is None or not cache.reads) and batch is None:
            return False
        key = self.request_key(request)
        if batch is not None and batch.reply(key) is not None:
            return True
        return cache is not None and cache.reads and cache.path(key).is_file()

    def reply_usage(self, recorded: Recorded) -> Usage | None:
        """The usage a whole JSON reply reports (a batch's answer), normalised; None when
        it reports none."""
        try:
            data = json.loads(recorded.body)
        except ValueError:
            return None
        native = data.get("usage") if isinstance(data, dict) else None
        return self._normalise_usage(native) if isinstance(native, dict) else None

    def request_key(self, request: ModelRequest) -> str:
        """The cache key of ``request`` as ``generate`` would send it."""
        relay = request.relay
        body = self.build_body(request) if relay is None else self.relay_body(relay.body)
        headers = self.request_headers(request)
        if relay is not None:
            headers = {**relay.headers, **headers}
        return self._cache_key(request, body, headers)

    def generate(self, request: ModelRequest, on_event: EventSink | None = None) -> Generation:
        """One request, no retries (RetryingClient adds them). The reply is read as what
        the server sent, whatever was asked: an SSE stream (``text/event-stream``) as a
        stream, one JSON body as a body (servers and proxies that ignore ``stream``).

        ``request.timeout_s`` is the model's time: its clock starts when the request's
        turn at the server comes (models/queue.py), so time queued behind this client's
        earlier requests is not spent from it (``Generation.waited_s``, and
        ``waited_s`` on a raised error)."""
        place = self._queue.join()
        try:
            return self._generate(request, on_event, place)
        finally:
            place.leave()

    def _generate(
        self, request: ModelRequest, on_event: EventSink | None, place: Place
    ) -> Generation:
        relay = request.relay
        body = self.build_body(request) if relay is None else self.relay_body(relay.body)
        content = _BODY_ENCODER.encode(body).encode()
        started = place.sent
        timeout_s = request.timeout_s
        hard: float | None = None  # the bound of the whole request, queue included
        watchdog = Watchdog(None)
        if timeout_s is not None:
            hard = started + timeout_s + wait_limit_s(timeout_s)

            def moved(origin: float | None) -> None:  # blocked (None) or free again
                watchdog.move(origin + timeout_s if origin is not None else hard)

            origin = place.listen(moved)
            watchdog.deadline = origin + timeout_s if origin is not None else hard
            # the deadline may move before the headers come (the server is seen to
            # queue), and a drip of header bytes outlasts httpx's per-read timeouts:
            # the watchdog must be able to end the wait for them (this thread's sockets)
            watchdog.arm_early(self._sockets)
        deadline = watchdog.deadline
        first: list[float] = []  # when a streamed reply's first event came

        def began() -> None:
            first.append(time.monotonic())
            place.began()

        received = self._new_received()
        emit = on_event or ignore_events
        streamed = request.stream
        media = ""
        headers = self.request_headers(request)
        if relay is not None:
            headers = {**relay.headers, **headers}
        cache, key, hit, tee = self.cache, "", None, None
        batch, batched, batch_live = self.batch, False, None
        if cache is not None or batch is not None:
            key = self._cache_key(request, body, headers)
        if cache is not None:
            hit = cache.read(key)
        if hit is None and batch is not None:
            # answered by the provider's batch API (session/batch.py): replayed like a
            # cache hit; a planned request whose entry failed is sent, saying why
            hit = batch.reply(key)
            batched = hit is not None
            batch_live = None if batched else batch.failure(key)
        try:
            with (
                contextlib.nullcontext(hit.response(self._url))
                if hit is not None
                else self._http.stream(
                    "POST",
                    self._url,
                    content=content,
                    headers=headers,
                    timeout=self._timeouts(deadline),
                )
            ) as response:
                if cache is not None and hit is None and cache.writes:
                    from pytest_agentbench.models.response_cache import Tee

                    response.stream = tee = Tee(response.stream)  # type: ignore[arg-type]
                received.status = response.status_code
                if response.status_code >= 400:
                    raise self._status_error(response)
                media = media_type(response)
                if relay is not None and isinstance(response.stream, httpx.SyncByteStream):
                    relay.start(response.status_code, response.headers.multi_items())
                    response.stream = _Tapped(response.stream, relay)
                streamed = _reads_as_stream(response, request.stream)
                if not streamed:
                    place.began()  # an unstreamed reply begins whole (the listener moves)
                watchdog.arm(response)
                if streamed:
                    self._read_stream(response, received, emit, began)
                else:
                    self._read_body(response, received, emit)
        except EmptyStream as exc:
            relayed = relay is not None and relay.started
            failed = self._deadline_error(request, place) if watchdog.fired else exc
            failed.relayed = relayed
            failed.ask_unstreamed = not (watchdog.fired or relayed) and self._may_overflow(
                request, media, len(content)
            )
            raise self._with_partial(failed, received, body, started, place) from None
        except ModelError as exc:
            error = self._deadline_error(request, place) if watchdog.fired else exc
            error.relayed = relay is not None and relay.started
            raise self._with_partial(error, received, body, started, place) from None
        except httpx.HTTPError as exc:
            # httpx's own timeouts were set from the deadline as it stood when the request
            # was sent; the queue may have moved it on since: a read cut at that first
            # deadline is still the deadline's, never a transport error
            cut_at_deadline = (
                isinstance(exc, httpx.TimeoutException)
                and not isinstance(exc, httpx.ConnectTimeout)
                and deadline is not None
                and time.monotonic() >= deadline - 0.001
            )
            if (
                watchdog.fired
                or cut_at_deadline
                or (isinstance(exc, httpx.TimeoutException) and place.blocked)
            ):
                error = self._deadline_error(request, place)
            else:
                error = self._transport_error(exc, request, watchdog.deadline, watchdog.fired)
            error.relayed = relay is not None and relay.started
            raise self._with_partial(error, received, body, started, place) from exc
        finally:
            watchdog.finish()
        if streamed and hit is None:
            self._answered = max(self._answered, len(content))
        generation = self._generation(received, body, started, waited_s=place.waited_s)
        if first and hit is None:  # sent and streamed: its time to the first chunk
            ttfc = round(first[0] - started, 3)
            generation = dataclasses.replace(
                generation, exchange={**generation.exchange, "first_chunk_s": ttfc}
            )
        if batched and hit is not None:
            reply = generation.exchange["response"]
            if isinstance(reply, dict):
                reply["batch"] = True  # answered by the batch API: paid at its price
            if cache is not None and cache.writes:
                cache.write(key, hit, model=self.spec.label, endpoint=self.public_endpoint)
        elif hit is not None:
            reply = generation.exchange["response"]
            if isinstance(reply, dict):
                reply["cached"] = True  # replayed from the response cache: nothing was sent
        elif cache is not None and tee is not None and received.status is not None:
            from pytest_agentbench.models.response_cache import Recorded

            recorded = Recorded(
                received.status,
                response.headers.get("content-type", ""),
                response.headers.get("content-encoding", ""),
                b"".join(tee.chunks),
            )
            cache.write(key, recorded, model=self.spec.label, endpoint=self.public_endpoint)
        if batch_live is not None:
            reply = generation.exchange["response"]
            if isinstance(reply, dict):
                reply["batch_live"] = batch_live
        if streamed != request.stream and not batched:
            # the server chose: one JSON body for a streamed request, or a stream for a
            # non-streamed one; both are valid answers, read as what they are
            reply = generation.exchange["response"]
            if isinstance(reply, dict):  # (always: _assemble makes it)
                reply["streamed"] = streamed
        return generation

    def _may_overflow(self, request: ModelRequest, media: str, size: int) -> bool:
        """Whether a stream that ended without one event may be a context overflow, so
        that the same request unstreamed can say so (llama-cpp-python answers a prompt
        past its context so, streamed, and with the overflow error unstreamed): the
        server sent an event stream (an HTML page or a body of another type is only
        malformed) to a streamed request larger than any this server has streamed a
        whole reply to (one no larger fits its context)."""
        return request.stream and media == "text/event-stream" and size > self._answered

    def share_queue(self, other: ProtocolClient[Received]) -> None:
        """Count this client's requests in ``other``'s server queue: the same server
        reached over another protocol (models/siblings.py) queues them together, and is
        seen or declared to serve one at a time once for both."""
        self._queue = other._queue

    def serves_one_at_a_time(self) -> None:
        """Declare that this model's server serves one request at a time: time queued
        behind this client's other requests is credited (models/queue.py) from the start,
        not only once the server is seen to queue."""
        self._queue.declare_serial()

    def _deadline_error(self, request: ModelRequest, place: Place) -> ModelError:
        """The deadline passed: the model's (ModelTimeout), or, when its turn never came
        and no reply began, the queue's (QueueTimeout, not the model's time)."""
        if not place.blocked or request.timeout_s is None:
            return self._timeout_error(request)
        waited = seconds_text(place.waited_s)
        return QueueTimeout(
            f"{self.spec.label}: no reply from {self.public_endpoint} began within "
            f"{waited} s while earlier requests to it were still in flight (queued at "
            "the server; not the model's time)",
            endpoint=self.public_endpoint,
        )

    def relay_body(self, body: Mapping[str, JsonValue]) -> JsonObject:
        """A relayed body as sent: the caller's own, naming this client's model."""
        return {**body, "model": self.spec.model}

    # What each protocol client supplies (see the class docstring).

    def build_body(self, request: ModelRequest) -> JsonObject:
        """The protocol's request body for ``request``."""
        raise NotImplementedError

    def _new_received(self) -> ReceivedT:
        raise NotImplementedError

    def _read_body(self, response: httpx.Response, received: ReceivedT, emit: EventSink) -> None:
        raise NotImplementedError

    def _on_stream_event(
        self, event_type: str, data: str, received: ReceivedT, emit: EventSink
    ) -> None:
        raise NotImplementedError

    def _stream_finished(self, received: ReceivedT) -> bool:
        """Whether the stream delivered the protocol's end (a finish, a final event)."""
        raise NotImplementedError

    def _tool_calls(self, received: ReceivedT) -> tuple[ToolCall, ...]:
        raise NotImplementedError

    def _finish_reason(
        self, received: ReceivedT, tool_calls: tuple[ToolCall, ...]
    ) -> FinishReason | None:
        raise NotImplementedError

    def _native_finish(self, received: ReceivedT, finish: FinishReason | None) -> JsonObject:
        """The protocol's own finish fields, as the trajectory keeps them."""
        raise NotImplementedError

    @staticmethod
    def _normalise_usage(native: JsonObject) -> Usage:
        raise NotImplementedError
