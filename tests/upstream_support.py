"""An independent model server for tests that must see what the scripted provider hides
or cannot play: a standard-library HTTP server on 127.0.0.1 that records every request
whole (its headers unredacted, their names lower-cased: which key reached the model) and
answers every Chat Completions or Anthropic Messages request with one tool call and a
finish reason the test chooses (``stop`` / ``end_turn`` beside the tool call, as some
local servers say), streamed when asked."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

#: The tool call every reply carries.
CALL_ID, CALL_NAME, CALL_ARGS = "call_7", "read_file", {"path": "notes.txt"}


@dataclass
class Upstream:
    """The server's URL, what it received, and the finish it says beside its tool call."""

    url: str = ""
    requests: list[dict[str, Any]] = field(default_factory=list)
    chat_finish: str = "stop"
    messages_stop: str = "end_turn"


def _sse(data: object, event: str | None = None) -> bytes:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(data)}\n\n".encode()


def _chat(upstream: Upstream, stream: bool, usage: bool) -> tuple[str, bytes]:
    call = {
        "id": CALL_ID,
        "type": "function",
        "function": {"name": CALL_NAME, "arguments": json.dumps(CALL_ARGS)},
    }
    counts = {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8}
    head = {"id": "chatcmpl-1", "created": 1, "model": "m"}
    if not stream:
        message = {"role": "assistant", "content": "Reading.", "tool_calls": [call]}
        choice = {"index": 0, "message": message, "finish_reason": upstream.chat_finish}
        whole = {**head, "object": "chat.completion", "choices": [choice], "usage": counts}
        return "application/json", json.dumps(whole).encode()
    chunk = {**head, "object": "chat.completion.chunk"}
    deltas: list[tuple[dict[str, object], str | None]] = [
        ({"role": "assistant", "content": "Reading."}, None),
        ({"tool_calls": [{"index": 0, **call}]}, None),
        ({}, upstream.chat_finish),
    ]
    out = b"".join(
        _sse({**chunk, "choices": [{"index": 0, "delta": d, "finish_reason": f}]})
        for d, f in deltas
    )
    if usage:
        out += _sse({**chunk, "choices": [], "usage": counts})
    return "text/event-stream", out + b"data: [DONE]\n\n"


def _messages(upstream: Upstream, stream: bool) -> tuple[str, bytes]:
    text = {"type": "text", "text": "Reading."}
    use = {"type": "tool_use", "id": CALL_ID, "name": CALL_NAME, "input": CALL_ARGS}
    message = {"id": "msg_1", "type": "message", "role": "assistant", "model": "m"}
    if not stream:
        whole = {
            **message,
            "content": [text, use],
            "stop_reason": upstream.messages_stop,
            "stop_sequence": None,
            "usage": {"input_tokens": 5, "output_tokens": 3},
        }
        return "application/json", json.dumps(whole).encode()
    start = {
        **message,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 5, "output_tokens": 0},
    }
    out = _sse({"type": "message_start", "message": start}, "message_start")
    blocks: list[tuple[dict[str, object], dict[str, object]]] = [
        ({"type": "text", "text": ""}, {"type": "text_delta", "text": "Reading."}),
        (
            {**use, "input": {}},
            {"type": "input_json_delta", "partial_json": json.dumps(CALL_ARGS)},
        ),
    ]
    for index, (opening, delta) in enumerate(blocks):
        out += _sse(
            {"type": "content_block_start", "index": index, "content_block": opening},
            "content_block_start",
        )
        out += _sse(
            {"type": "content_block_delta", "index": index, "delta": delta},
            "content_block_delta",
        )
        out += _sse({"type": "content_block_stop", "index": index}, "content_block_stop")
    finish = {"stop_reason": upstream.messages_stop, "stop_sequence": None}
    out += _sse(
        {"type": "message_delta", "delta": finish, "usage": {"output_tokens": 3}},
        "message_delta",
    )
    return "text/event-stream", out + _sse({"type": "message_stop"}, "message_stop")


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("content-length") or 0))
        body = json.loads(raw or b"{}")
        upstream = self.server.upstream
        upstream.requests.append(
            {
                "path": self.path,
                "headers": {k.lower(): v for k, v in self.headers.items()},
                "body": body,
            }
        )
        stream = body.get("stream") is True
        if self.path.endswith("/chat/completions"):
            usage = bool((body.get("stream_options") or {}).get("include_usage"))
            kind, data = _chat(upstream, stream, usage)
        elif self.path.endswith("/messages"):
            kind, data = _messages(upstream, stream)
        else:
            kind, data = "application/json", b'{"error": {"message": "no such endpoint"}}'
            self.send_response(404)
            self.send_header("content-type", kind)
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        self.send_response(200)
        self.send_header("content-type", kind)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    upstream: Upstream


@contextmanager
def upstream_server(**finishes: str) -> Iterator[Upstream]:
    """An Upstream served on a free port of 127.0.0.1 while the block runs."""
    upstream = Upstream(**finishes)
    server = _Server(("127.0.0.1", 0), _Handler)
    server.upstream = upstream
    upstream.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield upstream
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
