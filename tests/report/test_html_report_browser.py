"""The HTML report in a real browser: headless Chromium through Playwright's Python API
(the system Chromium; ``AGENTBENCH_CHROMIUM`` names another binary). Skipped, saying
why, where neither Playwright nor a Chromium is installed; .ci/run installs both."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from html_report_support import HOSTILE, WEB, run

from pytest_agentbench.artifacts.score_stats import interval_text

sync_api = pytest.importorskip(
    "playwright.sync_api", reason="playwright is not installed (pip install -e '.[dev]')"
)
CHROMIUM = os.environ.get("AGENTBENCH_CHROMIUM") or next(
    filter(None, map(shutil.which, ("chromium", "chromium-browser", "google-chrome"))), None
)
if CHROMIUM is None:
    pytest.skip(
        "no Chromium found (apt-get install chromium, or set AGENTBENCH_CHROMIUM)",
        allow_module_level=True,
    )


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM)
        yield chromium
        chromium.close()


class Visit:
    """A page of the report with everything it logged and everything it asked for."""

    def __init__(self, browser: Any, path: Path, javascript: bool = True) -> None:
        self.context = browser.new_context(java_script_enabled=javascript)
        self.page = self.context.new_page()
        self.errors: list[str] = []
        self.requests: list[str] = []
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.url = path.as_uri()
        self.page.goto(self.url)

    def rows(self) -> list[list[str]]:
        cells: list[list[str]] = self.page.eval_on_selector_all(
            "#task-table tbody tr",
            "rows => rows.map(r => Array.from(r.cells, c => c.textContent))",
        )
        return cells


@pytest.fixture
def report(pytester: pytest.Pytester) -> tuple[Path, dict[str, Any]]:
    pytester.makefile(".toml", bench_web=WEB)
    run_dir = run(pytester)
    return run_dir / "report.html", json.loads((run_dir / "summary.json").read_text())


def test_the_page_shows_the_run_and_filters_sorts_and_opens_tasks(
    browser: Any, report: tuple[Path, dict[str, Any]]
) -> None:
    path, summary = report
    visit = Visit(browser, path)
    page = visit.page
    assert page.text_content("#task-count") == str(summary["totals"]["tasks"])
    assert page.text_content("#score-value") == interval_text(summary["totals"]["stats"]["score"])
    assert page.text_content("#shown") == "3 of 3 tasks"
    page.select_option("#f-outcome", "failed")
    failed = [t["task_id"] for t in summary["tasks"] if t["outcome"] == "failed"]
    assert [r[1] for r in visit.rows()] == failed == ["wrong"]
    page.select_option("#f-outcome", "")
    page.fill("#f-text", "plain")
    assert [r[1] for r in visit.rows()] == ["plain-pass"]
    page.fill("#f-text", "")
    page.click('th[data-col="task"]')
    assert [r[1] for r in visit.rows()] == ["inject", "plain-pass", "wrong"]
    page.click('th[data-col="task"]')
    assert [r[1] for r in visit.rows()] == ["wrong", "plain-pass", "inject"]
    page.click("#task-table tbody tr:has-text('wrong') td:nth-child(4)")
    panel = page.locator("#panel")
    panel.wait_for(state="visible")
    text = panel.inner_text()
    for part in ("web :: wrong [scripted]", "Prompt", "say yes", "First try", "Repair round 1"):
        assert part in text
    assert "still no" in text and "feedback given for round 1" in text.lower()
    assert visit.errors == [] and visit.requests == [visit.url]
    visit.context.close()


def test_an_injected_script_in_an_answer_stays_text(
    browser: Any, report: tuple[Path, dict[str, Any]]
) -> None:
    path, _ = report
    visit = Visit(browser, path)
    page = visit.page
    page.click("#task-table tbody tr:has-text('inject') td:nth-child(4)")
    page.locator("#panel").wait_for(state="visible")
    assert HOSTILE in page.locator("#panel").inner_text()
    assert page.evaluate("window.__pwned") is None
    assert page.locator("#panel img, #panel script").count() == 0
    assert visit.errors == [] and visit.requests == [visit.url]
    visit.context.close()


def test_without_javascript_the_tables_are_still_there(
    browser: Any, report: tuple[Path, dict[str, Any]]
) -> None:
    path, summary = report
    visit = Visit(browser, path, javascript=False)
    assert len(visit.rows()) == summary["totals"]["tasks"]
    assert visit.page.is_visible("#run") and not visit.page.is_visible("#filters")
    assert visit.requests == [visit.url]
    visit.context.close()


def test_the_models_table_shows_each_models_score_and_no_canary(
    browser: Any, pytester: pytest.Pytester
) -> None:
    """A run of two models with a canary: the Models table has a row per model with the
    score and outcomes of summary.json, the canary is no model (not a row, not a filter
    choice), and the model filter keeps that model's tasks."""
    from test_controls_are_no_model import SUITE

    pytester.makefile(".toml", bench_sums=SUITE)
    models = ("--agentbench-model", "strong=scripted", "--agentbench-model", "weak=scripted")
    run_dir = run(pytester, *models, "--agentbench-canary")
    summary = json.loads((run_dir / "summary.json").read_text())
    visit = Visit(browser, run_dir / "report.html")
    page = visit.page
    shown: list[list[str]] = page.eval_on_selector_all(
        "#models table tbody tr", "rows => rows.map(r => Array.from(r.cells, c => c.innerText))"
    )
    expected = [
        [row["model"], str(row["tasks"]), interval_text(row["stats"]["score"])]
        for row in summary["scores"]
    ]
    assert [cells[:3] for cells in shown] == expected
    assert [cells[3].split() for cells in shown] == [
        [str(row["outcomes"]["passed"]), "passed", str(row["outcomes"]["failed"]), "failed"]
        for row in summary["scores"]
    ]
    choices = page.eval_on_selector_all("#f-model option", "os => os.map(o => o.value)")
    assert choices == ["", "strong", "weak"]
    page.select_option("#f-model", "weak")
    assert sorted(r[1] for r in visit.rows()) == ["apples", "pears", "plums"]
    assert visit.errors == [] and visit.requests == [visit.url]
    visit.context.close()
