"""xdist: the same outcomes as a serial run, one report written by the controller."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

SUITE = """
[suite]
name = "par"
verifier = { kind = "number" }
repairs = 1
"""
TASKS = "".join(
    f'\n[[task]]\nid = "t{i}"\ninput = "{i} + 1?"\ntarget = {i + 1}\n'
    f'scripted = ["{i + 1 if i % 3 else i}", "{i + 1 if i % 2 else i}"]\n'
    for i in range(12)
)


def outcomes(run: Path) -> dict[str, tuple[str, str]]:
    ctrf = json.loads((run / "ctrf.json").read_text())
    return {t["name"]: (t["status"], t["rawStatus"]) for t in ctrf["results"]["tests"]}


@pytest.mark.slow
def test_xdist_run_equals_serial_run(pytester: pytest.Pytester) -> None:
    pytester.makefile(".toml", bench_par=SUITE + TASKS)
    serial = pytester.runpytest_subprocess(
        "--agentbench", "--agentbench-out", "serial", "-p", "no:cacheprovider"
    )
    parallel = pytester.runpytest_subprocess(
        "--agentbench", "--agentbench-out", "par", "-n", "2", "-p", "no:cacheprovider"
    )
    assert serial.ret == parallel.ret == 1
    serial_run = (pytester.path / "serial" / "latest").resolve()
    par_run = (pytester.path / "par" / "latest").resolve()
    assert outcomes(serial_run) == outcomes(par_run)
    assert len(outcomes(par_run)) == 12
    # one run folder, written by the controller; every task's artifacts in it
    assert len([p for p in (pytester.path / "par").iterdir() if p.name != "latest"]) == 1
    assert len(list(par_run.rglob("result.json"))) == 12
    summary = json.loads((par_run / "summary.json").read_text())
    assert summary["totals"]["tasks"] == 12
    parallel.stdout.fnmatch_lines(["*= agentbench =*", "12 tasks: *"])
