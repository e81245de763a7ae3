"""A task of our own format may name an environment (a Dockerfile folder or an image):
read into the task, and refused where it could not work (a plain answer, an agent under
test, a verifier that judges on the host, a folder without a Dockerfile)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_agentbench.errors import SuiteError
from pytest_agentbench.suites.load import load_suite
from pytest_agentbench.verifiers.builtin import BUILTIN_VERIFIERS

VERIFIERS = {verifier.kind: verifier for verifier in BUILTIN_VERIFIERS}
AGENT = """
[suite]
mode = "agent"
verifier = { kind = "command", run = "true" }
environment = { dockerfile = "env", cpus = 1.5, memory_mb = 256, workdir = "/w" }

[[task]]
id = "a"
input = "do it"

[[task]]
id = "b"
input = "do it"
environment = "localhost/agentbench-base:bookworm"
"""


def test_an_environment_is_read_into_the_task(tmp_path: Path) -> None:
    (tmp_path / "env").mkdir()
    (tmp_path / "env" / "Dockerfile").write_text("FROM scratch\n")
    (tmp_path / "bench_env.toml").write_text(AGENT)
    a, b = load_suite(tmp_path / "bench_env.toml", VERIFIERS).tasks
    assert a.environment is not None and b.environment is not None
    assert (a.environment.context, a.environment.image) == (tmp_path / "env", None)
    assert (a.environment.cpus, a.environment.memory_mb, a.environment.workdir) == (1.5, 256, "/w")
    assert a.environment.logs is False
    assert (b.environment.context, b.environment.image) == (
        None,
        "localhost/agentbench-base:bookworm",
    )


def test_without_one_nothing_changes(tmp_path: Path) -> None:
    (tmp_path / "bench_plain.toml").write_text('[[task]]\nid = "a"\ninput = "x"\ntarget = "x"\n')
    (task,) = load_suite(tmp_path / "bench_plain.toml", VERIFIERS).tasks
    assert task.environment is None


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (('mode = "agent"\n', ""), '$.suite.environment needs mode = "agent"'),
        (
            ('dockerfile = "env"', 'dockerfile = "nowhere"'),
            "dockerfile: nowhere holds no Dockerfile",
        ),
        (('dockerfile = "env"', 'dockerfile = "env", image = "x"'), "needs one of dockerfile"),
        (
            ('kind = "command", run = "true"', 'kind = "python_tests", tests = "x"'),
            "the python_tests verifier judges on the host",
        ),
        (("cpus = 1.5", "cpus = -1"), "$.suite.environment.cpus must be greater than 0"),
        (('workdir = "/w"', 'workdir = "w"'), "$.suite.environment.workdir"),
    ],
)
def test_an_environment_that_cannot_work_is_refused(
    tmp_path: Path, edit: tuple[str, str], expected: str
) -> None:
    (tmp_path / "env").mkdir()
    (tmp_path / "env" / "Dockerfile").write_text("FROM scratch\n")
    (tmp_path / "bench_env.toml").write_text(AGENT.replace(*edit, 1))
    with pytest.raises(SuiteError) as caught:
        load_suite(tmp_path / "bench_env.toml", VERIFIERS)
    assert any(expected in problem for problem in caught.value.problems), caught.value.problems
