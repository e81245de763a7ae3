"""The file writer: one thread writes the rollouts' files in the order they were handed
in; ``wait`` returns only once a key's files are written and raises their error; ``close``
writes what is queued, and later writes run in their caller. Real threads, real waits."""

from __future__ import annotations

import threading

import pytest

from pytest_agentbench.artifacts.file_writer import FileWriter


def test_jobs_run_in_order_on_one_other_thread_and_a_queued_one_asked_for_runs_here() -> None:
    writer = FileWriter()
    gate = threading.Event()
    ran: list[tuple[str, int]] = []

    def job(name: str) -> None:
        if name == "a":
            gate.wait(10)
        ran.append((name, threading.get_ident()))

    for name in ("a", "b", "c", "d"):
        writer.submit(name, lambda name=name: job(name))
    while writer._running != "a":  # "a" is on the writer
        threading.Event().wait(0.01)
    waited = threading.Event()
    waiter = threading.Thread(target=lambda: (writer.wait("a"), waited.set()))
    waiter.start()
    assert not waited.wait(0.2)  # "a" runs on the writer, held: its wait waits
    writer.wait("c")  # still queued: run here, now, not behind "a"
    assert ran == [("c", threading.get_ident())]
    gate.set()
    assert waited.wait(10)
    waiter.join()
    writer.wait("d")
    writer.wait("b")
    assert [name for name, _ in ran] == ["c", "a", "b", "d"]  # the writer kept its order
    writer_threads = {ident for name, ident in ran if name != "c"}
    assert len(writer_threads) == 1 and threading.get_ident() not in writer_threads
    writer.close()


def test_an_error_is_raised_by_the_wait_for_its_key_only_and_once() -> None:
    writer = FileWriter()

    def fail() -> None:
        raise OSError(28, "No space left on device")

    done: list[str] = []
    writer.submit("bad", fail)
    writer.submit("good", lambda: done.append("good"))
    writer.wait("good")
    assert done == ["good"]
    with pytest.raises(OSError, match="No space left"):
        writer.wait("bad")
    writer.wait("bad")  # raised once, then forgotten
    writer.close()


def test_every_job_of_a_key_is_done_the_running_one_first() -> None:
    writer = FileWriter()
    gate = threading.Event()
    done: list[int] = []
    writer.submit("k", lambda: (gate.wait(10), done.append(1)))
    writer.submit("k", lambda: done.append(2))
    started = threading.Event()
    writer.submit("other", started.set)
    waited = threading.Event()
    while writer._running != "k":  # the first job of "k" is on the writer
        threading.Event().wait(0.01)
    waiter = threading.Thread(target=lambda: (writer.wait("k"), waited.set()))
    waiter.start()
    assert not waited.wait(0.2)  # one of its jobs runs: the wait waits for it
    assert done == []  # and runs the queued one only after it
    gate.set()
    assert waited.wait(10)
    waiter.join()
    assert done == [1, 2]
    writer.close()
    assert started.is_set()


def test_a_key_without_jobs_is_not_waited_for() -> None:
    writer = FileWriter()
    writer.wait("never handed in")
    writer.close()


def test_close_writes_what_is_queued_and_later_jobs_run_in_their_caller() -> None:
    writer = FileWriter()
    gate = threading.Event()
    done: list[str] = []
    writer.submit("slow", lambda: (gate.wait(10), done.append("slow")))
    writer.submit("queued", lambda: done.append("queued"))
    closer = threading.Thread(target=writer.close)
    closer.start()
    closer.join(0.2)
    assert closer.is_alive()  # close waits for the queue to be written
    gate.set()
    closer.join(10)
    assert not closer.is_alive()
    assert done == ["slow", "queued"]
    where: list[int] = []
    writer.submit("late", lambda: where.append(threading.get_ident()))
    assert where == [threading.get_ident()]
    with pytest.raises(ValueError, match="late error"):
        writer.submit("late-bad", lambda: (_ for _ in ()).throw(ValueError("late error")))
