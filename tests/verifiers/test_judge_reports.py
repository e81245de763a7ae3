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


def test_a_judge_below_the_least_kappa_marks_the_score_wherever_it_is_shown(
    pytester: pytest.Pytester,
) -> None:
    _example(pytester)
    args = ["--agentbench", "-p", "no:cacheprovider", "--agentbench-judge-labels", LABELS.name]
    result = pytester.runpytest(
        *args, "--agentbench-judge-min-kappa", "0.6", "--agentbench-markdown", "s.md"
    )
    mark = "⚠ judge not calibrated (κ 0.500 < 0.6)"
    corrected = "corrected for the judge's error 0.741 (95 % CI 0.00–1.00)"
    # the headline itself, not a line further down
    lines = result.stdout.lines
    head = lines.index("3 tasks: 2 passed, 1 failed")
    assert (
        lines[head + 1] == f"score 0.667 ± 0.272 (n=3, 95 % CI 0.208–0.939) · {mark}; {corrected}"
    )
    title = (pytester.path / "s.md").read_text().splitlines()[0]
    assert (
        title
        == "## agentbench — 3 tasks: 2 passed, 1 failed · score 0.667 (⚠ judge not calibrated)"
    )
    summary = _summary(pytester)
    standing = summary["totals"]["judge_standing"]
    assert standing["status"] == "judge not calibrated" and standing["why"] == "κ 0.500 < 0.6"
    assert (standing["judged"], standing["scored"]) == (3, 3)
    assert standing["corrected"]["value"] == pytest.approx(
        summary["judge"]["pass_rate"]["corrected"]["value"]
    )
    assert summary["scores"][0]["judge_standing"] == standing
    html = (_latest(pytester) / "report.html").read_text()
    header = html.split('id="score-value">', 1)[1].split("</p>", 1)[0]
    assert 'id="judge-standing">⚠ judge not calibrated (κ 0.500 &lt; 0.6)' in header

    # a judge that reaches the least κ: the score carries its corrected rate, unmarked
    result = pytester.runpytest(
        *args, "--agentbench-judge-min-kappa", "0.4", "--agentbench-markdown", "s.md"
    )
    lines = result.stdout.lines
    score = lines[lines.index("3 tasks: 2 passed, 1 failed") + 1]
    assert score.endswith(f" · {corrected}") and "⚠" not in score
    title = (pytester.path / "s.md").read_text().splitlines()[0]
    assert title.endswith("score 0.667 (corrected for the judge's error 0.741)")
    assert _summary(pytester)["totals"]["judge_standing"]["status"] is None

    # no labels at all: "no calibration", and nothing to correct with
    result = pytester.runpytest(
        "--agentbench", "-p", "no:cacheprovider", "--agentbench-judge-min-kappa", "0.4"
    )
    result.stdout.fnmatch_lines(["score 0.667 * · ⚠ judge not calibrated (no calibration)"])


def test_each_models_score_line_carries_the_judges_standing(pytester: pytest.Pytester) -> None:
    _example(pytester)
    result = pytester.runpytest(
        "--agentbench",
        "-p",
        "no:cacheprovider",
        "--agentbench-judge-labels",
        LABELS.name,
        "--agentbench-judge-min-kappa",
        "0.6",
        "--agentbench-model",
        "big=scripted",
        "--agentbench-model",
        "small=scripted",
        "--agentbench-markdown",
        "s.md",
    )
    result.stdout.fnmatch_lines(
        [
            "score big    0.667 * · ⚠ judge not calibrated (κ 0.500 < 0.6); corrected *",
            "score small  0.667 * · ⚠ judge not calibrated (κ 0.500 < 0.6); corrected *",
        ]
    )
    text = (pytester.path / "s.md").read_text()
    for model in ("big  ", "small"):
        line = next(x for x in text.splitlines() if x.startswith(f"- score {model}  0.667"))
        assert "· ⚠ judge not calibrated (κ 0.500 < 0.6); corrected" in line
    html = (_latest(pytester) / "report.html").read_text()
    models = html.split('<section id="models">', 1)[1].split("</section>", 1)[0]
    assert models.count("⚠ judge not calibrated (κ 0.500 &lt; 0.6)") == 2


NAYSAYER = """
[suite]
name = "nay"
[suite.verifier]
kind = "judge"
rubric = "The answer names the capital of France."
scripted_judge = [{ reply = { rationale = "No.", verdict = "fail" } }]

[[task]]
id = "capital"
input = "Capital of France?"
scripted = ["Paris"]
"""


def test_a_kappa_that_cannot_be_estimated_says_why_in_every_report(
    pytester: pytest.Pytester,
) -> None:
    pytester.makefile(".toml", bench_nay=NAYSAYER)
    labels = [("Paris", "pass"), ("Paris.", "pass"), ("Lyon", "fail"), ("Nice", "fail")]
    (pytester.path / "labels.jsonl").write_text(
        "".join(json.dumps({"task": "capital", "answer": a, "label": x}) + "\n" for a, x in labels)
    )
    result = pytester.runpytest(
        "--agentbench",
        "-p",
        "no:cacheprovider",
        "--agentbench-calibrate",
        "--agentbench-judge-labels",
        "labels.jsonl",
        "--agentbench-judge-min-kappa",
        "0.4",
        "--agentbench-markdown",
        "s.md",
    )
    unknown = "κ unknown (the judge never said pass)"
    result.stdout.fnmatch_lines(
        [
            f"judge calibration (4 labelled answer(s) judged): accuracy 0.500 * · {unknown} · *",
            "⚠ judge not calibrated: κ unknown: the judge never said pass "
            "(--agentbench-judge-min-kappa 0.4)",
        ]
    )
    result.stdout.no_fnmatch_line("*0.00–0.00*")
    cal = _summary(pytester)["judge"]["calibration"]
    assert cal["kappa_unknown"] == "the judge never said pass"
    assert cal["kappa"]["value"] is None and cal["kappa"]["lo"] is None
    markdown = (pytester.path / "s.md").read_text()
    html = (_latest(pytester) / "report.html").read_text()
    for text in (markdown, html):
        assert unknown in text and "0.00–0.00" not in text


def test_kappa_unknown_names_the_rater_that_used_one_category() -> None:
    from pytest_agentbench.core.judge_stats import kappa_unknown

    both = ["pass", "fail"]
    assert kappa_unknown([("pass", "fail"), ("fail", "fail")], both) == "the judge never said pass"
    assert kappa_unknown([("pass", "pass"), ("fail", "pass")], both) == "the judge never said fail"
    assert kappa_unknown([("pass", "pass"), ("pass", "fail")], both) == "no labelled answer is fail"
    assert kappa_unknown([], both) == "no labelled answer was judged"
    assert kappa_unknown([("pass", "pass"), ("fail", "fail")], both) is None
    scale = [1, 2, 3, 4, 5]
    assert (
        kappa_unknown([(1, 3), (5, 3)], scale, "gave") == "the judge gave every labelled answer 3"
    )


def test_calibrating_without_labels_is_a_usage_error_that_says_how_to_give_them(
    pytester: pytest.Pytester,
) -> None:
    _example(pytester)
    result = pytester.runpytest("--agentbench", "-p", "no:cacheprovider", "--agentbench-calibrate")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "ERROR: --agentbench-calibrate judges answers people labelled, and none were "
            "found: give them with --agentbench-judge-labels FILE (JSONL or CSV: task, answer, "
            "label; *), the ini key agentbench_judge_labels, or a judge task's labels *"
        ]
    )
    # the ini names them: it runs
    pytester.makeini(f"[pytest]\nagentbench_judge_labels = {LABELS.name}\n")
    result = pytester.runpytest("--agentbench", "-p", "no:cacheprovider", "--agentbench-calibrate")
    result.assert_outcomes(passed=12)
