"""Harbor task folders read into ordinary tasks: task.toml checked key by key (the
file, the key, what was expected), unknown keys warned about, layouts we do not run
refused with the reason."""

from __future__ import annotations

from pathlib import Path

import pytest
from harbor_support import TASK_TOML, write_task

from pytest_agentbench.errors import SuiteError
from pytest_agentbench.scripted.script import Reply
from pytest_agentbench.suites.controls import plan_controls
from pytest_agentbench.suites.harbor import load_harbor_task
from pytest_agentbench.suites.harbor_toml import size_mb
from pytest_agentbench.suites.task import HARBOR


def reply_check(reply: object, where: str) -> None:
    Reply.parse(reply, where)


def problems_of(folder: Path) -> list[str]:
    with pytest.raises(SuiteError) as caught:
        load_harbor_task(folder / "task.toml", reply_check=reply_check)
    assert caught.value.path == str(folder / "task.toml")
    return caught.value.problems


def test_a_task_folder_is_an_agent_task_in_its_container(tmp_path: Path) -> None:
    toml = TASK_TOML.replace(
        "build_timeout_sec = 300",
        'build_timeout_sec = 300\ncpus = 2\nmemory = "2G"\nallow_internet = false\n'
        'workdir = "/app"\nenv = { A = "1" }',
    ).replace("timeout_sec = 60", 'timeout_sec = 60\nenv = { V = "2" }\nuser = "nobody"')
    folder = write_task(tmp_path / "my-dataset", "answer-42", toml=toml)
    task, warnings = load_harbor_task(folder / "task.toml", reply_check=reply_check)
    assert warnings == []
    assert (task.suite, task.id, task.mode) == ("my-dataset", "answer-42", "agent")
    assert task.input == task.prompt == "Write the number 42 to /app/answer.txt.\n"
    assert task.verifier.kind == HARBOR
    assert task.verifier.options == {
        "tests": str(folder / "tests"),
        "timeout_s": 60.0,
        "env": {"V": "2"},
        "user": "nobody",
    }
    env = task.environment
    assert env is not None
    assert (env.context, env.image) == (folder / "environment", None)
    assert (env.cpus, env.memory_mb, env.allow_internet, env.workdir) == (2.0, 2048, False, "/app")
    assert (env.env, env.logs, env.agent_timeout_s, env.solution) == ({"A": "1"}, True, 120.0, None)
    assert task.timeout_s == 300 + 120 + 60 + 60
    assert task.oracle  # solution/solve.sh exists


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (
            ("timeout_sec = 60", "timeout_sec = -5"),
            "verifier.timeout_sec must be a number greater than 0; got -5",
        ),
        (
            ("timeout_sec = 120", 'timeout_sec = "soon"'),
            'agent.timeout_sec must be a number of seconds; got string "soon"',
        ),
        (
            ("build_timeout_sec = 300", "build_timeout_sec = 0"),
            "environment.build_timeout_sec must be a number greater than 0; got 0",
        ),
        (
            ("build_timeout_sec = 300", "build_timeout_sec = 300\nmemory_mb = 1.5"),
            "environment.memory_mb must be an integer; got number 1.5",
        ),
        (
            ("build_timeout_sec = 300", 'build_timeout_sec = 300\nmemory = "lots"'),
            'environment.memory must be a size such as "2G" or "512M"; got string "lots"',
        ),
        (
            ("build_timeout_sec = 300", 'build_timeout_sec = 300\nallow_internet = "no"'),
            'environment.allow_internet must be true or false; got string "no"',
        ),
        (
            ("build_timeout_sec = 300", 'build_timeout_sec = 300\nworkdir = "app"'),
            'environment.workdir must be an absolute path in the container; got string "app"',
        ),
        (
            ("build_timeout_sec = 300", "build_timeout_sec = 300\nenv = { A = 1 }"),
            "environment.env must be a table of strings; A is integer 1",
        ),
        (
            ('schema_version = "1.1"', 'schema_version = "2.0"'),
            'schema_version must be one of "1.0", "1.1", "1.2", "1.3", "1.4"; got string "2.0"',
        ),
        (
            ('schema_version = "1.1"', 'version = "0.9"'),
            'version must be one of "1.0"; got string "0.9"',
        ),
        (("[agent]\ntimeout_sec = 120", "[metadata.x]"), None),
    ],
)
def test_a_wrong_value_is_refused_naming_the_key_and_what_was_expected(
    tmp_path: Path, edit: tuple[str, str], expected: str | None
) -> None:
    toml = TASK_TOML.replace(*edit, 1)
    if expected is None:  # a table that is not one
        toml, expected = "agent = 3\n" + toml, "agent must be a table; got integer 3"
    folder = write_task(tmp_path / "ds", "t", toml=toml)
    assert expected in problems_of(folder)


def test_every_problem_is_reported_at_once(tmp_path: Path) -> None:
    toml = TASK_TOML.replace("timeout_sec = 60", "timeout_sec = -1").replace(
        "timeout_sec = 120", "timeout_sec = false"
    )
    folder = write_task(tmp_path / "ds", "t", toml=toml, test_sh=None)
    problems = problems_of(folder)
    assert len(problems) == 3, problems
    assert "tests/test.sh is missing: the task cannot be verified" in problems


def test_unknown_keys_are_warned_about_not_refused(tmp_path: Path) -> None:
    toml = TASK_TOML + 'custom = 1\n[environment.healthcheck]\ncommand = "true"\n[future]\nx = 1\n'
    toml = toml.replace("[agent]", "[agent]\nmodel_hint = 'x'")
    folder = write_task(tmp_path / "ds", "t", toml=toml)
    task, warnings = load_harbor_task(folder / "task.toml")
    assert task.id == "t"
    assert "environment.custom is not a key Harbor defines here; ignored" in warnings
    assert "agent.model_hint is not a key Harbor defines here; ignored" in warnings
    assert "future is not a key Harbor defines here; ignored" in warnings
    assert any(w.startswith("environment.healthcheck: a healthcheck is not run") for w in warnings)


def test_the_older_version_key_is_read(tmp_path: Path) -> None:
    toml = TASK_TOML.replace('schema_version = "1.1"', 'version = "1.0"')
    folder = write_task(tmp_path / "ds", "t", toml=toml)
    task, warnings = load_harbor_task(folder / "task.toml")
    assert task.id == "t" and warnings == []


@pytest.mark.parametrize(
    ("extra", "toml_edit", "expected"),
    [
        ({"steps/one/instruction.md": "x"}, None, "a multi-step task (steps/) is not run"),
        (
            {"environment/docker-compose.yaml": "services: {}"},
            None,
            "environment/docker-compose.yaml: Compose environments",
        ),
        (
            {},
            ("timeout_sec = 60", 'timeout_sec = 60\nenvironment_mode = "separate"'),
            'verifier.environment_mode = "separate" is not run',
        ),
        (
            {},
            ("build_timeout_sec = 300", "build_timeout_sec = 300\ngpus = 1"),
            "environment.gpus = 1: containers get no GPUs here",
        ),
    ],
)
def test_a_layout_we_do_not_run_is_refused_with_the_reason(
    tmp_path: Path,
    extra: dict[str, str],
    toml_edit: tuple[str, str] | None,
    expected: str,
) -> None:
    toml = TASK_TOML.replace(*toml_edit) if toml_edit else TASK_TOML
    folder = write_task(tmp_path / "ds", "t", toml=toml, extra=extra)
    assert any(p.startswith(expected) for p in problems_of(folder)), problems_of(folder)


def test_no_dockerfile_needs_a_prebuilt_image(tmp_path: Path) -> None:
    folder = write_task(tmp_path / "ds", "t", dockerfile=None)
    assert any("environment/Dockerfile is missing" in p for p in problems_of(folder))
    prebuilt = TASK_TOML.replace("[environment]", '[environment]\ndocker_image = "img:1"')
    folder = write_task(tmp_path / "ds", "u", dockerfile=None, toml=prebuilt)
    task, _ = load_harbor_task(folder / "task.toml")
    assert task.environment is not None
    assert (task.environment.context, task.environment.image) == (None, "img:1")


def test_scripted_replies_and_marks_come_from_metadata_agentbench(tmp_path: Path) -> None:
    toml = TASK_TOML + (
        '[metadata.agentbench]\nscripted = ["done"]\nmax_turns = 7\nmarks = ["smoke"]\n'
    )
    folder = write_task(tmp_path / "ds", "t", toml=toml)
    task, _ = load_harbor_task(folder / "task.toml", reply_check=reply_check)
    assert (task.scripted, task.max_turns, task.marks) == (("done",), 7, ("smoke",))
    bad = TASK_TOML + '[metadata.agentbench]\nscripted = [{ tool_calls = 3 }]\nmarks = ["1x"]\n'
    folder = write_task(tmp_path / "ds", "u", toml=bad)
    problems = problems_of(folder)
    assert any(p.startswith("metadata.agentbench.scripted[0] is not a valid") for p in problems)
    assert any(
        p.startswith('metadata.agentbench.marks: "1x" must be a marker name') for p in problems
    )


def test_controls_are_the_oracle_and_an_agent_that_does_nothing(tmp_path: Path) -> None:
    solved = write_task(tmp_path / "ds", "solved")
    unsolved = write_task(tmp_path / "ds", "unsolved", solve_sh=None)
    tasks = [load_harbor_task(f / "task.toml")[0] for f in (solved, unsolved)]
    planned = plan_controls(tasks)
    shown = [(p.task.id, p.control.name, p.control.expect, p.run is not None) for p in planned]
    assert shown == [
        ("solved", "positive", "pass", True),
        ("solved", "empty", "fail", True),
        ("unsolved", "positive", "pass", False),
        ("unsolved", "empty", "fail", True),
    ]
    oracle = planned[0].run
    assert oracle is not None and oracle.environment is not None
    assert oracle.environment.solution == solved / "solution"
    nop = planned[1].run
    assert nop is not None and nop.environment is not None and nop.environment.solution is None
    assert nop.scripted == ("",)
    assert "no solution/solve.sh" in planned[2].missing


def test_sizes_read_as_docker_reads_them() -> None:
    assert [size_mb(s) for s in ("2G", "512M", "1.5g", "1024K", "4GiB", "x")] == [
        2048,
        512,
        1536,
        1,
        4096,
        None,
    ]
