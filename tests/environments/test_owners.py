"""Nothing left behind: a container is removed when its process ends normally, on Ctrl-C,
and, when its process was killed, by the reaper of the next run; a live owner's or another
host's container is never reaped."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

from containers_support import BASE_IMAGE, left_by

from pytest_agentbench.environments.container import Container, ContainerSpec, new_name, reap
from pytest_agentbench.environments.engine import Engine
from pytest_agentbench.environments.owners import OWNER_LABEL, owner_alive, owner_label

#: A process that starts one container, says its name, then does what argv[2] says.
OWNER = textwrap.dedent(
    """
    import sys, time
    from pytest_agentbench.environments.container import Container, ContainerSpec, new_name
    from pytest_agentbench.environments.engine import find_engine
    run_id, how, image = sys.argv[1], sys.argv[2], sys.argv[3]
    engine = find_engine()
    spec = ContainerSpec(image=image, name=new_name(run_id, "main", how, 0), run_id=run_id)
    if how == "with":
        with Container.start(engine, spec) as box:
            print(box.name, flush=True)
            time.sleep(600)
    box = Container.start(engine, spec)
    print(box.name, flush=True)
    if how == "wait":
        time.sleep(600)
    """
)


def _owner(run_id: str, how: str) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        [sys.executable, "-c", OWNER, run_id, how, BASE_IMAGE],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    name = process.stdout.readline().strip()
    assert name.startswith(f"agentbench-{run_id}-main-{how}-e0-"), name
    return process, name


def test_a_killed_owners_container_is_reaped(engine: Engine, run_id: str) -> None:
    process, name = _owner(run_id, "wait")
    try:
        assert left_by(engine, run_id) == [name]
        assert name not in reap(engine)  # its owner lives
        assert left_by(engine, run_id) == [name]
    finally:
        process.kill()
        process.wait()
    assert left_by(engine, run_id) == [name]  # SIGKILL: nothing of ours ran
    assert name in reap(engine)
    assert left_by(engine, run_id) == []


def test_ctrl_c_and_a_normal_end_remove_the_container(engine: Engine, run_id: str) -> None:
    process, name = _owner(run_id, "with")
    assert left_by(engine, run_id) == [name]
    process.send_signal(signal.SIGINT)
    process.wait(timeout=60)
    assert left_by(engine, run_id) == []
    process, name = _owner(run_id, "exit")  # never removed by its code: at exit
    process.wait(timeout=60)
    assert left_by(engine, run_id) == []


def test_other_hosts_and_reused_pids_are_told_apart(engine: Engine, run_id: str) -> None:
    mine = owner_label()
    assert owner_alive(mine) is True
    host, pid, ticks = mine.rsplit(":", 2)
    assert owner_alive(f"{host}:{pid}:{int(ticks) + 1}") is False  # the pid reused later
    assert owner_alive(f"{host}:999999999:1") is False
    assert owner_alive("elsewhere.example:1:1") is None
    assert owner_alive("garbage") is False
    spec = ContainerSpec(
        image=BASE_IMAGE, name=new_name(run_id, "main", "foreign", 0), run_id=run_id
    )
    foreign = ["--label", f"{OWNER_LABEL}=elsewhere.example:1:1"]
    engine.run(
        [
            "run",
            "-d",
            "--name",
            spec.name,
            "--label",
            "agentbench=1",
            "--label",
            f"agentbench.run_id={run_id}",
            *foreign,
            BASE_IMAGE,
            "sleep",
            "infinity",
        ]
    )
    try:
        assert spec.name not in reap(engine)
        assert left_by(engine, run_id) == [spec.name]
    finally:
        Container(engine, spec).remove()
    assert os.getpid() == int(pid)
