"""A small OpenAI-compatible server that injects one fault per model name, on 127.0.0.1,
built on the standard library alone (independent of the scripted provider, whose own
code must not decide what a fault looks like).

``POST /v1/chat/completions`` with ``"model": NAME``:

- ``hang``: reads the request and never answers;
- ``headers``: sends the headers of an event stream (HTTP 200), then nothing;
- ``headers-json``: sends the headers of a JSON body of 100 bytes, then nothing;
- ``drip``: sends the headers of an event stream, then one comment byte a second, forever;
- ``html``: HTTP 200 with an HTML page;
- ``empty``: HTTP 200, ``text/event-stream``, and no body at all;
- anything else: a proper streamed answer "ok".

``requests`` counts the requests per model name. Hanging answers end when the server
stops.

``DyingServer`` is a plainer one: every request answered "7" (no stream), a given
number of times, then it stops listening, as a model's server that crashed mid-run.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class FaultServer:
    def __init__(self) -> None:
        self.requests: Counter[str] = Counter()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                model = str(body.get("model"))
                with owner._lock:
                    owner.requests[model] += 1
                fault = getattr(self, "_" + model.replace("-", "_"), None)
                (fault or self._answer)()

            def _head(self, media: str, length: int | None = None) -> None:
                self.send_response(200)
                self.send_header("content-type", media)
                if length is not None:
                    self.send_header("content-length", str(length))
                else:
                    self.send_header("connection", "close")
                self.end_headers()
                self.wfile.flush()

            def _hang(self) -> None:
                owner._stop.wait()

            def _headers(self) -> None:
                self._head("text/event-stream")
                owner._stop.wait()

            def _headers_json(self) -> None:
                self._head("application/json", 100)
                owner._stop.wait()

            def _drip(self) -> None:
                self._head("text/event-stream")
                while not owner._stop.wait(1.0):
                    self.wfile.write(b":")
                    self.wfile.flush()

            def _html(self) -> None:
                page = b"<html><body><h1>Welcome to nginx!</h1></body></html>"
                self._head("text/html", len(page))
                self.wfile.write(page)

            def _empty(self) -> None:
                self._head("text/event-stream", 0)

            def _answer(self) -> None:
                chunk = {"choices": [{"index": 0, "delta": {"content": "ok"}}]}
                end = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
                data = b"".join(
                    b"data: " + json.dumps(event).encode() + b"\n\n" for event in (chunk, end)
                )
                data += b"data: [DONE]\n\n"
                self._head("text/event-stream", len(data))
                self.wfile.write(data)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    def __enter__(self) -> FaultServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._httpd.shutdown()
        self._httpd.server_close()


class DyingServer:
    """A stdlib Chat Completions server on 127.0.0.1 that answers "7" with usage (not
    streamed), ``lives`` times (None: for as long as it runs), then stops listening, as
    a model's server that crashed mid-run. ``served`` counts the answers."""

    def __init__(self, lives: int | None = None, port: int = 0) -> None:
        self.lives = lives
        self.served = 0
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if owner.lives is not None and owner.served >= owner.lives:
                    # dead: a request that slipped in before the listener stopped gets no reply
                    self.close_connection = True
                    return
                body = json.dumps(
                    {
                        "id": "c",
                        "object": "chat.completion",
                        "model": "m",
                        "choices": [
                            {
                                "index": 0,
                                "message": {"role": "assistant", "content": "7"},
                                "finish_reason": "stop",
                            }
                        ],
                        "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6},
                    }
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                owner.served += 1
                if owner.lives is not None and owner.served >= owner.lives:
                    threading.Thread(target=owner.stop).start()  # it dies after this reply

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.stopped = False

    def stop(self) -> None:
        if not self.stopped:
            self.stopped = True
            self.server.shutdown()
            self.server.server_close()
