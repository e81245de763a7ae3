"""With rollouts in flight their files are written by one writer thread
(artifacts/file_writer.py), and still nothing is reported before it is on disk: each
task's result.json exists when pytest reports its item, and a task whose files cannot be
written fails with the error, as it does when run one at a time. Real pytest runs against
the real scripted server."""

from __future__ import annotations

import json

import pytest

#: big answers: encoding and writing a task's files takes long enough that a report sent
#: before they are written would be seen
BIG = " ".join(str(i * 7919 % 100_003) for i in range(20_000))  # no loop in it
TASKS = 8

SUITE = '[suite]\nname = "big"\nverifier = { kind = "exact" }\n' + "".join(
    f'[[task]]\nid = "t{i}"\ninput = "q"\ntarget = "{BIG}"\nscripted = ["{BIG}"]\n'
    for i in range(TASKS)
)

CONFTEST = """
import json
from pathlib import Path

import pytest

from pytest_agentbench.artifacts.paths import task_dir
from pytest_agentbench.session.stash import STATE_KEY

SEEN = {}


def _dir(config, task_id):
    state = config.stash[STATE_KEY]
    return task_dir(state.folder.ensure(), "big", task_id, state.settings.model_name)


def pytest_collection_finish(session):
    # t3's folder is taken by a file: its files cannot be written
    blocked = _dir(session.config, "t3")
    blocked.parent.mkdir(parents=True, exist_ok=True)
    blocked.write_text("in the way")


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_logreport(report):
    if report.when == "call" and "::t" in report.nodeid:
        task_id = report.nodeid.rpartition("::")[2].split("[")[0]
        SEEN[task_id] = (report.outcome, _dir(pytest_runtest_logreport.config, task_id))


def pytest_configure(config):
    pytest_runtest_logreport.config = config


def pytest_unconfigure(config):
    found = {}
    for task_id, (outcome, folder) in SEEN.items():
        found[task_id] = [outcome, (folder / "result.json").is_file()]
    Path("seen.json").write_text(json.dumps(found))
"""


@pytest.mark.parametrize("concurrency", ["4", "1"])
def test_each_task_is_on_disk_when_reported_and_a_write_error_fails_its_item(
    pytester: pytest.Pytester, concurrency: str
) -> None:
    pytester.makefile(".toml", bench_big=SUITE)
    pytester.makeconftest(CONFTEST)
    result = pytester.runpytest(
        "--agentbench", "-p", "no:cacheprovider", "--agentbench-concurrency", concurrency
    )
    seen = json.loads((pytester.path / "seen.json").read_text())
    blocked = seen.pop("t3")
    assert seen == {f"t{i}": ["passed", True] for i in range(TASKS) if i != 3}
    assert blocked == ["failed", False]
    result.assert_outcomes(passed=TASKS - 1, errors=1)
    result.stdout.fnmatch_lines(["HARNESS ERROR bench_big.toml::t3 - FileExistsError*"])
