"""Judged tasks as the reports show them: real pytest runs (pytester) of the example
judged suite, the scripted provider as the model under test and as the judge.

What the judge said is a failed task's reason; a passed task carries no repair feedback;
a judge below ``--agentbench-judge-min-kappa`` marks every place the score is shown; a κ
that cannot be estimated says why instead of printing a zero-width interval."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "example_suites" / "bench_support_replies.toml"
LABELS = ROOT / "example_suites" / "support_replies_labels.jsonl"
RATIONALE = "Deflects: no way to find the parcel and no next step."


def _latest(pytester: pytest.Pytester) -> Path:
    return (pytester.path / "agentbench-results" / "latest").resolve()


def _summary(pytester: pytest.Pytester) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((_latest(pytester) / "summary.json").read_text())
    return data


def _example(pytester: pytest.Pytester) -> None:
    shutil.copy(EXAMPLE, pytester.path / EXAMPLE.name)
    shutil.copy(LABELS, pytester.path / LABELS.name)


def test_a_failed_judged_task_reads_what_the_judge_said_and_a_passed_one_has_no_feedback(
    pytester: pytest.Pytester,
) -> None:
    _example(pytester)
    result = pytester.runpytest(
        "--agentbench", "-p", "no:cacheprovider", "--agentbench-markdown", "s.md"
    )
    result.assert_outcomes(passed=2, failed=1)
    line = f"✗ support-replies::late-parcel: reward 0 — judge: {RATIONALE}"
    result.stdout.fnmatch_lines([line])
    assert f"reward 0 — judge: {RATIONALE}" in (pytester.path / "s.md").read_text()
    records = {t["task_id"]: t for t in _summary(pytester)["tasks"]}
    assert records["late-parcel"]["message"] == f"reward 0 — judge: {RATIONALE}"
    assert records["late-parcel"]["last_feedback"].startswith("the judge found")
    for passed in ("refund-window", "password-reset"):
        assert records[passed]["outcome"] == "passed"
        assert records[passed]["last_feedback"] is None, records[passed]["last_feedback"]


def test_a_repaired_judged_task_that_still_fails_reads_the_judges_rationale(
    pytester: pytest.Pytester,
) -> None:
    text = EXAMPLE.read_text().replace(
        'scripted = ["Parcels are sometimes late. Please wait a few more days."]',
        'scripted = ["Parcels are sometimes late.", "Please wait a few more days."]',
    )
    (pytester.path / EXAMPLE.name).write_text(text)
    result = pytester.runpytest(
        "--agentbench", "-p", "no:cacheprovider", "--agentbench-repairs", "1", "-k", "parcel"
    )
    result.stdout.fnmatch_lines(
        [f"✗ support-replies::late-parcel: reward 0 — repairs exhausted (1): judge: {RATIONALE}"]
    )
