"""``python -m pytest_agentbench plan``: tasks × epochs for a paired comparison, from a
real baseline run made by the scripted provider (pytester) or from a base rate, run as a
real subprocess."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
from records_support import make_record

from pytest_agentbench.core import sequential_looks, stats, verdicts
from pytest_agentbench.core.task_record import TaskRecord
from pytest_agentbench.report.planning import baseline_noise


def plan_command(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest_agentbench", "plan", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


SUITE = '[suite]\nname = "base"\nverifier = { kind = "exact" }\n\n' + "".join(
    f'[[task]]\nid = "t{i}"\ninput = "say ok"\ntarget = "ok"\nscripted = ["{reply}"]\n'
    for i, reply in enumerate(["ok", "ok", "ok", "no"])
)


def baseline_run(pytester: pytest.Pytester, out: str, *args: str) -> str:
    pytester.makefile(".toml", bench_base=SUITE)
    result = pytester.runpytest(
        "--agentbench", "--agentbench-out", out, "-p", "no:cacheprovider", *args
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # t3 fails in every epoch
    return os.path.realpath(pytester.path / out / "latest")


def test_a_baseline_run_once_per_task_gives_the_optimistic_and_conservative_plans(
    pytester: pytest.Pytester,
) -> None:
    once = baseline_run(pytester, "once")
    done = plan_command("--difference", "0.1", "--baseline", once, cwd=pytester.path)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert out.startswith("base rate 0.750 (baseline ")
    assert "4 task(s)" in out
    assert "unknown (the baseline ran each task once): optimistic" in out
    assert "unknown (the baseline ran each task once): conservative, p(1 − p)" in out
    # the same numbers as the library's plan, one row per epoch count
    quiet = verdicts.plan(0.1, noise=0.0, noise_source="")
    noisy = verdicts.plan(0.1, noise=0.75 * 0.25, noise_source="")
    for row in (*quiet.rows, *noisy.rows):
        line = f"{row.tasks:>6,} task(s) × {row.epochs} epoch(s)"
        assert line in out
    data = json.loads(
        plan_command(
            "--difference",
            "0.1",
            "--baseline",
            once,
            "--json",
            "--epochs",
            "1,4",
            cwd=pytester.path,
        ).stdout
    )
    assert data["base_rate"] == 0.75
    optimistic, conservative = data["plans"]
    assert optimistic["noise"] == 0.0 and conservative["noise"] == pytest.approx(0.1875)
    assert [row["epochs"] for row in conservative["rows"]] == [1, 4]
    assert conservative["rows"][1]["tasks"] < conservative["rows"][0]["tasks"]
    assert optimistic["rows"][0]["tasks"] == quiet.rows[0].tasks

    # with epochs the noise is measured: the scripted model answers alike every epoch
    twice = baseline_run(pytester, "twice", "--agentbench-epochs", "2")
    data = json.loads(
        plan_command("--difference", "0.1", "--baseline", twice, "--json", cwd=pytester.path).stdout
    )
    (measured,) = data["plans"]
    assert measured["noise"] == 0.0
    assert measured["noise_source"] == "measured from the baseline's epochs"


def test_rate_only_and_bad_input() -> None:
    here = Path.cwd()
    done = plan_command("--difference", "0.2", "--rate", "0.5", cwd=here)
    assert done.returncode == 0, done.stderr
    assert "unknown (no baseline): optimistic" in done.stdout
    assert "unknown (no baseline): conservative" in done.stdout
    for args, message in [
        (("--difference", "0.1"), "give either --baseline RUN_DIR or --rate P"),
        (("--difference", "0", "--rate", "0.5"), "a difference of 0 cannot be detected"),
        (("--difference", "0.1", "--rate", "1.5"), "expected a pass rate from 0 to 1"),
        (("--difference", "0.1", "--rate", "0.5", "--epochs", "1,x"), "--epochs: expected"),
        (("--difference", "0.1", "--baseline", "nowhere"), "nowhere does not exist"),
    ]:
        bad = plan_command(*args, cwd=here)
        assert bad.returncode == 2 and message in bad.stderr, (args, bad.stderr)


def test_noise_is_measured_from_epochs_per_task_and_model() -> None:
    def rec(task: str, model: str, epoch: int, passed: bool) -> TaskRecord:
        return make_record(
            task_id=task,
            model=model,
            epoch=epoch,
            outcome="passed" if passed else "failed",
            reward=1.0 if passed else 0.0,
        )

    records = [
        rec("a", "m", 1, True),
        rec("a", "m", 2, False),  # variance 0.5
        rec("a", "n", 1, True),
        rec("a", "n", 2, True),  # 0
        rec("b", "m", 1, False),
        rec("b", "m", 2, False),  # 0
    ]
    base, noise, tasks = baseline_noise(records)
    assert tasks == 3 and base == pytest.approx(0.5)
    assert noise == pytest.approx(0.5 / 3)


def test_a_planned_epochs_row_reaches_about_the_planned_power() -> None:
    """The planning model, simulated: plan 0.2 at noise 0.2 for 3 epochs; in each of 400
    seeded trials, the second side is ahead by one on a share 0.2 of the tasks, and each
    side's sample of a task is a coin with variance 0.2, averaged over 3 epochs. A paired
    z-test at 0.05 detects the difference in about 80 % of trials (a little more: the
    plan takes the null spread, √(σ² + d²), as McNemar's test does)."""
    difference, noise, epochs = 0.2, 0.2, 3
    (row,) = verdicts.plan(difference, noise=noise, noise_source="", epochs=(epochs,)).rows
    rng = random.Random(11)
    q = (1 - (1 - 4 * noise) ** 0.5) / 2  # q(1 − q) = noise
    detected = 0
    trials = 400
    for _ in range(trials):
        diffs = []
        for _task in range(row.tasks):
            first = sum(rng.random() < q for _ in range(epochs)) / epochs
            second = sum(rng.random() < q for _ in range(epochs)) / epochs
            ahead = 1.0 if rng.random() < difference else 0.0
            diffs.append(ahead + second - first)
        detected += abs(sequential_looks.paired_z(diffs)) >= stats.z_value(0.95)
    assert 0.74 <= detected / trials <= 0.95, (row.tasks, detected)
