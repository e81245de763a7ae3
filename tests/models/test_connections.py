"""A generation's POST goes straight to the thread's transport (models/connections.py),
not through ``httpx.Client.stream``: it must still be the request the client would send
(the same headers, the client's and the request's own), and a run whose environment
names a proxy must still reach the model through that proxy."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from pytest_agentbench.models.base import ModelRequest, ModelSpec
from pytest_agentbench.models.openai_chat import OpenAIChatClient

STREAM = (
    b'data: {"choices":[{"index":0,"delta":{"content":"ok"},"finish_reason":null}]}\n\n'
    b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n'
    b"data: [DONE]\n\n"
)


class Recording:
    """An OpenAI-compatible server on 127.0.0.1 that keeps each request's target (the
    path, or the whole URL when it is asked as a proxy) and headers, and answers "ok"
    streamed."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, dict[str, str]]] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("content-length") or 0))
                headers = {name.lower(): value for name, value in self.headers.items()}
                owner.seen.append((self.path, headers))
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("content-length", str(len(STREAM)))
                self.end_headers()
                self.wfile.write(STREAM)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def recording() -> Iterator[Recording]:
    server = Recording()
    yield server
    server.stop()


def _client(base_url: str, *, trust_env: bool) -> OpenAIChatClient:
    return OpenAIChatClient(
        ModelSpec("openai-compat", "m"),
        base_url,
        "sk-test-key",
        extra_headers={"x-team": "evals"},
        trust_env=trust_env,
    )


REQUEST = ModelRequest(messages=({"role": "user", "content": "q"},), timeout_s=30)


def test_a_generation_carries_the_headers_the_client_itself_sends(
    recording: Recording,
) -> None:
    client = _client(recording.url + "/v1", trust_env=False)
    try:
        assert client.generate(REQUEST).text == "ok"
        body = json.dumps(client.build_body(REQUEST)).encode()
        with client.http.stream("POST", client.endpoint, content=body) as response:
            response.read()
    finally:
        client.close()
    (direct_path, direct), (client_path, through_client) = recording.seen
    assert direct_path == client_path == "/v1/chat/completions"
    direct.pop("content-length")
    through_client.pop("content-length")
    assert direct == through_client
    assert direct["authorization"] == "Bearer sk-test-key"
    assert direct["x-team"] == "evals"
    assert direct["user-agent"] == "pytest-agentbench"


def test_a_request_header_of_its_own_replaces_the_clients(recording: Recording) -> None:
    class Tagged(OpenAIChatClient):
        def request_headers(self, request: ModelRequest) -> dict[str, str]:
            return {"X-Team": "judges", "x-request": "1"}

    client = Tagged(
        ModelSpec("openai-compat", "m"),
        recording.url + "/v1",
        "sk-test-key",
        extra_headers={"x-team": "evals"},
        trust_env=False,
    )
    try:
        client.generate(REQUEST)
    finally:
        client.close()
    [(_, headers)] = recording.seen
    assert headers["x-team"] == "judges"
    assert headers["x-request"] == "1"
    assert headers["authorization"] == "Bearer sk-test-key"


def test_a_proxy_named_by_the_environment_still_carries_the_request(
    recording: Recording, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the "proxy" is the recording server: asked as a proxy, it sees the whole URL
    for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy", "HTTPS_PROXY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", recording.url)
    model_at = "http://127.0.0.1:9/v1"  # nothing listens there: only the proxy answers
    client = _client(model_at, trust_env=True)
    try:
        assert client.generate(REQUEST).text == "ok"
    finally:
        client.close()
    [(target, headers)] = recording.seen
    assert target == model_at + "/chat/completions"
    assert headers["authorization"] == "Bearer sk-test-key"


def test_a_closed_client_refuses_a_generation(recording: Recording) -> None:
    client = _client(recording.url + "/v1", trust_env=False)
    client.generate(REQUEST)  # this thread's client made
    client.close()
    with pytest.raises(RuntimeError, match="closed"):
        client.generate(REQUEST)
    assert len(recording.seen) == 1


def test_a_user_and_password_in_the_url_are_still_sent_as_basic_auth(
    recording: Recording,
) -> None:
    with_user = recording.url.replace("http://", "http://user:pw@") + "/v1"
    client = OpenAIChatClient(ModelSpec("openai-compat", "m"), with_user, None, trust_env=False)
    try:
        client.generate(REQUEST)
    finally:
        client.close()
    [(_, headers)] = recording.seen
    assert headers["authorization"] == "Basic dXNlcjpwdw=="
