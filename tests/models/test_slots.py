"""Concurrency sized from a local server's /slots, and a probe that never blocks a run."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from pytest_agentbench.models.slots import probe_slots


def serve(body: bytes | None, status: int = 200, hang: bool = False) -> Iterator[str]:
    released = threading.Event()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if hang:  # until the test is over (a probe that waited gets the body)
                released.wait(60)
            try:
                if body is None:
                    self.send_error(404)
                    return
                self.send_response(status)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            except OSError:  # the probe gave up and left; no traceback into another test
                pass

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        released.set()
        server.shutdown()
        server.server_close()


@pytest.fixture
def four_slots() -> Iterator[str]:
    yield from serve(json.dumps([{"id": i} for i in range(4)]).encode())


@pytest.mark.parametrize(
    ("body", "status", "expected"),
    [
        (json.dumps([{"id": 0}, {"id": 1}, {"id": 2}]).encode(), 200, 3),
        (json.dumps({"slots": [{"id": 0}]}).encode(), 200, 1),
        (None, 404, None),
        (b"not json", 200, None),
        (json.dumps([]).encode(), 200, None),
        (json.dumps({"slots": "many"}).encode(), 200, None),
    ],
)
def test_probe_reads_a_slot_list_and_nothing_else(
    body: bytes | None, status: int, expected: int | None
) -> None:
    for url in serve(body, status):
        assert probe_slots(url) == expected


def test_a_hanging_endpoint_gives_up_quickly() -> None:
    for url in serve(b"[1]", hang=True):
        assert probe_slots(url, timeout_s=0.3) is None


def test_openai_compat_runs_size_concurrency_from_slots(
    pytester: pytest.Pytester, four_slots: str
) -> None:
    pytester.makefile(".toml", bench_x='[[task]]\nid = "a"\ninput = "x"\ntarget = "x"\n')
    args = ["--agentbench", "--agentbench-model", "openai-compat/local"]
    result = pytester.runpytest(*args, "--agentbench-base-url", four_slots, "--co")
    result.stdout.fnmatch_lines(["agentbench: 4 rollouts in flight (the server's /slots)"])
    given = pytester.runpytest(
        *args, "--agentbench-base-url", four_slots, "--agentbench-concurrency", "2", "--co"
    )
    assert "/slots" not in given.stdout.str()
