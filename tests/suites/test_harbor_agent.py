"""A Harbor task's agent under test (``[metadata.agentbench.agent]``): read into the task
as a suite's agent table is, checked by the same schema at collection (the file, the key,
what was expected), and never run by the task's controls (their replies are the built-in
loop's: the oracle's solve.sh, the nop agent's nothing)."""

from __future__ import annotations

from pathlib import Path

import pytest
from harbor_support import TASK_TOML, write_task

from pytest_agentbench.errors import SuiteError
from pytest_agentbench.suites.controls import plan_controls
from pytest_agentbench.suites.harbor import load_harbor_task

AGENT = """
[metadata.agentbench.agent]
kind = "command"
argv = ["python3", "/opt/agent.py", "{prompt}"]
mounts = ["/opt/agent.py"]
env = { A = "1" }
"""


def test_the_agent_table_is_the_tasks_agent(tmp_path: Path) -> None:
    folder = write_task(tmp_path / "ds", "with-agent", toml=TASK_TOML + AGENT)
    task, warnings = load_harbor_task(folder / "task.toml")
    assert warnings == []
    assert task.agent is not None and task.agent.kind == "command"
    assert task.agent.options["mounts"] == ["/opt/agent.py"]
    assert task.agent.options["argv"] == ["python3", "/opt/agent.py", "{prompt}"]
    assert "kind" not in task.agent.options


@pytest.mark.parametrize(
    ("table", "words"),
    [
        ('kind = "command"\nmounts = "/opt"', "metadata.agentbench.agent"),
        (
            'kind = "command"\nargv = ["a"]\nmounts = "/opt"',
            "agent.mounts: '/opt' is not of type 'array'",
        ),
        ('kind = "robot"\nargv = ["a"]', "metadata.agentbench.agent.kind: 'robot' is not one of"),
        ('kind = "command"\nargv = ["a"]\nflavour = 1', "flavour"),
    ],
)
def test_a_bad_agent_table_is_refused_naming_the_file_and_key(
    tmp_path: Path, table: str, words: str
) -> None:
    toml = TASK_TOML + "\n[metadata.agentbench.agent]\n" + table + "\n"
    folder = write_task(tmp_path / "ds", "bad-agent", toml=toml)
    with pytest.raises(SuiteError) as caught:
        load_harbor_task(folder / "task.toml")
    assert caught.value.path == str(folder / "task.toml")
    assert any(words in problem for problem in caught.value.problems), caught.value.problems


def test_the_controls_of_a_harbor_task_do_not_run_its_agent(tmp_path: Path) -> None:
    folder = write_task(tmp_path / "ds", "with-agent", toml=TASK_TOML + AGENT)
    task, _ = load_harbor_task(folder / "task.toml")
    planned = plan_controls([task])
    assert {p.control.expect for p in planned} == {"pass", "fail"}
    for control in planned:
        assert control.run is not None and control.run.agent is None
    assert task.agent is not None  # the agent's own run keeps it


@pytest.mark.parametrize(
    ("table", "refused"),
    [
        ('kind = "command", argv = ["agent"]', False),
        ('kind = "acp", argv = ["agent"]', False),
        ('kind = "python", function = "agent:run"', True),
    ],
)
def test_a_suite_of_ours_with_an_environment_takes_a_command_or_acp_agent(
    tmp_path: Path, table: str, refused: bool
) -> None:
    from pytest_agentbench.suites.load import load_suite
    from pytest_agentbench.verifiers.builtin import BUILTIN_VERIFIERS

    (tmp_path / "bench_env.toml").write_text(
        '[suite]\nmode = "agent"\nrepairs = 0\n'
        'verifier = { kind = "command", run = "true" }\n'
        'environment = "localhost/agentbench-base:bookworm"\n'
        f"agent = {{ {table} }}\n\n"
        '[[task]]\nid = "a"\ninput = "do it"\n'
    )
    verifiers = {verifier.kind: verifier for verifier in BUILTIN_VERIFIERS}
    if not refused:
        (task,) = load_suite(tmp_path / "bench_env.toml", verifiers).tasks
        assert task.environment is not None and task.agent is not None
        return
    with pytest.raises(SuiteError) as caught:
        load_suite(tmp_path / "bench_env.toml", verifiers)
    assert any(
        "a python agent under test does not run in a container" in p for p in caught.value.problems
    )


@pytest.mark.parametrize("environment", [True, False])
def test_an_agent_install_step_needs_an_environment(tmp_path: Path, environment: bool) -> None:
    """An install step is a layer over the task's image: without an environment it would be
    silently ignored, so it is refused naming where it is written."""
    from pytest_agentbench.suites.load import load_suite
    from pytest_agentbench.verifiers.builtin import BUILTIN_VERIFIERS

    (tmp_path / "bench_install.toml").write_text(
        '[suite]\nmode = "agent"\nrepairs = 0\n'
        'verifier = { kind = "command", run = "true" }\n'
        + ('environment = "localhost/agentbench-base:bookworm"\n' if environment else "")
        + '\n[[task]]\nid = "a"\ninput = "do it"\n'
        'agent = { kind = "command", argv = ["agent"], install = "echo hi" }\n'
    )
    verifiers = {verifier.kind: verifier for verifier in BUILTIN_VERIFIERS}
    if environment:
        (task,) = load_suite(tmp_path / "bench_install.toml", verifiers).tasks
        assert task.agent is not None and task.agent.options["install"] == "echo hi"
        return
    with pytest.raises(SuiteError) as caught:
        load_suite(tmp_path / "bench_install.toml", verifiers)
    assert caught.value.problems == [
        'task 1 ("a"): $.task[0].agent.install needs an environment: an install step is a '
        "layer over the task's container image (leave out install, or give the task an "
        "environment)"
    ], caught.value.problems
