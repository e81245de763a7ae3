"""Hostile Harbor tasks, run for real in Podman containers through `pytest --agentbench`:
a Dockerfile that does not build is a harness error naming the task, the step and the
log; no reward, a reward of "banana", a verifier past its timeout (and the straggler it
left, writing a reward later) are verifier errors, never a pass nor a silent 0; an agent
that looks for /tests, forges a reward and plants symlinks in the log folders gains
nothing and never makes the harness read or write the host through a link. No container
is left behind."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from containers_support import BASE_IMAGE, left_by, usable_engine
from harbor_support import TASK_TOML, write_task

from pytest_agentbench.environments.engine import Engine

QUICK = TASK_TOML.replace("timeout_sec = 60", "timeout_sec = 20")
DONE = '\n[metadata.agentbench]\nscripted = ["done"]\n'


def scripted(*commands: str) -> str:
    """A [metadata.agentbench] table whose scripted agent runs ``commands`` with bash, one
    per turn, then stops."""
    calls = [
        '{ tool_calls = [{ name = "bash", arguments = { command = ' + json.dumps(c) + " } }] }"
        for c in commands
    ]
    return "\n[metadata.agentbench]\nscripted = [" + ", ".join([*calls, '"done"']) + "]\n"


@pytest.fixture
def engine() -> Engine:
    return usable_engine()


def results(root: Path) -> dict[str, dict[str, object]]:
    """Each task's result.json by task id, from the run's latest folder."""
    found = {}
    for path in (root / "agentbench-results" / "latest" / "tasks").glob("*/*/result.json"):
        record = json.loads(path.read_text())
        found[str(record["task_id"])] = record
    return found


def run_id_of(root: Path) -> str:
    return (root / "agentbench-results" / "latest").resolve().name


def test_hostile_tasks_end_as_errors_that_say_why(
    pytester: pytest.Pytester, engine: Engine, tmp_path: Path
) -> None:
    canary = tmp_path / "host-canary.txt"
    secret = tmp_path / "host-secret.txt"
    secret.write_text("the host's own file\n")
    ds = pytester.path / "hostile"
    write_task(
        ds, "broken-build", dockerfile=f"FROM {BASE_IMAGE}\nRUN echo building-now && exit 3\n"
    )
    write_task(ds, "no-reward", toml=QUICK + DONE, test_sh="#!/bin/bash\necho checked nothing\n")
    write_task(
        ds,
        "banana",
        toml=QUICK + DONE,
        test_sh="#!/bin/bash\necho banana > /logs/verifier/reward.txt\n",
    )
    straggler = (
        "#!/bin/bash\n"
        "nohup sh -c 'sleep 4; echo 1 > /logs/verifier/reward.txt' >/dev/null 2>&1 &\n"
        "sleep 60\n"
    )
    slow = TASK_TOML.replace("timeout_sec = 60", "timeout_sec = 2")
    write_task(ds, "slow-verifier", toml=slow + DONE, test_sh=straggler)
    forger = scripted(
        "ls /tests; ls /solution",
        "echo 1 > /logs/verifier/reward.txt; echo '{\"reward\": 1}' > /logs/verifier/reward.json",
    )
    only_on_success = (  # writes no reward on failure: a forged one would be read
        "#!/bin/bash\n"
        '[ "$(cat /app/answer.txt 2>/dev/null)" = 42 ] && echo 1 > /logs/verifier/reward.txt\n'
        "exit 0\n"
    )
    write_task(ds, "forger", toml=QUICK + forger, test_sh=only_on_success)
    planter = scripted(
        f"ln -s {secret} /logs/verifier/reward.txt; ln -s {canary} /logs/artifacts/out.txt; "
        f"ln -s / /logs/agent/root",
    )
    write_task(ds, "planter", toml=QUICK + planter)

    result = pytester.runpytest("--agentbench", "hostile", "-p", "no:cacheprovider")
    out = result.stdout.str()
    found = results(pytester.path)
    assert set(found) == {
        "broken-build",
        "no-reward",
        "banana",
        "slow-verifier",
        "forger",
        "planter",
    }
    assert not any(r["outcome"] == "passed" for r in found.values()), out

    build = found["broken-build"]
    assert build["outcome"] == "harness_error"
    error = str(build["error"])
    assert "task 'broken-build'" in error and "build step" in error, error
    assert "building-now" in error or "exit" in error, error

    for name, words in [
        ("no-reward", "tests/test.sh wrote no reward"),
        ("banana", "reward.txt must hold one finite number; got 'banana'"),
        ("slow-verifier", "did not finish within 2s"),
        ("planter", "symlinks in the log folders"),
    ]:
        record = found[name]
        assert record["outcome"] == "failed", (name, record)
        verdict = record["attempts"][-1]["verdict"]  # type: ignore[index]
        assert words in verdict["error"], (name, verdict)
        assert record["reward"] == 0.0

    # the straggler's late reward was never written where it could count
    slow_dir = Path(str(found["slow-verifier"]["rollout_dir"]))
    assert not (slow_dir / "verifier" / "reward.txt").exists()

    # the forger saw no tests and no solution, and its forged rewards were removed
    forged = found["forger"]
    assert forged["outcome"] == "failed" and forged["reward"] == 0.0, forged
    assert "wrote no reward" in forged["attempts"][-1]["verdict"]["error"]  # type: ignore[index]
    trajectory = (Path(str(forged["rollout_dir"])) / "trajectory.json").read_text()
    assert "cannot access '/tests'" in trajectory and "cannot access '/solution'" in trajectory

    # the planted links were copied as links, and the host was neither read nor written
    planted = Path(str(found["planter"]["rollout_dir"]))
    assert not canary.exists()
    assert (planted / "artifacts" / "out.txt").is_symlink()
    assert "the host's own file" not in (planted / "verifier" / "reward.json").read_text()
    assert left_by(engine, run_id_of(pytester.path)) == []
