"""The Markdown summary (what a PR comment shows) of a run with two models: one score
line per model and never a pooled one, and where the models differ — each task one
passed and the other did not, with both sides' reasons, capped — and the same against a
baseline run. Real runs through pytester and the scripted provider."""

from __future__ import annotations

import json
import os

import pytest

from pytest_agentbench import schemas
from pytest_agentbench.report.compare import MAX_DISAGREEMENTS

TASKS = 24
WRONG_FOR_WEAK = 22  # more than the cap


def suite(strong_wrong: tuple[int, ...] = ()) -> str:
    tasks = "".join(
        f'[[task]]\nid = "t{i:02d}"\ninput = "say ok"\ntarget = "ok"\n'
        f'scripted = ["{"nope" if i in strong_wrong else "ok"}"]\n'
        + (f'scripted_by_model = {{ weak = ["bad{i}"] }}\n' if i < WRONG_FOR_WEAK else "")
        for i in range(TASKS)
    )
    return f'[suite]\nname = "d"\nverifier = {{ kind = "exact" }}\n\n{tasks}'


MODELS = ("--agentbench-model", "strong=scripted", "--agentbench-model", "weak=scripted")


def run(pytester: pytest.Pytester, out: str, *args: str) -> str:
    result = pytester.runpytest(
        "--agentbench",
        "-p",
        "no:cacheprovider",
        "--agentbench-out",
        out,
        "--agentbench-markdown",
        f"{out}.md",
        *args,
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    return (pytester.path / f"{out}.md").read_text()


def test_two_models_lead_with_a_line_each_and_list_where_they_differ(
    pytester: pytest.Pytester,
) -> None:
    pytester.makefile(".toml", bench_d=suite())
    markdown = run(pytester, "before", *MODELS)
    head, _, *rest = markdown.splitlines()
    assert head.startswith("## agentbench — 48 tasks: 26 passed, 22 failed")
    assert "score" not in head  # never pooled over the two models
    assert rest[0].startswith("- score strong  1.000")
    assert rest[1].startswith("- score weak    0.083")
    assert f"  - where they differ ({WRONG_FOR_WEAK} task(s)):" in markdown
    assert (
        '    - `d::t00` — strong: passed · weak: reward 0 — expected "ok", got "bad0"' in markdown
    ), markdown
    listed = [line for line in markdown.splitlines() if line.startswith("    - `d::t")]
    assert len(listed) == MAX_DISAGREEMENTS
    assert f"    - … and {WRONG_FOR_WEAK - MAX_DISAGREEMENTS} more (see summary.json)" in markdown
    assert "`d::t22`" not in markdown  # both passed it: no disagreement
    summary = json.loads((pytester.path / "before" / "latest" / "summary.json").read_text())
    schemas.validate("summary", summary)
    (pair,) = summary["comparisons"]
    assert pair["first"] == "strong" and pair["second"] == "weak"

    # against that baseline: the strong model now fails t03, the weak one is unchanged
    pytester.makefile(".toml", bench_d=suite(strong_wrong=(3,)))
    baseline = os.path.realpath(pytester.path / "before" / "latest")
    after = run(pytester, "after", *MODELS, "--agentbench-baseline", baseline)
    section = after.split("### Against the baseline", 1)[1]
    assert "where they differ (1 task(s)):" in section
    assert (
        '    - `d::t03` — baseline [strong]: passed · this run [strong]: reward 0 — expected "ok", '
        'got "nope"' in section
    ), section
    summary = json.loads((pytester.path / "after" / "latest" / "summary.json").read_text())
    schemas.validate("summary", summary)
    strong = next(c for c in summary["baseline"]["comparisons"] if "strong" in c["second"])
    assert strong["disagreements_total"] == 1
    (differs,) = strong["disagreements"]
    assert differs["task"] == "d::t03" and differs["first"] == "passed"
    assert differs["second_dir"].endswith("t03[strong]")


def test_one_model_keeps_its_score_in_the_heading(pytester: pytest.Pytester) -> None:
    pytester.makefile(".toml", bench_d=suite(strong_wrong=(0,)))
    markdown = run(pytester, "one")
    assert markdown.splitlines()[0].endswith(f"· score {(TASKS - 1) / TASKS:.3f}")
    assert "where they differ" not in markdown
