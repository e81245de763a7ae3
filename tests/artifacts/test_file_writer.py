"""The file writer: one thread writes the rollouts' files in the order they were handed
in; ``wait`` returns only once a key's files are written and raises their error; ``close``
writes what is queued, and later writes run in their caller. Real threads, real waits."""

from __future__ import annotations

import threading

import pytest

from pytest_agentbench.artifacts.file_writer import FileWriter


def test_jobs_run_in_order_on_one_other_thread_and_wait_waits_for_them() -> None:
    writer = FileWriter()
    gate = threading.Event()
    ran: list[tuple[str, int]] = []

    def job(name: str) -> None:
        if name == "a":
            gate.wait(10)
        ran.append((name, threading.get_ident()))

    for name in ("a", "b", "c"):
        writer.submit(name, lambda name=name: job(name))
    waited = threading.Event()
    waiter = threading.Thread(target=lambda: (writer.wait("b"), waited.set()))
    waiter.start()
    assert not waited.wait(0.2)  # "b" is queued behind "a", which is held
    assert ran == []
    gate.set()
    assert waited.wait(10)
    waiter.join()
    writer.wait("c")
    assert [name for name, _ in ran] == ["a", "b", "c"]
    threads = {ident for _, ident in ran}
    assert len(threads) == 1 and threading.get_ident() not in threads
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


def test_every_job_of_a_key_is_waited_for() -> None:
    writer = FileWriter()
    gate = threading.Event()
    done: list[int] = []
    writer.submit("k", lambda: done.append(1))
    writer.submit("other", lambda: gate.wait(10))
    writer.submit("k", lambda: done.append(2))
    waited = threading.Event()
    waiter = threading.Thread(target=lambda: (writer.wait("k"), waited.set()))
    waiter.start()
    assert not waited.wait(0.2)  # the second job of "k" waits behind "other"
    gate.set()
    assert waited.wait(10)
    waiter.join()
    assert done == [1, 2]
    writer.close()


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
