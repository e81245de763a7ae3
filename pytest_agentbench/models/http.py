"""The request life every protocol client shares: the body sent, the reply read as a
stream or a body, the generation assembled, failures mapped with what arrived kept (the
connections are in models/connections.py, how a reply is judged in models/http_replies.py,
the deadline watchdog in models/deadline.py)."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import time
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

from pytest_agentbench.core.durations import seconds_text
from pytest_agentbench.core.jsontypes import JsonObject, JsonValue
from pytest_agentbench.core.stream import EventSink, StreamEvent
from pytest_agentbench.core.urls import public_url
from pytest_agentbench.errors import ModelError, QueueTimeout
from pytest_agentbench.models.base import (
    REQUEST_EPOCH,
    Generation,
    ModelRequest,
    ModelSpec,
    Relay,
    Usage,
)
from pytest_agentbench.models.connections import ThreadConnections, timeout_for
from pytest_agentbench.models.deadline import Watchdog
from pytest_agentbench.models.http_replies import (
    EmptyStream,
    ErrorMapping,
    media_type,
    reads_as_stream,
)
from pytest_agentbench.models.queue import Place, ServerQueue, wait_limit_s
from pytest_agentbench.models.reply_reader import Received, ReceivedT, ReplyReader
from pytest_agentbench.models.wire import (
    ByteStream,
    ConnectTimeout,
    Response,
    Timeout,
    WireError,
    WireTimeout,
)

if TYPE_CHECKING:  # (imported where used: a run with neither pays nothing for them)
    from pytest_agentbench.models.batch_store import BatchStore
    from pytest_agentbench.models.response_cache import Recorded, ResponseCache

#: Request bodies as httpx's ``json=`` would encode them, by the C encoder built once.
_BODY_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def ignore_events(event: StreamEvent) -> None:
    """The event sink of a request nobody listens to: clients skip building the stream
    events of text and tool-call deltas for it (``emit is ignore_events``)."""


class _Tapped:
    """A response's raw byte stream that hands each chunk on to a ``Relay`` as it is read
    (encoded as the server sent it: the relay forwards the server's headers too)."""

    def __init__(self, inner: ByteStream, relay: Relay) -> None:
        self._inner = inner
        self._relay = relay

    def __iter__(self) -> Iterator[bytes]:
        send = self._relay.send
        for chunk in self._inner:
            send(chunk)
            yield chunk

    def close(self) -> None:
        self._inner.close()


class ProtocolClient(ErrorMapping, ThreadConnections, ReplyReader[ReceivedT]):
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
    finish" error and the assembly of the Generation are in models/reply_reader.py, once."""

    endpoint: str
    #: The response cache (models/response_cache.py), when the run has one.
    cache: ResponseCache | None = None
    #: The run's batch store (models/batch_store.py, ``--agentbench-batch``), when it has one.
    batch: BatchStore | None = None

    def _connect(
        self, spec: ModelSpec, endpoint: str, headers: Mapping[str, str], trust_env: bool
    ) -> None:
        """Set the endpoint and the options of this model's keep-alive HTTP/1.1 clients:
        one per thread (models/connections.py), sharing one TLS context."""
        self.spec = spec
        self.endpoint = endpoint
        self.public_endpoint = public_url(endpoint)
        self._open(endpoint, headers, trust_env)
        self._queue = ServerQueue()  # this model's requests in flight, in order
        self._answered = 0  # the largest request body a whole stream answered, in bytes

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.spec.label!r}, {self.public_endpoint!r})"

    def request_headers(self, request: ModelRequest) -> dict[str, str]:
        """Headers specific to one request (none here; the scripted clients add some)."""
        return {}

    def _timeouts(self, deadline: float | None) -> Timeout:
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
            # queue), and a drip of header bytes outlasts the per-read timeouts:
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
                contextlib.nullcontext(hit.response())
                if hit is not None
                else self._post(content, headers, self._timeouts(deadline))
            ) as response:
                if cache is not None and hit is None and cache.writes:
                    from pytest_agentbench.models.response_cache import Tee

                    response.stream = tee = Tee(response.stream)
                received.status = response.status_code
                if response.status_code >= 400:
                    raise self._status_error(response)
                media = media_type(response)
                if relay is not None:
                    relay.start(response.status_code, response.headers.multi_items())
                    response.stream = _Tapped(response.stream, relay)
                streamed = reads_as_stream(response, request.stream)
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
        except WireError as exc:
            # the request's own timeouts were set from the deadline as it stood when the request
            # was sent; the queue may have moved it on since: a read cut at that first
            # deadline is still the deadline's, never a transport error
            cut_at_deadline = (
                isinstance(exc, WireTimeout)
                and not isinstance(exc, ConnectTimeout)
                and deadline is not None
                and time.monotonic() >= deadline - 0.001
            )
            if (
                watchdog.fired
                or cut_at_deadline
                or (isinstance(exc, WireTimeout) and place.blocked)
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

    def _read_body(self, response: Response, received: ReceivedT, emit: EventSink) -> None:
        raise NotImplementedError
