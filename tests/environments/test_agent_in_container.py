"""A command agent under test in its task's container (agents/container_agent.py), driven
through its session against a real gateway and the real scripted provider: the hostile
agent of tests/agent_programs/late_writer.py leaves a straggler that sheds the exec's
mark and would write ``late.txt`` after its deadline, or after a loop in its model's
stream is killed. Neither write happens: the attempt's end stops every process of the
agent in the container, not just the engine's ``exec`` client. No container is left."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from agents_in_container_support import clients_for
from harbor_support import BASE_IMAGE, TASK_TOML, write_task

from pytest_agentbench.agents.gateway import Gateway
from pytest_agentbench.agents.runners import open_container_session
from pytest_agentbench.environments.engine import Engine
from pytest_agentbench.errors import AgentbenchError
from pytest_agentbench.runner.container_session import EnvironmentPlace
from pytest_agentbench.runner.loopguard import KillPolicy
from pytest_agentbench.runner.turn_requests import first_messages
from pytest_agentbench.suites.harbor import load_harbor_task
from pytest_agentbench.suites.task import Task

LATE_WRITER = Path(__file__).parents[1] / "agent_programs" / "late_writer.py"
#: How long after it starts the straggler writes late.txt.
STRAGGLER_S = 4


def hostile_task(tmp_path: Path, *, agent_timeout: int, allow_internet: bool = True) -> Task:
    agent = (
        '\n[metadata.agentbench.agent]\nkind = "command"\n'
        f'argv = ["python3", "{LATE_WRITER}", "{STRAGGLER_S}"]\n'
        f'mounts = ["{LATE_WRITER}"]\n'
    )
    toml = TASK_TOML.replace("timeout_sec = 120", f"timeout_sec = {agent_timeout}")
    if not allow_internet:
        toml = toml.replace("[environment]\n", "[environment]\nallow_internet = false\n")
    folder = write_task(tmp_path / "ds", "hostile", toml=toml + agent)
    task, _ = load_harbor_task(folder / "task.toml")
    return task


def after_the_straggler(session: object) -> tuple[str, str]:
    """What is in the agent's folder and which processes run in its container, once the
    straggler would have written (its time has passed since the attempt began)."""
    time.sleep(STRAGGLER_S + 1.5)
    container = session.container  # type: ignore[attr-defined]
    listing = container.exec(["ls", "-a", "/app"], timeout_s=60).stdout
    script = 'for p in /proc/[0-9]*; do tr "\\0" " " < "$p/cmdline"; echo; done'
    processes = container.exec(["sh", "-c", script], timeout_s=60).stdout
    return listing, processes


def test_the_deadline_ends_every_process_of_the_agent_in_its_container(
    engine: Engine, run_id: str, gateway: Gateway, provider: str, tmp_path: Path
) -> None:
    task = hostile_task(tmp_path, agent_timeout=2)
    place = EnvironmentPlace(engine=engine.name, run_id=run_id, cache_dir=tmp_path / "cache")
    clients = clients_for(task, provider, [{"hang": True}])
    session = open_container_session(
        task, tmp_path / "rollout" / "workspace", gateway, clients, "scripted", place,
        kill_policy=KillPolicy(),
    )  # fmt: skip
    try:
        run = session.attempt(
            first_messages(task), index=0, deadline=time.monotonic() + 120, timeout_s=120
        )
        assert run.stop == "timeout", (run.stop, run.error)
        assert "timed out after 2 s" in (run.error or "")
        assert (run.error or "").endswith("([agent] timeout_sec)"), run.error
        listing, processes = after_the_straggler(session)
        assert "late.txt" not in listing.split(), listing
        assert "late" not in processes, processes  # the straggler and the agent
        entry = run.trajectory[-1]["agent"]
        assert isinstance(entry, dict)
        where = entry["container"]
        assert isinstance(where, dict)
        assert where["engine"] == engine.name and where["network"] == "host"
        assert where["image"] != BASE_IMAGE and str(where["image"]).startswith("localhost/")
        assert str(LATE_WRITER) in where["mounts"]  # type: ignore[operator]
        assert any("memory_mb" in str(note) for note in where["not_enforced"])  # type: ignore[union-attr]
    finally:
        session.close()


def test_a_loop_kill_ends_every_process_of_the_agent_behind_the_bridge(
    engine: Engine, run_id: str, gateway: Gateway, provider: str, tmp_path: Path
) -> None:
    task = hostile_task(tmp_path, agent_timeout=120, allow_internet=False)
    place = EnvironmentPlace(engine=engine.name, run_id=run_id, cache_dir=tmp_path / "cache")
    loop = {
        "text": "Let me think about this again. ",
        "repeat": 4000,
        "chunk_size": 31,
        "chunk_delay_s": 0.0005,
    }
    clients = clients_for(task, provider, [loop])
    session = open_container_session(
        task, tmp_path / "rollout" / "workspace", gateway, clients, "scripted", place,
        kill_policy=KillPolicy(),
    )  # fmt: skip
    try:
        run = session.attempt(
            first_messages(task), index=0, deadline=time.monotonic() + 120, timeout_s=120
        )
        assert run.stop == "loop_killed", (run.stop, run.error)
        assert run.turns == 1  # the call came through the bridge, on the task's route
        listing, processes = after_the_straggler(session)
        assert "late.txt" not in listing.split(), listing
        assert "late" not in processes, processes
        entry = run.trajectory[-1]["agent"]
        assert isinstance(entry, dict)
        assert entry["container"]["network"] == "none (gateway bridge)"  # type: ignore[index]
        assert "bridge" in str(entry["network"])
    finally:
        session.close()


@pytest.mark.parametrize(
    ("table", "words"),
    [
        (
            'kind = "python"\nfunction = "agent:run"',
            "an agent of kind 'python' does not run in a task's container",
        ),
        (
            'kind = "command"\nargv = ["x"]\nmounts = ["/nowhere/agentbench-agent"]',
            "'/nowhere/agentbench-agent' does not exist on this machine",
        ),
        ('kind = "command"\nargv = ["x"]\nmounts = ["relative/agent"]', "is not an absolute path"),
    ],
)
def test_what_cannot_run_in_the_container_is_refused_before_any_starts(
    gateway: Gateway, tmp_path: Path, table: str, words: str
) -> None:
    toml = TASK_TOML + "\n[metadata.agentbench.agent]\n" + table + "\n"
    folder = write_task(tmp_path / "ds", "refused", toml=toml)
    task, _ = load_harbor_task(folder / "task.toml")
    place = EnvironmentPlace(engine="no-such-engine", run_id="t0", cache_dir=tmp_path / "cache")
    with pytest.raises(AgentbenchError, match="task 'refused'") as caught:
        open_container_session(
            task, tmp_path / "rollout" / "workspace", gateway, lambda protocol: None,
            "scripted", place, kill_policy=KillPolicy(),
        )  # fmt: skip
    assert words in str(caught.value)
