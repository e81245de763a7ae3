"""The run's shared request limit: the window and the token bucket, the service workers
ask over loopback, the client wrapper, and whole runs under xdist (the scripted server
counts requests in flight, so the tests see the bound hold across processes)."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from pytest_agentbench.errors import ModelTimeout, RateLimited
from pytest_agentbench.models.base import REQUEST_TASK, ModelRequest, ModelSpec
from pytest_agentbench.models.ratelimit import (
    LimitClosed,
    LimitedClient,
    LimitTimeout,
    Permit,
    SharedLimit,
)
from pytest_agentbench.models.ratelimit_remote import LimitService, RemoteLimit
from pytest_agentbench.models.scripted import ScriptedClient
from pytest_agentbench.scripted.server import ScriptedServer


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def grant(limit: SharedLimit) -> Permit:
    got = limit.try_acquire()
    assert isinstance(got, Permit), got
    return got


def wait_for(condition: Any, timeout_s: float = 5.0) -> None:
    end = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < end, "condition not reached in time"
        time.sleep(0.01)


# --- the window and the bucket (a fake clock; nothing sleeps) ---------------------------


def test_the_window_bounds_requests_in_flight() -> None:
    limit = SharedLimit(max_connections=2, clock=Clock())
    first, _ = grant(limit), grant(limit)
    assert limit.try_acquire() is None  # only a release can help
    limit.release(first, "error")
    grant(limit)
    assert limit.stats()["max_in_flight"] == 2


def test_rpm_paces_requests_evenly_with_no_burst() -> None:
    clock = Clock()
    limit = SharedLimit(rpm=120, clock=clock)  # one every 0.5 s
    grant(limit)
    assert limit.try_acquire() == pytest.approx(0.5)
    clock.now += 0.3
    assert limit.try_acquire() == pytest.approx(0.2)
    clock.now += 0.2
    grant(limit)
    clock.now += 60  # a quiet minute saves up one request, not 120
    grant(limit)
    assert limit.try_acquire() == pytest.approx(0.5)


def test_a_rate_limit_halves_the_window_once_and_pauses_everyone() -> None:
    clock = Clock()
    limit = SharedLimit(max_connections=8, clock=clock)
    old = [grant(limit) for _ in range(8)]
    limit.release(old[0], "limited", 2.0)
    limit.release(old[1], "limited", 2.0)  # same epoch: the window shrinks only once
    stats = limit.stats()
    assert (stats["window"], stats["shrinks"], stats["rate_limited"]) == (4, 1, 2)
    assert limit.try_acquire() == pytest.approx(2.0)  # Retry-After pauses every caller
    clock.now += 2.0
    assert limit.try_acquire() is None  # 6 still in flight, window 4
    for permit in old[2:]:
        limit.release(permit, "ok")  # successes of the old epoch do not grow it
    assert limit.stats()["window"] == 4
    windows = []
    for _ in range(5):
        batch = [grant(limit) for _ in range(limit.stats()["window"])]
        assert limit.try_acquire() is None
        for permit in batch:
            limit.release(permit, "ok")
        windows.append(limit.stats()["window"])
    assert windows == [5, 6, 7, 8, 8]  # one more per window of successes, up to the bound


def test_without_retry_after_the_pause_doubles_until_a_success() -> None:
    clock = Clock()
    limit = SharedLimit(max_connections=4, clock=clock)
    limit.release(grant(limit), "limited")
    assert limit.try_acquire() == pytest.approx(0.5)
    clock.now += 0.5
    limit.release(grant(limit), "limited")
    assert limit.try_acquire() == pytest.approx(1.0)
    clock.now += 1.0
    limit.release(grant(limit), "ok")
    limit.release(grant(limit), "limited")
    assert limit.try_acquire() == pytest.approx(0.5)
    assert limit.stats()["window"] == 1


def test_rpm_alone_still_backs_off_and_returns_to_unbounded() -> None:
    clock = Clock()
    limit = SharedLimit(rpm=60_000, clock=clock)
    held = []
    for _ in range(6):
        clock.now += 0.001
        held.append(grant(limit))
    limit.release(held.pop(), "limited", 0.0)
    assert limit.stats()["window"] == 3  # half of the 6 that were in flight
    for permit in held:
        limit.release(permit, "ok")
    while limit.stats()["window"] is not None:
        batch = []
        for _ in range(limit.stats()["window"]):
            clock.now += 0.001
            batch.append(grant(limit))
        for permit in batch:
            limit.release(permit, "ok")
    assert limit.stats()["shrinks"] == 1


def test_acquire_times_out_and_close_wakes_a_waiter() -> None:
    limit = SharedLimit(max_connections=1)
    limit.acquire(None)
    with pytest.raises(LimitTimeout):
        limit.acquire(0.05)
    raised: list[BaseException] = []

    def wait() -> None:
        try:
            limit.acquire(None)
        except LimitClosed as exc:
            raised.append(exc)

    waiter = threading.Thread(target=wait)
    waiter.start()
    limit.close()
    waiter.join(5)
    assert not waiter.is_alive() and len(raised) == 1


@pytest.mark.parametrize("kwargs", [{"max_connections": 0}, {"rpm": 0}, {"rpm": -1}])
def test_nonsense_limits_are_refused(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        SharedLimit(**kwargs)


# --- the service: one limit for several processes -----------------------------------


@pytest.fixture
def service() -> Iterator[LimitService]:
    running = LimitService(SharedLimit(max_connections=2))
    running.start()
    yield running
    running.stop()


def test_remote_limits_share_one_window(service: LimitService) -> None:
    address = service.start()
    one, two = RemoteLimit(address), RemoteLimit(address)
    held = [one.acquire(None), two.acquire(None)]
    with pytest.raises(LimitTimeout):
        one.acquire(0.05)
    two.release(held.pop(), "ok")
    held.append(one.acquire(5.0))
    assert service.limit.stats()["in_flight"] == 2
    for permit in held:
        one.release(permit, "ok")
    wait_for(lambda: service.limit.stats()["in_flight"] == 0)
    one.close()
    two.close()


def test_a_process_that_dies_holding_a_slot_gives_it_back(service: LimitService) -> None:
    address = service.start()
    code = (
        "import os, sys\n"
        "from pytest_agentbench.models.ratelimit_remote import RemoteLimit\n"
        f"limit = RemoteLimit({address!r})\n"
        "limit.acquire(None); limit.acquire(None)\n"
        "print('held', flush=True)\n"
        "os._exit(1)\n"
    )
    child = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert child.stdout.strip() == "held", child.stderr
    survivor = RemoteLimit(address)
    survivor.acquire(5.0)
    survivor.acquire(5.0)
    survivor.close()


def test_a_rate_limit_seen_by_one_process_pauses_the_others(service: LimitService) -> None:
    address = service.start()
    hit, other = RemoteLimit(address), RemoteLimit(address)
    hit.release(hit.acquire(None), "limited", 30.0)
    wait_for(lambda: service.limit.stats()["rate_limited"] == 1)
    with pytest.raises(LimitTimeout):
        other.acquire(0.1)  # one slot is free, but the whole run is paused
    assert service.limit.stats()["window"] == 1
    hit.close()
    other.close()


def test_stopping_the_service_wakes_a_waiting_worker(service: LimitService) -> None:
    address = service.start()
    limit = RemoteLimit(address)
    limit.acquire(None)
    limit.acquire(None)
    raised: list[BaseException] = []

    def wait() -> None:
        try:
            limit.acquire(None)
        except LimitClosed as exc:
            raised.append(exc)

    waiter = threading.Thread(target=wait)
    waiter.start()
    wait_for(lambda: waiter.is_alive())
    service.stop()
    waiter.join(5)
    assert not waiter.is_alive() and len(raised) == 1
    limit.close()


def test_only_loopback_addresses_are_accepted() -> None:
    with pytest.raises(ValueError, match=r"127\.0\.0\.1"):
        RemoteLimit("10.0.0.1:8000")


# --- the client wrapper against the real scripted server ----------------------------


def ask(key: str, *, timeout_s: float = 10.0) -> ModelRequest:
    return ModelRequest(
        ({"role": "user", "content": "q"},),
        stream=True,
        timeout_s=timeout_s,
        metadata={REQUEST_TASK: key},
    )


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as running:
        yield running


def test_a_request_holds_its_slot_for_the_whole_stream(server: ScriptedServer) -> None:
    slow = {"text": "word " * 12, "chunk_size": 5, "chunk_delay_s": 0.01}
    server.add_scripts({f"k{i}": [slow] for i in range(12)})
    limit = SharedLimit(max_connections=3)
    client = LimitedClient(ScriptedClient(ModelSpec("scripted", "scripted"), server.url), limit)
    with ThreadPoolExecutor(12) as pool:
        answers = list(pool.map(lambda i: client.generate(ask(f"k{i}")).text, range(12)))
    client.close()
    assert answers == [slow["text"]] * 12
    assert server.stats["max_in_flight"] == 3
    assert limit.stats()["max_in_flight"] == 3


def test_a_429_slows_the_whole_run(server: ScriptedServer) -> None:
    server.add_scripts({"busy": [{"error": {"status": 429, "retry_after": 30}}], "fine": ["ok"]})
    limit = SharedLimit(max_connections=4)
    client = LimitedClient(
        ScriptedClient(ModelSpec("scripted", "scripted"), server.url),
        limit,
        label="--agentbench-max-connections 4",
    )
    with pytest.raises(RateLimited):
        client.generate(ask("busy"))
    assert limit.stats()["window"] == 2
    with pytest.raises(ModelTimeout) as caught:
        client.generate(ask("fine", timeout_s=0.2))
    message = str(caught.value)
    assert message.startswith(f"{server.url}: not sent: no request slot free within 0.2 s")
    assert "--agentbench-max-connections 4" in message
    assert [r["key"] for r in server.requests] == ["busy"]  # the second was never sent
    client.close()


# --- whole runs under xdist ----------------------------------------------------------

SUITE = '[suite]\nname = "wide"\nverifier = { kind = "exact" }\n' + "".join(
    f'[[task]]\nid = "t{i}"\ninput = "q"\ntarget = "a"\n'
    f'scripted = [{{ text = "a", delay_s = 0.05 }}]\n'
    for i in range(24)
)


def run_wide(pytester: pytest.Pytester, server: ScriptedServer, *args: str) -> Any:
    pytester.makefile(".toml", bench_wide=SUITE)
    return pytester.runpytest_subprocess(
        "--agentbench",
        "--agentbench-base-url",
        server.url,
        "-n",
        "2",
        "--agentbench-concurrency",
        "6",
        "-p",
        "no:cacheprovider",
        *args,
    )


@pytest.mark.slow
def test_max_connections_holds_across_workers_that_run_ahead(
    pytester: pytest.Pytester, server: ScriptedServer
) -> None:
    result = run_wide(pytester, server, "--agentbench-max-connections", "3")
    result.assert_outcomes(passed=24)
    keys = [(r["key"], r["turn"]) for r in server.requests]
    assert len(keys) == len(set(keys)) == 24  # no worker ran ahead into the other's items
    # 3, not 6 or 12: the bound held; and not 2: each worker had rollouts in flight ahead
    assert server.stats["max_in_flight"] == 3


@pytest.mark.parametrize("option", ["--agentbench-max-connections=0", "--agentbench-rpm=0"])
def test_a_bad_limit_is_a_usage_error(pytester: pytest.Pytester, option: str) -> None:
    result = pytester.runpytest("--agentbench", option, "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*agentbench * expected a number >= *"])
