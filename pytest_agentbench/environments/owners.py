"""Who owns a container: its name, its labels, and the reaper of what dead runs left.

Every container of ours carries the label ``agentbench=1``, its run's id
(``agentbench.run_id``) and its owner (``agentbench.owner``: this host's name, the
owning process's pid and that process's start time in clock ticks since boot, so a pid
reused by another process never passes for the owner). :func:`reap`, called at the start
of a run, removes every such container whose owner is gone: after a killed pytest, a
crashed xdist worker, a machine that lost power. A container owned from another host is
left alone (whether its owner lives cannot be seen from here).
"""

from __future__ import annotations

import os
import re
import secrets
import socket

from pytest_agentbench.environments.engine import Engine
from pytest_agentbench.errors import ContainerError

LABEL = "agentbench"
RUN_LABEL = "agentbench.run_id"
OWNER_LABEL = "agentbench.owner"
#: A token of the start that made a container: a failed start removes only its own.
START_LABEL = "agentbench.start"
#: The prefix of every container name of ours.
NAME_PREFIX = "agentbench"
#: A container name's longest part taken from a task's name.
TASK_PART = 40

_UNSAFE = re.compile(r"[^a-zA-Z0-9_.-]+")


def new_name(run_id: str, worker: str, task: str, epoch: int) -> str:
    """A container name unique to one rollout: the run id, the xdist worker (``gw0``,
    ``main``), the task (made safe, shortened) and the epoch, then random hex so that two
    rollouts of one task and epoch (a rerun) never collide either."""
    parts = [NAME_PREFIX, run_id, worker, task[:TASK_PART], f"e{epoch}", secrets.token_hex(4)]
    safe = [_UNSAFE.sub("-", part).strip("-.") or "x" for part in parts]
    return "-".join(safe)


def process_start_ticks(pid: int) -> int | None:
    """The start time of process ``pid`` in clock ticks since boot, None when there is no
    such process (or /proc cannot say)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as file:
            stat = file.read().decode("ascii", errors="replace")
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2 :].split()
    try:
        return int(fields[19])  # field 22 of stat(5), counted after the name's ")"
    except (IndexError, ValueError):
        return None


def owner_label(pid: int | None = None) -> str:
    """``host:pid:start`` for ``pid`` (this process by default)."""
    pid = os.getpid() if pid is None else pid
    return f"{socket.gethostname()}:{pid}:{process_start_ticks(pid)}"


def owner_alive(owner: str) -> bool | None:
    """Whether the process an owner label names still runs: None when it is another host's
    (cannot tell), False for a malformed label or a pid that is gone or reused."""
    parts = owner.rsplit(":", 2)
    if len(parts) != 3:
        return False
    host, pid_text, ticks = parts
    if host != socket.gethostname():
        return None
    try:
        pid = int(pid_text)
    except ValueError:
        return False
    started = process_start_ticks(pid)
    return started is not None and str(started) == ticks


def labels_for(run_id: str) -> dict[str, str]:
    """The labels a new container of this process gets."""
    return {LABEL: "1", RUN_LABEL: run_id, OWNER_LABEL: owner_label()}


def reap(engine: Engine) -> list[str]:
    """Remove every container labelled as ours whose owning process is gone (same host:
    pid gone, or reused by a process that started at another time); return their names,
    sorted. Containers of live owners and of other hosts are left alone."""
    listed = engine.run(["ps", "-a", "-q", "--filter", f"label={LABEL}=1"], timeout_s=120)
    ids = listed.stdout.decode().split()
    if not ids:
        return []
    fmt = f'{{{{.Name}}}}\t{{{{index .Config.Labels "{OWNER_LABEL}"}}}}'
    shown = engine.run(["inspect", "--format", fmt, *ids], timeout_s=120, check=False)
    dead: list[str] = []
    for line in shown.stdout.decode().splitlines():
        name, _, owner = line.partition("\t")
        name = name.strip().lstrip("/")
        if name and owner_alive(owner.strip()) is False:
            dead.append(name)
    for name in dead:
        remove_container(engine, name)
    return sorted(dead)


def remove_container(engine: Engine, name: str) -> None:
    """Kill and remove container ``name`` at once; one already gone is no error. Raises
    ContainerError when the engine fails otherwise."""
    args = ["rm", "-f", "-t", "0", name] if engine.name == "podman" else ["rm", "-f", name]
    done = engine.run(args, timeout_s=120, check=False)
    if done.returncode == 0:
        return
    words = (done.stderr + done.stdout).decode("utf-8", errors="replace")
    if "no such container" in words.lower():
        return
    raise ContainerError(f"cannot remove container {name}: {words.strip()}")
