"""An exec we talk to while it runs (``Container.exec_live``: an ACP agent in its task's
container), with real Podman: lines go in and come back at once; a command that dies at
once, a request unread on its stdin, still says why (Podman drops such an exec's output
unless its stdin is read to the end: the exec says that its command ended, the caller
closes stdin); the deadline and ``kill`` end every process it started, inside."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from containers_support import BASE_IMAGE

from pytest_agentbench.environments.container import Container, ContainerSpec, new_name
from pytest_agentbench.environments.engine import Engine

ECHO = "import sys\nfor line in sys.stdin:\n    print('got', line.strip(), flush=True)\n"


@pytest.fixture
def box(engine: Engine, run_id: str) -> Iterator[Container]:
    spec = ContainerSpec(image=BASE_IMAGE, name=new_name(run_id, "main", "live", 0), run_id=run_id)
    with Container.start(engine, spec) as container:
        yield container


def processes(box: Container) -> str:
    script = 'for p in /proc/[0-9]*; do tr "\\0" " " < "$p/cmdline"; echo; done'
    return box.exec(["sh", "-c", script], timeout_s=30).stdout


def test_lines_go_in_and_come_back_while_it_runs(box: Container) -> None:
    live = box.exec_live(["python3", "-u", "-c", ECHO], timeout_s=60)
    for word in ("one", "two"):
        live.stdin.write(f"{word}\n".encode())
        live.stdin.flush()
        assert live.stdout.readline() == f"got {word}\n".encode()
    live.stdin.close()  # its input ends: it exits 0, and the exec with it
    assert live.stdout.readline() == b""
    end = live.finish()
    assert (end.exit_code, end.killed_by, end.stderr) == (0, None, "")


def test_a_command_that_dies_at_once_keeps_its_reason_and_status(box: Container) -> None:
    for _ in range(8):
        live = box.exec_live(["sh", "-c", "echo out; echo why >&2; exit 3"], timeout_s=60)
        live.stdin.write(b'{"jsonrpc": "2.0", "id": 1, "method": "initialize"}\n')
        live.stdin.flush()
        assert live.stdout.read() == b"out\n"  # stdout ends: the exec ended
        end = live.finish()
        assert (end.exit_code, end.stderr.strip(), end.killed_by) == (3, "why", None)


def test_the_deadline_and_a_kill_end_every_process_inside(box: Container) -> None:
    straggler = "(sleep 3; echo late > /tmp/late) & exec sleep 600"
    live = box.exec_live(["sh", "-c", straggler], timeout_s=1.5)
    assert live.stdout.read() == b""  # ended at its deadline
    end = live.finish()
    assert (end.exit_code, end.killed_by) == (None, "timeout")
    killed = box.exec_live(["sh", "-c", straggler.replace("late", "later")], timeout_s=60)
    time.sleep(0.5)
    assert killed.finish("stopped").killed_by == "stopped"
    time.sleep(4)
    assert box.exec(["ls", "/tmp"], timeout_s=30).stdout.split().count("late") == 0
    assert "later" not in box.exec(["ls", "/tmp"], timeout_s=30).stdout
    assert "sleep 600" not in processes(box) and "sleep 3" not in processes(box)
