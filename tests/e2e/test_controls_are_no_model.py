"""Controls and canaries are played by the scripted provider, but they are never a model:
in a run of several models with ``--agentbench-canary`` the terminal's suites × models
table and comparisons, summary.json, the Markdown summary and report.html name the
run's models only, and report.html's Models table shows each model's score and
outcomes (the numbers summary.json holds)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from html_report_support import Page

from pytest_agentbench.artifacts.score_stats import interval_text

SUITE = """
[suite]
name = "sums"
verifier = { kind = "exact" }

[[task]]
id = "apples"
input = "3 + 4?"
target = "7"
scripted = ["7"]
scripted_by_model = { weak = ["8"] }

[[task]]
id = "pears"
input = "2 + 2?"
target = "4"
scripted = ["4"]

[[task]]
id = "plums"
input = "1 + 1?"
target = "2"
scripted = ["3"]
"""


def run_two_models(pytester: pytest.Pytester) -> tuple[Any, Path, dict[str, Any]]:
    pytester.makefile(".toml", bench_sums=SUITE)
    result = pytester.runpytest(
        "--agentbench",
        "--agentbench-model",
        "strong=scripted",
        "--agentbench-model",
        "weak=scripted",
        "--agentbench-canary",
        "--agentbench-markdown",
        "run.md",
        "-p",
        "no:cacheprovider",
    )
    run_dir = (pytester.path / "agentbench-results" / "latest").resolve()
    summary = json.loads((run_dir / "summary.json").read_text())
    return result, run_dir, summary


@pytest.mark.slow
def test_a_canary_is_no_model_in_any_report(pytester: pytest.Pytester) -> None:
    result, run_dir, summary = run_two_models(pytester)
    assert summary["controls"]["canary"] == 1  # the canary ran, as the scripted provider
    canary = next(t for t in summary["tasks"] if t.get("control"))
    assert canary["model"] == "scripted"
    out = result.stdout.str()
    table = out.split("scores by suite × model")[1].split("tokens ")[0]
    assert table.split("\n")[1].split() == ["suite", "strong", "weak"]
    compared = [line for line in out.splitlines() if line.startswith("compared: ")]
    assert len(compared) == 1 and compared[0].startswith("compared: strong − weak = +0.333")
    assert "scripted" not in table
    # summary.json and the Markdown summary
    assert {row["model"] for row in summary["scores"]} == {"strong", "weak"}
    assert [(c["first"], c["second"]) for c in summary["comparisons"]] == [("strong", "weak")]
    markdown = (pytester.path / "run.md").read_text()
    assert "`scripted`" not in markdown and "− scripted" not in markdown
    # report.html: the models, their comparison, the side-by-side tables, the filter
    text = (run_dir / "report.html").read_text()
    page = Page(text)
    data = page.data_blocks()["run-data"]
    assert data["models"] == ["strong", "weak"]
    models = text.split('<section id="models">')[1].split("</section>")[0]
    assert "<td>scripted</td>" not in models and "− scripted" not in models
    sides = text.split('<section id="side">')[1].split("</section>")[0]
    assert "strong → weak" in sides and "scripted" not in sides
    # the canary keeps its row in the task table, named for its control, no model's
    row = next(r for r in data["rows"] if "[canary-" in r[1])
    assert row[2] == "—"
    # the Models table: each model's score and outcomes, as summary.json has them
    assert "no score" not in models
    for row in summary["scores"]:  # one suite: each model's row of scores[] is its whole
        score = interval_text(row["stats"]["score"])
        passed, failed = row["outcomes"]["passed"], row["outcomes"]["failed"]
        cells = models.split(f"<tr><td>{row['model']}</td>")[1].split("</tr>")[0]
        assert f"<td>{row['tasks']}</td><td>{score}</td>" in cells
        assert f"{passed} passed</span>" in cells and f"{failed} failed</span>" in cells
    assert summary["scores"][0]["score"] != summary["scores"][1]["score"]
