"""Harbor datasets run for real in Podman: the controls tell a working task from a
broken one (its oracle fails: named as broken, apart from the agents' scores), and
`-n 2` with 8 container tasks in flight ends with every container removed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from containers_support import left_by, usable_engine
from harbor_support import TASK_TOML, write_task

from pytest_agentbench.environments.engine import Engine

SOLVES = (
    '\n[metadata.agentbench]\nscripted = [{ tool_calls = [{ name = "bash", arguments = '
    '{ command = "echo 42 > answer.txt" } }] }, "done"]\n'
)
GIVES_UP = '\n[metadata.agentbench]\nscripted = ["I cannot do this."]\n'


@pytest.fixture
def engine() -> Engine:
    return usable_engine()


def latest(root: Path) -> Path:
    return (root / "agentbench-results" / "latest").resolve()


def test_controls_name_a_task_whose_oracle_fails(pytester: pytest.Pytester, engine: Engine) -> None:
    write_task(pytester.path / "ds", "works")
    write_task(pytester.path / "ds", "broken", solve_sh="#!/bin/bash\necho 41 > /app/answer.txt\n")
    result = pytester.runpytest(
        "--agentbench", "ds", "--agentbench-controls", "-p", "no:cacheprovider"
    )
    out = result.stdout.str()
    assert "controls: 4 run — 3 behaved, 1 misbehaved" in out, out
    result.stdout.fnmatch_lines(["*broken*positive*known-good answer does not pass*"])
    summary = json.loads((latest(pytester.path) / "summary.json").read_text())
    controls = json.dumps(summary["controls"])
    assert "broken" in controls
    assert left_by(engine, latest(pytester.path).name) == []


def test_eight_container_tasks_under_xdist_leave_no_container(
    pytester: pytest.Pytester, engine: Engine
) -> None:
    for index in range(8):
        tail = SOLVES if index % 2 == 0 else GIVES_UP
        write_task(pytester.path / "ds", f"task-{index}", toml=TASK_TOML + tail)
    result = pytester.runpytest_subprocess(
        "--agentbench", "ds", "-n", "2", "--agentbench-concurrency", "4", "-p", "no:cacheprovider",
        timeout=600,
    )  # fmt: skip
    out = result.stdout.str()
    assert "8 tasks: 4 passed, 4 failed" in out, out
    records = [
        json.loads(p.read_text()) for p in latest(pytester.path).glob("tasks/ds/*/result.json")
    ]
    passed = sorted(r["task_id"] for r in records if r["outcome"] == "passed")
    assert passed == ["task-0", "task-2", "task-4", "task-6"]
    assert left_by(engine, latest(pytester.path).name) == []
