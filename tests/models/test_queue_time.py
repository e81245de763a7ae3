"""Time a request waits in its server's queue is not the model's time (models/queue.py):
against a server that serves one request at a time (the scripted provider's ``serial``
mode, as llama-cpp-python does), a run at the default concurrency has no model timeout
that the model alone would not have, and a model that is too slow on its own still
times out."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from pytest_agentbench.models.queue import GRACE_S, ServerQueue
from pytest_agentbench.scripted import ScriptedServer


def test_a_place_is_blocked_while_an_earlier_request_is_in_flight() -> None:
    queue = ServerQueue(serial=True)
    first, second, third = queue.join(), queue.join(), queue.join()
    assert first.origin == first.sent, "nothing ahead: its time runs at once"
    assert second.blocked and third.blocked
    told: list[float | None] = []
    assert second.listen(told.append) is None
    third.leave()  # one behind it leaving changes nothing for it
    assert second.blocked and not told
    first.leave()
    assert not second.blocked and told == [second.origin]
    assert second.origin == pytest.approx(second.sent + second.credited)
    second.leave()


def test_a_reply_being_received_blocks_the_others_whatever_their_order() -> None:
    """A server need not serve in the order sent: while any other reply is arriving,
    a request whose reply has not begun is waiting for the server, not for its model."""
    queue = ServerQueue(serial=True)
    first, second = queue.join(), queue.join()
    told: list[float | None] = []
    first.listen(told.append)
    assert second.began() is not None, "its reply began: its time runs"
    assert first.blocked and told == [None], "the server serves the later one first"
    second.leave()
    assert not first.blocked and told == [None, first.origin]
    assert first.began() is None, "it was free already"
    first.leave()


def test_nothing_is_credited_until_the_server_is_seen_to_queue() -> None:
    """Requests behind others on a server not known to queue (a stuck one, a hosted one)
    run on their own clocks from the moment they are sent."""
    queue = ServerQueue()
    first, second = queue.join(), queue.join()
    told: list[float | None] = []
    assert second.listen(told.append) == second.sent, "its clock runs: nothing is known"
    assert not second.blocked and second.waited_s == 0.0
    first.leave()
    second.leave()
    assert not told and queue.serving == "unknown"


def test_a_reply_that_begins_when_another_ends_shows_a_queue_and_credits_the_wait() -> None:
    queue = ServerQueue()
    first, second, third = queue.join(), queue.join(), queue.join()
    told: list[float | None] = []
    third.listen(told.append)
    first.began()
    time.sleep(0.05)
    first.leave()
    assert queue.serving == "unknown", "nothing began after it yet"
    second.began()  # with no other reply running, after the first one's end: a queue
    assert queue.serving == "seen"
    assert told == [None], "the third is blocked now: its clock stops"
    assert second.waited_s >= 0.04, "the wait behind the first is credited at once"
    second.leave()
    assert told[-1] == third.origin and third.waited_s >= 0.04
    third.leave()


def test_a_next_reply_read_a_moment_before_the_last_ones_end_is_still_a_queue() -> None:
    """Two threads read the replies: the next one's first event may be read a moment
    before the end of the one ahead of it is recorded."""
    queue = ServerQueue()
    first, second = queue.join(), queue.join()
    first.began()
    second.began()
    first.leave()
    assert queue.serving == "seen"
    second.leave()


def test_two_replies_running_together_stop_the_credit_for_good() -> None:
    queue = ServerQueue()
    first, second = queue.join(), queue.join()
    first.began()
    time.sleep(0.02)
    first.leave()
    second.began()
    assert queue.serving == "seen"
    third = queue.join()
    told: list[float | None] = []
    assert third.listen(told.append) is None, "seen to queue: it is blocked"
    fourth = queue.join()
    fourth.began()  # a reply beside the second one, for longer than the grace
    time.sleep(GRACE_S + 0.05)
    second.leave()
    assert queue.serving == "parallel"
    assert told and told[-1] is not None, "its clock runs again"
    assert not third.blocked
    kept = third.waited_s
    assert kept > GRACE_S, "what was credited before is kept"
    time.sleep(0.02)
    assert third.waited_s == kept, "and nothing more"
    for place in (third, fourth):
        place.leave()


def test_a_declared_one_at_a_time_server_stays_so() -> None:
    queue = ServerQueue()
    queue.declare_serial()
    first, second = queue.join(), queue.join()
    assert second.blocked
    first.began()
    second.began()
    time.sleep(GRACE_S + 0.05)
    first.leave()
    assert queue.serving == "declared" and queue.crediting
    second.leave()


#: Each answer streams 5 chunks 0.1 s apart: about half a second of the model's time.
QUICK = '{ text = "ok ok ok ok ok", chunk_size = 3, chunk_delay_s = 0.1 }'
#: Three seconds alone: twice the timeout.
SLOW = '{ text = "ok ok ok ok ok ok ok ok ok ok", chunk_size = 1, chunk_delay_s = 0.1 }'


def _suite(quick: int) -> str:
    tasks = "".join(
        f'\n[[task]]\nid = "quick-{i}"\ninput = "Say ok."\ntarget = "ok"\nscripted = [{QUICK}]\n'
        for i in range(quick)
    )
    slow = f'\n[[task]]\nid = "slow"\ninput = "Say ok."\ntarget = "ok"\nscripted = [{SLOW}]\n'
    return (
        '[suite]\nname = "queue"\nverifier = { kind = "includes" }\ntimeout_s = 1.5\n'
        + tasks
        + slow
    )


@pytest.mark.slow
def test_waiting_in_a_one_at_a_time_server_is_never_a_model_timeout(
    pytester: pytest.Pytester,
) -> None:
    """Seven quick tasks (half a second each) and one slow one (three seconds) at the
    default concurrency against a server that serves one request at a time, with a
    1.5 s timeout: the queue holds the last quick ones for seconds, yet none times out;
    the slow one still does, once its own turn has come. Counted from the moment each
    request was sent, the later quick tasks timed out."""
    pytester.makefile(".toml", bench_queue=_suite(7))
    with ScriptedServer(serial=True) as server:
        result = pytester.runpytest(
            "--agentbench",
            "--agentbench-model",
            "scripted",
            "--agentbench-base-url",
            server.url,
            "-p",
            "no:cacheprovider",
        )
        assert server.stats["max_in_flight"] >= 4, "the requests did queue at the server"
    run = (pytester.path / "agentbench-results" / "latest").resolve()
    results = {
        path.parent.name.split("[")[0]: json.loads(path.read_text(encoding="utf-8"))
        for path in (run / "tasks").rglob("result.json")
    }
    outcomes = {task: found["outcome"] for task, found in results.items()}
    assert outcomes == {**{f"quick-{i}": "passed" for i in range(7)}, "slow": "timeout"}
    assert results["slow"]["failure_kind"] == "model_timeout"
    waited = [found["attempts"][0]["waited_s"] for found in results.values()]
    assert max(waited) >= 1.5, "some task waited longer than its whole timeout"
    records = [found["record"] for found in results.values()]
    assert sum("waited_s" in record for record in records) >= 4
    result.assert_outcomes(passed=7, failed=1)


def test_a_serial_server_queues_streams_with_headers_sent_and_pings() -> None:
    """The scripted serial mode, as llama-cpp-python serves: a queued stream has its
    headers and hears ': ping' comments, but no event until its turn."""
    import httpx

    slow = {"text": "done", "chunk_size": 4, "chunk_delay_s": 1.3}
    with ScriptedServer({"a": [slow], "b": ["next"]}, serial=True) as server:
        body = {"model": "a", "stream": True, "messages": [{"role": "user", "content": "x"}]}
        first = threading.Thread(
            target=httpx.post, args=(f"{server.url}/chat/completions",), kwargs={"json": body}
        )
        first.start()
        while server.stats["in_flight"] < 1:
            time.sleep(0.01)
        queued = {**body, "model": "b"}
        lines: list[str] = []
        with httpx.stream("POST", f"{server.url}/chat/completions", json=queued) as response:
            assert response.status_code == 200
            for line in response.iter_lines():
                lines.append(line)
        first.join()
    data = [line for line in lines if line.startswith("data:")]
    assert lines[0] == ": ping", "a ping while it waited, before any event"
    assert data[-1] == "data: [DONE]"
    assert Path  # (imported for the run test)


def test_a_queued_request_stuck_before_its_headers_still_ends_at_its_own_deadline() -> None:
    """A request sent while another is in flight to a server declared to serve one at a
    time waits for its response headers with no socket of its own yet; once its turn
    comes its deadline runs, and the watchdog ends the wait on the keep-alive connection
    it reuses (opened by an earlier request)."""
    from pytest_agentbench.errors import ModelTimeout
    from pytest_agentbench.models.base import ModelRequest, ModelSpec
    from pytest_agentbench.models.scripted import scripted_client

    def ask(key: str, timeout_s: float) -> ModelRequest:
        return ModelRequest(
            ({"role": "user", "content": "x"},),
            timeout_s=timeout_s,
            metadata={"task": key, "call": "0"},
        )

    replies = {
        "ahead": [{"text": "ahead of you", "chunk_size": 4, "chunk_delay_s": 0.2}],
        "warm": ["the connection is open"],
        "stuck": [{"text": "late", "delay_s": 60}],
    }
    with ScriptedServer(replies) as server:
        client = scripted_client(ModelSpec("scripted", "scripted"), server.url)
        client.serves_one_at_a_time()
        try:
            client.generate(ask("warm", 10))  # this thread's connection, kept alive
            ahead = threading.Thread(target=client.generate, args=(ask("ahead", 10),))
            ahead.start()
            while server.stats["in_flight"] < 1:
                time.sleep(0.01)
            with pytest.raises(ModelTimeout) as info:
                client.generate(ask("stuck", 1))
            ahead.join()
        finally:
            client.close()
    assert info.value.waited_s > 0, "it waited behind the request ahead of it"
