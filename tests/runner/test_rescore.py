"""python -m pytest_agentbench rescore RUN_DIR (docs/cost.md): the current verifiers on
a finished run's saved answers, into a new run folder that says where it came from."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_agentbench import schemas
from pytest_agentbench.__main__ import main

SUITE = """
[suite]
name = "r"
verifier = { kind = "exact" }
repairs = 1

[[task]]
id = "case"
input = "say hi"
target = "hi"
scripted = ["Hi", "hi"]

[[task]]
id = "fixed"
input = "say yo"
target = "yo"
scripted = ["yo"]

[[task]]
id = "slow"
input = "wait"
target = "x"
timeout_s = 0.5
scripted = [{ text = "x", delay_s = 3 }]
"""


def test_a_fixed_verifier_rescores_the_saved_answers_into_a_new_run(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    suite = pytester.makefile(".toml", bench_r=SUITE)
    pytester.runpytest("--agentbench", "-p", "no:cacheprovider").assert_outcomes(passed=2, failed=1)
    run = (pytester.path / "agentbench-results" / "latest").resolve()
    before = {r["task_id"]: r for r in json.loads((run / "summary.json").read_text())["tasks"]}
    assert before["case"]["repaired"] is True
    # the verifiers change: "case" now passes first time, "fixed" now fails
    changed = SUITE.replace('target = "yo"', 'target = "you"')
    suite.write_text(
        changed.replace('target = "hi"', 'target = "i"\nverifier = { kind = "includes" }')
    )
    capsys.readouterr()  # (the inner pytest run's output)
    assert main(["rescore", str(run)]) == 0
    printed = capsys.readouterr().out
    out = run.parent / f"{run.name}-rescored"
    assert f"-> {out}" in printed and "2 changed" in printed
    summary = json.loads((out / "summary.json").read_text())
    schemas.validate("summary", summary)
    schemas.validate("ctrf", json.loads((out / "ctrf.json").read_text()))
    assert summary["rescored"]["from"] == str(run)
    assert summary["rescored"]["changed"] == 2
    after = {r["task_id"]: r for r in summary["tasks"]}
    for record in after.values():
        schemas.validate("task_record", record)
    assert after["case"]["outcome"] == "passed"
    assert after["case"]["repaired"] is False and after["case"]["first_attempt_reward"] == 1
    assert len(after["case"]["rounds"]) == 1  # the repair round would not have run
    assert after["fixed"]["outcome"] == "failed" and after["fixed"]["reward"] == 0
    assert after["fixed"]["usage"] == before["fixed"]["usage"]  # what the run spent
    assert after["slow"] == {**before["slow"], "rescore_kept": "ended timeout, not by a verdict"}
    result = json.loads((Path(after["fixed"]["rollout_dir"]) / "result.json").read_text())
    schemas.validate("result", result)
    assert result["record"]["outcome"] == "failed"
    assert (Path(after["fixed"]["rollout_dir"]) / "trajectory.json").exists()
    # the earlier run is untouched, and a second rescore into the same folder is refused
    assert json.loads((run / "summary.json").read_text())["tasks"][0]["task_id"] == "case"
    assert main(["rescore", str(run)]) == 2
    assert "exists already" in capsys.readouterr().err
