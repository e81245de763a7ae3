"""The scripted server's request handler: one client connection, each request routed
(the generation endpoints of ``WIRES`` and the admin endpoints), its reply picked from the
server's script book and written as the protocol's JSON or SSE stream, whole, delayed,
truncated, hanging or dropped as the reply says. The server itself (bind, serve, stop,
the request log and counts) is ``server.py``; the socket server that accepts and tracks
its connections, and the ``Provider`` protocol the handler knows it by, ``loopback.py``.
"""

from __future__ import annotations

import contextlib
import json
import select
import socket
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler
from typing import TYPE_CHECKING

from pytest_agentbench.core.jsontypes import JsonObject, JsonValue
from pytest_agentbench.scripted.answer import WIRES as WIRES  # (re-exported: agents/gateway.py)
from pytest_agentbench.scripted.answer import (
    choose,
    completion_body,
    log_entry,
    model_name,
    named_script,
    reply_usage,
)
from pytest_agentbench.scripted.loopback import LoopbackHTTPServer, Provider
from pytest_agentbench.scripted.script import Reply
from pytest_agentbench.scripted.wire import Wire
from pytest_agentbench.scripted.wire_chat import CHAT_WIRE

if TYPE_CHECKING:
    pass

_BATCH_BYTES = 16384
#: How often a serial server's queued stream hears a ping comment while it waits.
_PING_S = 1.0


def is_batch_route(route: str) -> bool:
    """Whether ``route`` (a path below ``/v1``) is a batch or file endpoint (batches.py)."""
    parts = route.strip("/").split("/")
    return parts[0] in ("files", "batches") or parts[:2] == ["messages", "batches"]


class ChatHandler(BaseHTTPRequestHandler):
    """One client connection (HTTP/1.1 keep-alive); the reply logic for each request."""

    protocol_version = "HTTP/1.1"
    server: LoopbackHTTPServer
    _flying = False
    _chunked = False  # this request's chunked response has begun
    server_version = "agentbench-scripted"

    def setup(self) -> None:
        super().setup()
        # Headers and body go out in separate writes; without this, Nagle's algorithm and
        # delayed ACKs would add ~40 ms to every keep-alive request.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: object) -> None:
        pass

    @property
    def _provider(self) -> Provider:
        return self.server.provider

    def _route(self) -> str:
        path = self.path.split("?", 1)[0].rstrip("/")
        return path.removeprefix("/v1") or "/"

    def do_GET(self) -> None:
        route = self._route()
        if is_batch_route(route):
            self._batch_call("GET", route, b"")
        elif route == "/_agentbench/health":
            self._send_json(200, {"ok": True})
        elif route == "/_agentbench/stats":
            self._send_json(200, dict[str, JsonValue](self._provider.stats))
        elif route == "/_agentbench/requests":
            self._send_json(200, list[JsonValue](self._provider.requests))
        elif route == "/models":
            models: list[JsonValue] = [
                {"id": key, "object": "model", "created": 0, "owned_by": "agentbench"}
                for key in self._provider.script_keys
            ]
            self._send_json(200, {"object": "list", "data": models})
        else:
            self._send_error(404, f"unknown endpoint GET {self.path}")

    def do_POST(self) -> None:
        self._chunked = False
        route = self._route()
        if is_batch_route(route):
            raw = self._read_raw()
            if raw is not None:
                self._batch_call("POST", route, raw)
            return
        body = self._read_json()
        if body is None:
            return
        wire = WIRES.get(route)
        if wire is not None:
            self._provider._flight(+1)
            self._flying = True
            try:
                self._generate(body, wire)
            finally:
                self._land()
        elif route == "/_agentbench/scripts":
            self._register(body)
        else:
            self._send_error(404, f"unknown endpoint POST {self.path}")

    def _batch_call(self, method: str, route: str, raw: bytes) -> None:
        """A provider batch API call: answered by the server's ``BatchOffice``."""
        content_type = self.headers.get("content-type", "")
        answer = self._provider._batches.serve(method, route, raw, content_type)
        self.send_response(answer.status)
        self.send_header("Content-Type", answer.content_type)
        self.send_header("Content-Length", str(len(answer.body)))
        self.end_headers()
        self.wfile.write(answer.body)

    def _read_raw(self, what: str = "the body") -> bytes | None:
        """The request's body bytes; None without a Content-Length, after answering."""
        length = self.headers.get("content-length")
        if length is None or not length.isdigit():
            self.close_connection = True
            self._send_error(411, f"send {what} with a Content-Length header")
            return None
        return self.rfile.read(int(length))

    def _read_json(self) -> JsonObject | None:
        """The request's JSON object (the JSON edge of the server: decoded here, narrowed
        at once); None when it is not one, after answering with the error."""
        raw = self._read_raw("a JSON body")
        if raw is None:
            return None
        try:
            body: JsonValue = json.loads(raw)
        except ValueError as exc:
            self._send_error(400, f"the request body is not valid JSON: {exc}")
            return None
        if not isinstance(body, dict):
            self._send_error(400, "the request body must be a JSON object")
            return None
        return body

    def _register(self, body: JsonObject) -> None:
        try:
            if "scripts" in body:
                self._provider.add_scripts(body["scripts"])
            if "default" in body:
                self._provider.set_default(body["default"])
        except ValueError as exc:
            self._send_error(400, str(exc))
            return
        self._send_json(200, {"ok": True, "keys": list[JsonValue](self._provider.script_keys)})

    def _generate(self, body: JsonObject, wire: Wire) -> None:
        named = named_script(self.headers.get)
        if isinstance(named, str):
            self._send_error(400, named, wire=wire)
            return
        choice = choose(self._provider._book, wire, self._route(), body, named)
        self._provider._record(log_entry(self.path, choice, body, dict(self.headers.items())))
        if choice.refusal is not None:  # refused as the API would: no turn is used up
            self._send_error(400, choice.refusal.message, param=choice.refusal.param, wire=wire)
            return
        if choice.reply is None:
            self._send_error(404, choice.missing, wire=wire)
            return
        reply = choice.reply
        serial = self._provider._serial
        if serial is None:
            self._serve(reply, body, wire)
            return
        streamed = body.get("stream") is True and reply.error is None
        if streamed:  # the headers go out at once; the events when its turn comes
            self._start_chunked("text/event-stream; charset=utf-8")
        while not serial.acquire(timeout=_PING_S):
            if self._provider._stopping.is_set():
                self._drop()
                return
            if streamed:
                ping = b": ping\r\n\r\n"
                self.wfile.write(b"%x\r\n%s\r\n" % (len(ping), ping))
        try:
            self._serve(reply, body, wire)
        finally:
            serial.release()

    def _serve(self, reply: Reply, body: JsonObject, wire: Wire) -> None:
        """Answer with ``reply``: delayed, an error, an empty stream, a stream or a body."""
        if reply.delay_s and self._provider._stopping.wait(reply.delay_s):
            self._drop()
            return
        if reply.empty_stream and body.get("stream") is True:
            self._start_chunked("text/event-stream; charset=utf-8")
            self._land()
            self.wfile.write(b"0\r\n\r\n")
            self.close_connection = True  # as llama-cpp-python's server does after it
            return
        if reply.error is not None:
            error = reply.error
            extra = (
                {"Retry-After": f"{error.retry_after:g}"} if error.retry_after is not None else {}
            )
            self._send_error(error.status, error.message, error.type, extra, wire=wire)
            return
        if body.get("stream") is True:
            usage = reply_usage(wire, reply, body) if wire.stream_usage(body) else None
            self._stream(wire, reply, model_name(body), usage, body)
        else:
            self._complete(wire, reply, body)

    def _complete(self, wire: Wire, reply: Reply, body: JsonObject) -> None:
        if reply.hang:
            self._start_chunked("application/json")
            self._hang()
            return
        data = json.dumps(completion_body(wire, reply, body)).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if reply.truncate:
            self.wfile.write(data[: len(data) // 2])
            self._drop()
            return
        self._land()
        self.wfile.write(data)

    def _stream(
        self,
        wire: Wire,
        reply: Reply,
        model: str,
        usage: JsonObject | None,
        body: JsonObject,
    ) -> None:
        self._start_chunked("text/event-stream; charset=utf-8")
        if reply.hang:
            self._hang()
            return
        events = wire.stream_events(reply, model, usage, body)
        if self._send_events(events, reply.chunk_delay_s) and not reply.truncate:
            self.wfile.write(b"0\r\n\r\n")
        else:
            self._drop()

    def _send_events(self, events: list[bytes], delay_s: float) -> bool:
        """Write SSE events as HTTP chunks; False when the server began stopping."""
        pending: list[bytes] = []
        size = 0
        for index, event in enumerate(events):
            if delay_s and index and self._provider._stopping.wait(delay_s):
                return False
            pending.append(b"%x\r\n%s\r\n" % (len(event), event))
            size += len(event)
            if delay_s or size >= _BATCH_BYTES or index == len(events) - 1:
                if index == len(events) - 1:
                    self._land()
                self.wfile.write(b"".join(pending))
                pending.clear()
                size = 0
        return True

    def _start_chunked(self, content_type: str) -> None:
        if self._chunked:
            return  # (a serial server sent the headers before the request's turn)
        self._chunked = True
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.wfile.flush()

    def _hang(self) -> None:
        """Send nothing more until the client gives up or the server stops."""
        while not self._provider._stopping.wait(0.05):
            readable, _, _ = select.select([self.connection], [], [], 0)
            if readable:
                try:
                    if not self.connection.recv(1, socket.MSG_PEEK):
                        break
                except OSError:
                    break
        self._drop()

    def _land(self) -> None:
        """The generation request ends here for the in-flight count: before its last
        write, so a client can never start its next request while this one still counts."""
        if self._flying:
            self._flying = False
            self._provider._flight(-1)

    def _drop(self) -> None:
        """Close the connection now, mid-response: the client sees a broken stream."""
        self._land()
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)

    def _send_json(
        self, status: int, obj: JsonValue, headers: Mapping[str, str] | None = None
    ) -> None:
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self._land()
        self.wfile.write(data)

    def _send_error(
        self,
        status: int,
        message: str,
        error_type: str = "invalid_request_error",
        headers: Mapping[str, str] | None = None,
        *,
        wire: Wire = CHAT_WIRE,
        param: str | None = None,
    ) -> None:
        self._send_json(status, wire.error_body(status, message, error_type, param), headers)
