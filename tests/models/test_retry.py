"""Retries and the circuit breaker, driven through the real scripted server on 127.0.0.1.

The clients here send no script header: the body's ``model`` names the script, and the
server's counter for that script advances on every request, so each attempt of one
``generate`` call gets the next reply of the script.
"""

from __future__ import annotations

import contextlib
import random
import re
import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from pytest_agentbench.errors import (
    CircuitOpen,
    ModelError,
    ModelTimeout,
    ProviderError,
    TransportError,
)
from pytest_agentbench.models.base import Generation, ModelRequest, ModelSpec
from pytest_agentbench.models.breaker import BreakerClient, CircuitBreaker, error_shape
from pytest_agentbench.models.openai_chat import OpenAIChatClient
from pytest_agentbench.models.retry import RETRYABLE_STATUSES, RetryingClient, RetryPolicy
from pytest_agentbench.scripted import ScriptedServer

FAST = RetryPolicy(base_delay_s=0.001, max_delay_s=0.01)


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as running:
        yield running


def ask(*, stream: bool = True, timeout_s: float | None = 10) -> ModelRequest:
    return ModelRequest(({"role": "user", "content": "q"},), stream=stream, timeout_s=timeout_s)


def chat_for(server: ScriptedServer, key: str) -> OpenAIChatClient:
    return OpenAIChatClient(ModelSpec("openai", key), server.url, "sk-x", trust_env=False)


def retrying(server: ScriptedServer, key: str, policy: RetryPolicy = FAST) -> RetryingClient:
    return RetryingClient(chat_for(server, key), policy, rng=random.Random(7))


class FakeClock:
    """A monotonic clock that moves only when the client sleeps: waits are recorded, not
    spent."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def timed(server: ScriptedServer, key: str, clock: FakeClock) -> RetryingClient:
    return RetryingClient(
        chat_for(server, key), FAST, rng=random.Random(7), clock=clock, sleep=clock.sleep
    )


def run(client: Any, request: ModelRequest | None = None) -> Generation:
    try:
        return client.generate(request or ask())
    finally:
        client.close()


def fails(client: Any, kind: type[ModelError], request: ModelRequest | None = None) -> Any:
    with pytest.raises(kind) as info:
        run(client, request)
    return info.value


def error(status: int, message: str = "scripted error", **extra: Any) -> dict[str, Any]:
    return {"error": {"status": status, "message": message, **extra}}


def after(reply: str | dict[str, Any], *errors: dict[str, Any]) -> dict[str, Any]:
    """One turn whose first attempts get ``errors`` (one each), then ``reply``: a retry is
    the same turn to the scripted provider, as to a real one."""
    table = {"text": reply} if isinstance(reply, str) else dict(reply)
    return {**table, "error": [e["error"] for e in errors]}


# --- the policy ----------------------------------------------------------------------


def test_policy_defaults_and_retryable_classification():
    policy = RetryPolicy()
    assert (policy.max_attempts, policy.base_delay_s, policy.max_delay_s) == (4, 0.5, 30)
    assert policy.retry_after_cap_s == 60 and policy.deadline_s is None
    assert policy.statuses == {408, 409, 425, 429, 500, 502, 503, 504, 522, 524, 529}
    for status in range(400, 600):
        provider = ProviderError("x", status=status)
        assert policy.retryable(provider) == (status in RETRYABLE_STATUSES), status
    assert policy.retryable(TransportError("broke"))
    assert not policy.retryable(ModelTimeout("late"))
    assert not policy.retryable(CircuitOpen("not sent"))
    assert not policy.retryable(ProviderError("no status"))


def test_backoff_is_full_jitter_capped_and_at_least_retry_after():
    policy = RetryPolicy(base_delay_s=0.5, max_delay_s=3, retry_after_cap_s=10)
    rng = random.Random(1)
    for retry, ceiling in [(1, 0.5), (2, 1.0), (3, 2.0), (4, 3.0), (9, 3.0)]:
        waits = [policy.backoff_s(retry, None, rng) for _ in range(200)]
        assert all(0 <= wait <= ceiling for wait in waits)
        assert max(waits) > ceiling * 0.8 and min(waits) < ceiling * 0.2  # spread, not fixed
    assert all(policy.backoff_s(1, 2.5, rng) >= 2.5 for _ in range(50))
    assert policy.backoff_s(1, 3600, rng) == 10


@pytest.mark.parametrize("kwargs", [{"max_attempts": 0}, {"base_delay_s": -1}, {"deadline_s": 0}])
def test_policy_rejects_nonsense(kwargs):
    with pytest.raises(ValueError, match=next(iter(kwargs))):
        RetryPolicy(**kwargs)


# --- retried ---------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [True, False])
def test_retried_then_succeeds_with_the_retries_recorded(server, stream):
    server.add_scripts(
        {"k": [after("ok", error(529, "overloaded", retry_after=0.05), error(500, "boom"))]}
    )
    generation = run(retrying(server, "k"), ask(stream=stream))
    assert generation.text == "ok"
    first, second = generation.exchange["retries"]
    assert first["attempt"] == 1 and first["status"] == 529
    assert first["error"] == f"openai/k: HTTP 529 from {server.url}/chat/completions: overloaded"
    assert first["waited_s"] >= 0.05
    assert (second["attempt"], second["status"]) == (2, 500)
    assert second["error"].endswith(": boom")
    assert 0 <= second["waited_s"] <= 0.01
    assert [r["turn"] for r in server.requests] == [0, 0, 0]
    assert generation.exchange["response"]["text"] == "ok"


def test_no_retries_still_records_an_empty_list(server):
    server.add_scripts({"k": ["fine"]})
    assert run(retrying(server, "k")).exchange["retries"] == []


def test_retry_after_is_honoured(server):
    server.add_scripts({"k": [after("ok", error(429, "slow down", retry_after=0.3))]})
    clock = FakeClock()
    generation = run(timed(server, "k", clock))
    assert clock.slept == [0.3]  # the jitter (at most 0.001 s) is below the server's ask
    assert generation.exchange["retries"][0]["waited_s"] == 0.3


def test_retry_after_is_capped(server):
    server.add_scripts({"k": [after("ok", error(503, retry_after=3600))]})
    policy = RetryPolicy(base_delay_s=0.001, retry_after_cap_s=0.05)
    generation = run(retrying(server, "k", policy))
    assert generation.exchange["retries"][0]["waited_s"] == 0.05


@pytest.mark.parametrize("stream", [True, False])
def test_a_reply_broken_before_any_content_is_retried(server, stream):
    # Streamed: the role chunk arrives, then the connection drops; not streamed: half a body.
    server.add_scripts({"k": [{"text": "", "truncate": True}, "whole"]})
    generation = run(retrying(server, "k"), ask(stream=stream))
    assert generation.text == "whole"
    [retry] = generation.exchange["retries"]
    assert retry["status"] is None and "broke" in retry["error"]


def test_connection_refused_is_retried_until_the_attempts_run_out():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    chat = OpenAIChatClient(ModelSpec("openai", "m"), f"http://127.0.0.1:{port}/v1", None)
    failure = fails(
        RetryingClient(chat, RetryPolicy(max_attempts=3, base_delay_s=0.001)), ModelError
    )
    assert isinstance(failure, TransportError)
    assert "cannot connect to" in str(failure)
    assert str(failure).endswith("(gave up after 3 attempts)")
    assert [r["attempt"] for r in failure.retries] == [1, 2]


def test_attempts_are_bounded(server):
    server.add_scripts({"k": [error(503, "busy")]})
    policy = RetryPolicy(max_attempts=3, base_delay_s=0.001)
    failure = fails(retrying(server, "k", policy), ProviderError)
    assert len(server.requests) == 3
    assert failure.status == 503
    assert str(failure).endswith(": busy (gave up after 3 attempts)")
    assert [r["attempt"] for r in failure.retries] == [1, 2]
    assert all(r["status"] == 503 for r in failure.retries)


# --- not retried -----------------------------------------------------------------------


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
def test_other_client_errors_are_not_retried(server, status):
    server.add_scripts({"k": [error(status, "nope"), "ok"]})
    failure = fails(retrying(server, "k"), ProviderError)
    assert failure.status == status
    assert str(failure) == f"openai/k: HTTP {status} from {server.url}/chat/completions: nope"
    assert failure.retries == []
    assert len(server.requests) == 1


def test_a_timeout_is_not_retried(server):
    server.add_scripts({"k": [{"hang": True}, "ok"]})
    failure = fails(retrying(server, "k"), ModelTimeout, ask(timeout_s=0.3))
    assert failure.retries == []
    assert len(server.requests) == 1


@pytest.mark.parametrize(
    "reply",
    [
        {"text": "0123456789" * 4, "truncate": True},
        {"thinking": "hmm, let me think about it", "truncate": True},
        {
            "tool_calls": [{"name": "look", "arguments": {"query": "a long query"}}],
            "truncate": True,
        },
    ],
)
def test_a_stream_broken_after_delivery_is_raised_with_what_arrived(server, reply):
    server.add_scripts({"k": [reply, "ok"]})
    failure = fails(retrying(server, "k"), TransportError)
    partial = failure.partial
    assert partial.text or partial.thinking or partial.tool_calls
    assert partial.exchange["retries"] == []
    assert failure.retries == []
    assert len(server.requests) == 1


def test_a_failure_after_retries_and_delivery_keeps_both(server):
    server.add_scripts({"k": [after({"text": "abcdefgh" * 4, "truncate": True}, error(502)), "ok"]})
    failure = fails(retrying(server, "k"), TransportError)
    assert str(failure).endswith("(after 1 retry)")
    assert failure.partial.text.startswith("abcdefgh")
    assert [r["status"] for r in failure.partial.exchange["retries"]] == [502]
    assert len(server.requests) == 2


# --- deadlines and close ---------------------------------------------------------------


def test_no_wait_passes_the_request_deadline(server):
    server.add_scripts({"k": [error(503, retry_after=30), "ok"]})
    failure = fails(retrying(server, "k"), ProviderError, ask(timeout_s=2))
    assert "would pass the deadline" in str(failure)
    assert failure.retries == []
    assert len(server.requests) == 1


def test_no_wait_passes_the_policy_deadline(server):
    server.add_scripts({"k": [error(503, retry_after=30), "ok"]})
    policy = RetryPolicy(base_delay_s=0.001, deadline_s=1)
    failure = fails(retrying(server, "k", policy), ProviderError, ask(timeout_s=None))
    assert "would pass the deadline" in str(failure)
    assert len(server.requests) == 1


def test_a_retry_gets_only_what_is_left_of_the_request_budget(server):
    # The fake clock moves only by the wait, so however long the first attempt really
    # takes, the retry is left 30 - 29.5 s of the budget.
    server.add_scripts({"k": [after({"hang": True}, error(503, retry_after=29.5))]})
    clock = FakeClock()
    failure = fails(timed(server, "k", clock), ModelTimeout, ask(timeout_s=30))
    budget = float(re.search(r"within the (\S+) s deadline", str(failure)).group(1))
    assert clock.slept == [29.5]
    assert budget == pytest.approx(0.5)
    assert [r["status"] for r in failure.retries] == [503]


class _Announcing(random.Random):
    """An rng that says when the client has chosen its wait (it sleeps right after)."""

    def __init__(self) -> None:
        super().__init__(3)
        self.chosen = threading.Event()

    def uniform(self, a: float, b: float) -> float:
        self.chosen.set()
        return super().uniform(a, b)


def test_close_interrupts_a_backoff(server):
    server.add_scripts({"k": [error(503, "busy", retry_after=30), "ok"]})
    rng = _Announcing()
    client = RetryingClient(chat_for(server, "k"), RetryPolicy(), rng=rng)
    raised: list[BaseException] = []

    def generate() -> None:
        try:
            client.generate(ask(timeout_s=None))
        except ModelError as exc:
            raised.append(exc)

    thread = threading.Thread(target=generate, daemon=True)
    thread.start()
    assert rng.chosen.wait(10)
    client.close()
    thread.join(10)
    assert not thread.is_alive(), "close() did not wake the 30 s backoff"
    [failure] = raised
    assert str(failure).endswith(": busy (retry cancelled: the client was closed)")
    assert len(server.requests) == 1


# --- the circuit breaker -----------------------------------------------------------------


def guarded(server: ScriptedServer, key: str, breaker: CircuitBreaker) -> BreakerClient:
    return BreakerClient(retrying(server, key), breaker)


def test_breaker_opens_after_identical_permanent_errors_and_names_the_first(server):
    # Request ids differ from error to error; they are still the same error.
    replies = [error(401, f"invalid key (request req_{n}a{n})") for n in range(1, 4)]
    server.add_scripts({"k": replies})
    breaker = CircuitBreaker(threshold=3)
    client = guarded(server, "k", breaker)
    try:
        for _ in range(3):
            with pytest.raises(ProviderError):
                client.generate(ask())
        assert breaker.is_open
        with pytest.raises(CircuitOpen) as info:
            client.generate(ask())
    finally:
        client.close()
    first = f"openai/k: HTTP 401 from {server.url}/chat/completions: invalid key (request req_1a1)"
    assert str(info.value) == f"not sent: 3 identical errors in a row: {first}"
    assert breaker.opened_reason == str(info.value)
    assert info.value.endpoint == f"{server.url}/chat/completions"
    assert info.value.partial is None
    assert len(server.requests) == 3


def test_a_success_resets_the_breaker(server):
    server.add_scripts(
        {"k": [after("ok", error(404, "no such model"), error(404, "no such model"))] * 3}
    )
    breaker = CircuitBreaker(threshold=3)
    client = guarded(server, "k", breaker)
    try:
        for _ in range(9):
            with contextlib.suppress(ProviderError):
                client.generate(ask())
    finally:
        client.close()
    assert not breaker.is_open and breaker.opened_reason is None
    assert len(server.requests) == 9


@pytest.mark.parametrize(
    "replies",
    [
        [error(401, "bad key"), error(404, "no such model")],  # different permanent errors
        [error(401, "bad key"), error(503, "busy")],  # a transient error between them
        [{"error": {"status": 529}}],  # transient only
    ],
)
def test_breaker_stays_closed_without_identical_permanent_errors_in_a_row(server, replies):
    server.add_scripts({"k": [after("", *replies * 4)]})
    breaker = CircuitBreaker(threshold=2)
    client = BreakerClient(retrying(server, "k", RetryPolicy(max_attempts=1)), breaker)
    try:
        for _ in range(len(replies) * 4):
            with pytest.raises(ProviderError):
                client.generate(ask())
    finally:
        client.close()
    assert not breaker.is_open


def test_error_shape_masks_numbers_and_ids_only():
    def shape(message: str, status: int = 401) -> tuple[str, int | None, str]:
        return error_shape(ProviderError(message, status=status))

    assert shape("HTTP 401 from http://127.0.0.1:4001/v1: key sk-abc1") == shape(
        "HTTP 401 from http://127.0.0.1:5999/v1: key sk-zz99"
    )
    assert shape("invalid key") != shape("unknown model")
    assert shape("invalid key") != shape("invalid key", status=403)


def test_breaker_is_thread_safe(server):
    server.add_scripts({"k": [error(401, "invalid key")]})
    breaker = CircuitBreaker(threshold=5)
    client = guarded(server, "k", breaker)
    outcomes: list[str] = []
    lock = threading.Lock()

    def worker() -> None:
        for _ in range(10):
            try:
                client.generate(ask())
            except CircuitOpen:
                kind = "open"
            except ProviderError:
                kind = "sent"
            with lock:
                outcomes.append(kind)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert len(outcomes) == 80
    # Opened at the 5th failure; at most the 7 other threads' requests were in flight.
    assert 5 <= outcomes.count("sent") == len(server.requests) <= 12
    with pytest.raises(CircuitOpen):
        client.generate(ask())
    client.close()
    assert len(server.requests) == outcomes.count("sent")
    assert breaker.opened_reason.startswith("not sent: 5 identical errors in a row: ")
