"""A conversation that no longer fits the model's context: recognised in every shape the
servers use, never retried, never counted by the circuit breaker, and a harness problem
in a repair round never discards the first attempt's verdict.

The wire shapes: llama.cpp's ``exceed_context_size_error`` (HTTP 400, or 500 in older
builds, with ``n_prompt_tokens`` and ``n_ctx``), OpenAI's ``context_length_exceeded``
code, Anthropic's ``invalid_request_error`` "prompt is too long: N tokens > M maximum".
"""

from __future__ import annotations

import json
import random
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from pytest_agentbench.core.outcome import Failure
from pytest_agentbench.errors import ContextOverflow
from pytest_agentbench.models.base import ModelRequest, ModelSpec
from pytest_agentbench.models.breaker import BreakerClient, CircuitBreaker
from pytest_agentbench.models.openai_chat import OpenAIChatClient
from pytest_agentbench.models.overflow import context_overflow
from pytest_agentbench.models.retry import RetryingClient, RetryPolicy

LLAMA_CPP = {
    "error": {
        "code": 400,
        "message": "request (4476 tokens) exceeds the available context size (4096 tokens),"
        " try increasing it",
        "type": "exceed_context_size_error",
        "n_prompt_tokens": 4476,
        "n_ctx": 4096,
    }
}
LLAMA_CPP_OLD = {
    "error": {
        "code": 500,
        "message": "the request exceeds the available context size. try increasing the "
        "context size or enable context shift",
        "type": "exceed_context_size_error",
        "n_prompt_tokens": 1407,
        "n_ctx": 256,
    }
}
OPENAI = {
    "error": {
        "message": "This model's maximum context length is 8192 tokens. However, your "
        "messages resulted in 9000 tokens.",
        "type": "invalid_request_error",
        "param": "messages",
        "code": "context_length_exceeded",
    }
}


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (LLAMA_CPP["error"], (4476, 4096)),
        (LLAMA_CPP_OLD["error"], (1407, 256)),
        (
            {"code": 500, "message": "Context size has been exceeded.", "type": "server_error"},
            (None, None),
        ),
        (OPENAI["error"], (None, None)),
        (
            {
                "message": "This model's maximum context length is 2048 tokens. However, you "
                "requested 2285 tokens (2029 in the messages, 256 in the completion).",
                "type": "invalid_request_error",
                "code": "context_length_exceeded",
            },
            (2029, 2048),  # 2285 counted the 256 requested for the completion
        ),
        (
            {
                "message": "Requested tokens (2285) exceed context window of 2048",
                "type": "internal_server_error",
                "code": None,
            },
            (2285, 2048),
        ),
        (
            {
                "type": "invalid_request_error",
                "message": "prompt is too long: 201234 tokens > 200000 maximum",
            },
            (201234, 200000),
        ),
        (
            {
                "code": "context_length_exceeded",
                "message": "Your input exceeds the context window of this model.",
            },
            (None, None),
        ),
        ({"message": "bad request", "type": "invalid_request_error"}, None),
        ({"message": "max_tokens is too large: 300000", "code": "invalid_value"}, None),
        ({"type": "rate_limit_error", "message": "Too many tokens per minute"}, None),
        ("not an object", None),
    ],
    ids=[
        "llama.cpp-400",
        "llama.cpp-500",
        "llama.cpp-bare-500",
        "openai",
        "llama-cpp-python",
        "llama-cpp-python-500",
        "anthropic",
        "responses",
        "other-400",
        "max-tokens",
        "rate-limit",
        "string",
    ],
)
def test_overflow_shapes(error: Any, expected: Any) -> None:
    text = json.dumps({"error": error})
    assert context_overflow(error, text) == expected


class _Canned(BaseHTTPRequestHandler):
    """Answers every POST with the server's canned status and JSON body; counts them."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        server: Any = self.server
        server.hits += 1
        body = json.dumps(server.body).encode()
        self.send_response(server.status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def canned() -> Iterator[Any]:
    server: Any = ThreadingHTTPServer(("127.0.0.1", 0), _Canned)
    server.hits, server.status, server.body = 0, 400, {}
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def _client(server: Any) -> OpenAIChatClient:
    url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    return OpenAIChatClient(ModelSpec("openai-compat", "tiny"), url, trust_env=False)


ASK = ModelRequest(({"role": "user", "content": "q"},), timeout_s=30)


@pytest.mark.parametrize(
    ("status", "body", "counts"),
    [
        (400, LLAMA_CPP, (4476, 4096)),
        (500, LLAMA_CPP_OLD, (1407, 256)),
        (400, OPENAI, (None, None)),
    ],
    ids=["llama.cpp", "llama.cpp-500", "openai"],
)
def test_overflow_is_recognised_and_never_retried(
    canned: Any, status: int, body: dict[str, Any], counts: tuple[Any, Any]
) -> None:
    canned.status, canned.body = status, body
    client = RetryingClient(_client(canned), RetryPolicy(base_delay_s=0.001), rng=random.Random(1))
    try:
        with pytest.raises(ContextOverflow) as info:
            client.generate(ASK)
    finally:
        client.close()
    error = info.value
    assert canned.hits == 1, "a context overflow must not be retried"
    assert (error.prompt_tokens, error.context_tokens) == counts
    assert error.status == status
    assert "context overflow" in str(error)
    assert f"HTTP {status}" in str(error)


def test_overflow_in_a_200_body_is_recognised(canned: Any) -> None:
    canned.status, canned.body = 200, LLAMA_CPP
    client = _client(canned)
    try:
        with pytest.raises(ContextOverflow):
            client.generate(ModelRequest(ASK.messages, timeout_s=30, stream=False))
    finally:
        client.close()


def test_overflows_never_open_the_circuit_breaker(canned: Any) -> None:
    """Each conversation overflows on its own: many of them in a row (same message once
    the counts are masked) say nothing about the next, shorter one."""
    canned.status, canned.body = 400, LLAMA_CPP
    breaker = CircuitBreaker(threshold=2)
    client = BreakerClient(_client(canned), breaker)
    try:
        for _ in range(4):
            with pytest.raises(ContextOverflow):
                client.generate(ASK)
    finally:
        client.close()
    assert canned.hits == 4
    assert not breaker.is_open


SUITE = """
[suite]
name = "ctx"
verifier = {{ kind = "number" }}
repairs = 1

[[task]]
id = "fits"
input = "2 + 2?"
target = 4
scripted = ["4"]

[[task]]
id = "overflows-at-once"
input = "5 + 5?"
target = 10
scripted = [{{ error = {error} }}]

[[task]]
id = "overflows-in-repair"
input = "3 + 4?"
target = 7
scripted = ["8", {{ error = {error} }}]
"""

ERRORS = {
    "scripted": '{ status = 500, type = "exceed_context_size_error", message = "the request'
    ' exceeds the available context size. try increasing the context size" }',
    "scripted/openai-responses": '{ status = 400, message = "Your input exceeds the context'
    ' window of this model. Please adjust your input and try again." }',
    "scripted/anthropic": '{ status = 400, type = "invalid_request_error", message = '
    '"prompt is too long: 201234 tokens > 200000 maximum" }',
}


def _load(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))


@pytest.mark.parametrize("model", list(ERRORS))
def test_overflow_in_a_repair_round_keeps_the_first_attempt(
    pytester: pytest.Pytester, model: str
) -> None:
    pytester.makefile(".toml", bench_ctx=SUITE.format(error=ERRORS[model]))
    result = pytester.runpytest(
        "--agentbench", "--agentbench-model", model, "-p", "no:cacheprovider"
    )
    result.assert_outcomes(passed=1, errors=2)
    run = (pytester.path / "agentbench-results" / "latest").resolve()
    label = model.replace("/", "_")
    task = _load(run / "tasks" / "ctx" / f"overflows-in-repair[{label}]" / "result.json")
    assert task["outcome"] == "harness_error"
    assert task["failure_kind"] == "context_overflow"
    assert task["incomplete"] is True
    assert task["first_attempt_reward"] == 0.0
    assert task["final_reward"] is None
    assert task["attempts"][0]["verdict"]["reward"] == 0.0
    assert "context overflow" in task["error"]
    trajectory = _load(run / "tasks" / "ctx" / f"overflows-in-repair[{label}]" / "trajectory.json")
    failed = [entry for entry in trajectory["requests"] if "error" in entry]
    assert [entry["retries"] for entry in failed] == [[]], "never retried"

    at_once = _load(run / "tasks" / "ctx" / f"overflows-at-once[{label}]" / "result.json")
    assert (at_once["outcome"], at_once["failure_kind"]) == ("harness_error", "context_overflow")
    assert at_once["incomplete"] is False
    assert at_once["first_attempt_reward"] is None

    totals = _load(run / "summary.json")["totals"]
    assert totals["first_try_score"] == 0.5, "the first try of the overflowing task counts"
    assert totals["score"] == 1.0, "the repaired score has no round the harness lost"
    assert totals["incomplete"] == 1
    result.stdout.fnmatch_lines(
        ["score 1.000 ± 0.000 (n=1, *", "first try 0.500 ± 0.354 (n=2, *1 incomplete*"]
    )
    curve = [(r["round"], r["score"]["value"], r["score"]["n"]) for r in totals["repair_curve"]]
    assert curve == [(0, 0.5, 2), (1, 1.0, 1)], "the lost round leaves the curve, not round 0"


#: What llama-cpp-python answers an unstreamed request whose prompt (2029 tokens) and
#: requested completion (256) do not fit its 2048-token context; a streamed one gets an
#: empty 200 stream.
LLAMA_CPP_PYTHON_OVERFLOW = (
    "This model's maximum context length is 2048 tokens. However, you requested 2285 "
    "tokens (2029 in the messages, 256 in the completion). Please reduce the length of the "
    "messages or completion."
)
EMPTY_STREAM_OVERFLOW = {
    "empty_stream": True,
    "error": {"status": 400, "type": "invalid_request_error", "message": LLAMA_CPP_PYTHON_OVERFLOW},
}


@pytest.mark.parametrize("protocol", ["openai", "openai-responses", "anthropic"])
def test_an_empty_stream_is_asked_once_more_unstreamed_and_an_overflow_never_retried(
    protocol: str,
) -> None:
    """llama-cpp-python answers a streamed request that does not fit its context with
    HTTP 200 and a stream without one event; the same request unstreamed says why. The
    client asks once so, and the overflow is not retried (it was retried three times as
    "the stream ended before its finish", each retry queueing again)."""
    from pytest_agentbench.models.scripted import scripted_client
    from pytest_agentbench.scripted import ScriptedServer

    with ScriptedServer({"k": [EMPTY_STREAM_OVERFLOW]}) as server:
        client = RetryingClient(
            scripted_client(ModelSpec("scripted", protocol), server.url),
            RetryPolicy(base_delay_s=0.001),
            rng=random.Random(1),
        )
        request = ModelRequest(ASK.messages, timeout_s=30, metadata={"task": "k", "call": "0"})
        try:
            with pytest.raises(ContextOverflow) as info:
                client.generate(request)
        finally:
            client.close()
        sent = [entry["body"]["stream"] for entry in server.requests]
    assert sent == [True, False], "one streamed request, then one unstreamed: no retries"
    error = info.value
    # the empty stream's attempt is listed, marked as asked about (and, when the ask went
    # out on the connection the server closed after its empty stream, that one too: it
    # is asked again); the failure counts no retry (llama-cpp-python's case said 2)
    asked = [entry.get("asked_unstreamed") for entry in error.retries]
    assert asked in ([True], [True, True]), error.retries
    assert Failure.from_error(error).retries == 0
    assert (error.prompt_tokens, error.context_tokens) == (2029, 2048)
    assert error.completion_tokens == 256
    assert "(2029 prompt tokens + 256 requested completion tokens > 2048 context tokens)" in str(
        error
    )
    assert "asked again without streaming" in str(error)


def test_an_empty_stream_whose_request_answers_unstreamed_is_that_answer() -> None:
    from pytest_agentbench.models.scripted import scripted_client
    from pytest_agentbench.scripted import ScriptedServer

    with ScriptedServer({"k": [{"text": "4", "empty_stream": True}]}) as server:
        client = RetryingClient(
            scripted_client(ModelSpec("scripted", "scripted"), server.url),
            RetryPolicy(base_delay_s=0.001),
        )
        request = ModelRequest(ASK.messages, timeout_s=30, metadata={"task": "k", "call": "0"})
        try:
            generation = client.generate(request)
        finally:
            client.close()
    assert generation.text == "4"
    reply = generation.exchange["response"]
    assert reply["streamed"] is False and reply["after_empty_stream"] is True


def test_an_overflow_behind_an_empty_stream_ends_the_task_as_an_overflow(
    pytester: pytest.Pytester,
) -> None:
    """Through a real run, streamed (the default): the repair round's empty stream is a
    context-overflow harness error with the first attempt kept, never a timeout."""
    error = (
        '{ status = 400, type = "invalid_request_error", message = "'
        + LLAMA_CPP_PYTHON_OVERFLOW
        + '" }'
    )
    pytester.makefile(
        ".toml",
        bench_ctx=f"""
[suite]
name = "ctx"
verifier = {{ kind = "number" }}
repairs = 1

[[task]]
id = "overflows-in-repair"
input = "3 + 4?"
target = 7
scripted = ["8", {{ empty_stream = true, error = {error} }}]
""",
    )
    result = pytester.runpytest("--agentbench", "-p", "no:cacheprovider")
    result.assert_outcomes(errors=1)
    run = (pytester.path / "agentbench-results" / "latest").resolve()
    task = _load(run / "tasks" / "ctx" / "overflows-in-repair[scripted]" / "result.json")
    assert (task["outcome"], task["failure_kind"]) == ("harness_error", "context_overflow")
    assert task["first_attempt_reward"] == 0.0
    assert task["attempts"][0]["verdict"]["reward"] == 0.0
    assert "2029 prompt tokens" in task["error"]
