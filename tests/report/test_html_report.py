"""The HTML report, read as a file (tests/report/test_html_report_browser.py opens it in
Chromium): written by every run that ran a task, rebuilt by ``python -m
pytest_agentbench report`` from any run folder (a merged one too), everything from the
model escaped, secrets redacted, the loop picture drawn from the recorded score trace."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import subprocess
import sys
from html import escape
from pathlib import Path
from typing import Any

import pytest
from html_report_support import HOSTILE, LOOPS, WEB, Page, run

from pytest_agentbench.artifacts.score_stats import interval_text
from pytest_agentbench.artifacts.summary import RunFacts, build_summary
from pytest_agentbench.core.task_record import TaskRecord
from pytest_agentbench.report.html_page import asset, tasks_section


def report_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "pytest_agentbench", "report", *args],
        capture_output=True, text=True, check=False, timeout=120, env=full_env,
    )  # fmt: skip


def load(run_dir: Path, name: str = "report.html") -> tuple[str, Page, dict[str, Any]]:
    text = (run_dir / name).read_text(encoding="utf-8")
    summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    return text, Page(text), summary


def detail_of(page: Page, task_id: str) -> dict[str, Any]:
    blocks = page.data_blocks()
    rows = blocks["run-data"]["rows"]
    index = next(i for i, r in enumerate(rows) if r[1] == task_id)
    detail: dict[str, Any] = blocks[f"d-{index}"]
    return detail


def test_every_run_writes_the_report_with_its_tasks_and_score(pytester: pytest.Pytester) -> None:
    pytester.makefile(".toml", bench_web=WEB)
    run_dir = run(pytester)
    text, page, summary = load(run_dir)
    data = page.data_blocks()["run-data"]
    assert len(data["rows"]) == summary["totals"]["tasks"] == 3
    assert f'<strong id="task-count">{summary["totals"]["tasks"]}</strong>' in text
    score = interval_text(summary["totals"]["stats"]["score"])
    assert f'<strong id="score-value">{score}</strong>' in text
    # the first page of the table is there without JavaScript, the failures first
    rendered = [attrs["data-i"] for tag, attrs in page.tags if tag == "tr" and "data-i" in attrs]
    outcomes = [data["rows"][int(i)][3] for i in rendered]
    assert len(rendered) == 3 and outcomes[-1] == "passed" and outcomes[0] == "failed"
    wrong = detail_of(page, "wrong")
    assert [a["round"] for a in wrong["attempts"]] == [0, 1]
    assert wrong["attempts"][0]["answer"] == "no"
    assert wrong["attempts"][0]["feedback_sent"]  # the repair round's feedback is shown
    assert wrong["prompt"][-1] == {"role": "user", "text": "say yes"}
    assert (
        "wrong" in text
        and "reward 0" in data["rows"][[r[1] for r in data["rows"]].index("wrong")][9]
    )


def test_model_output_never_becomes_markup(pytester: pytest.Pytester) -> None:
    pytester.makefile(".toml", bench_web=WEB)
    _, page, _ = load(run(pytester))
    scripts = page.scripts
    *data_blocks, (last_attrs, code) = scripts
    assert all(attrs.get("type") == "application/json" for attrs, _ in data_blocks)
    assert code == asset("report.js") and "type" not in last_attrs
    assert not [tag for tag, _ in page.tags if tag in ("img", "iframe", "object", "embed")]
    handlers = [(tag, name) for tag, attrs in page.tags for name in attrs if name.startswith("on")]
    assert handlers == []
    # the hostile answer is kept as text, whole, in its task's data
    assert detail_of(page, "inject")["attempts"][0]["answer"] == HOSTILE
    # only our own script may run, and nothing may be fetched
    policy = next(
        a["content"] for t, a in page.tags if a.get("http-equiv") == "Content-Security-Policy"
    )
    digest = base64.b64encode(hashlib.sha256(code.encode()).digest()).decode()
    assert f"script-src 'sha256-{digest}'" in str(policy) and "default-src 'none'" in str(policy)


def test_the_html_option_and_runs_that_write_nothing(pytester: pytest.Pytester) -> None:
    pytester.makefile(".toml", bench_web=WEB)
    run_dir = run(pytester, "--agentbench-html", "pages/run.html")
    assert (pytester.path / "pages" / "run.html").is_file()
    assert not (run_dir / "report.html").exists()
    pytester.runpytest("--agentbench", "--agentbench-out", "none", "--collect-only")
    assert not (pytester.path / "none").exists()


def test_report_rebuilds_a_merged_run_of_shards(pytester: pytest.Pytester) -> None:
    pytester.makefile(".toml", bench_web=WEB)
    shards = [run(pytester, "--agentbench-shard", f"{k}/2", out=f"shard{k}") for k in (1, 2)]
    merged = pytester.path / "merged"
    done = subprocess.run(
        [sys.executable, "-m", "pytest_agentbench", "merge", *map(str, shards),
         "--out", str(merged)],
        capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    built = report_cli(str(merged), "--html", str(merged / "page.html"))
    assert built.returncode == 0, built.stderr
    assert built.stdout.strip() == f"wrote {merged / 'page.html'}"
    _, page, summary = load(merged, "page.html")
    assert len(page.data_blocks()["run-data"]["rows"]) == len(summary["tasks"]) == 3
    # each task's panel is read from the shard folder that ran it
    for task in ("inject", "plain-pass", "wrong"):
        detail = detail_of(page, task)
        assert detail["attempts"] and detail["prompt"], detail.get("note")


def test_several_models_get_scores_a_paired_comparison_and_a_side_by_side(
    pytester: pytest.Pytester,
) -> None:
    """summary.json holding records of two models (as a multi-model run writes it; made
    here from two real runs' records with the summary writer itself)."""
    pytester.makefile(".toml", bench_web=WEB)
    runs = [
        run(pytester, out="chat"),
        run(pytester, "--agentbench-model", "scripted/anthropic", out="msg"),
    ]
    records = [
        TaskRecord.from_json(t)
        for r in runs
        for t in json.loads((r / "summary.json").read_text())["tasks"]
    ]
    both = pytester.path / "both"
    both.mkdir()
    summary = build_summary(
        records,
        RunFacts(
            run_id="both", settings={"fingerprint": "two-models"}, tool_version="0",
            start_ms=0, stop_ms=1, partial=False, exit_status=None,
        ),
    )  # fmt: skip
    (both / "summary.json").write_text(json.dumps(summary))
    built = report_cli(str(both))
    assert built.returncode == 0, built.stderr
    text, page, _ = load(both)
    assert len(page.data_blocks()["run-data"]["rows"]) == 6
    models = text.split('<section id="models">')[1].split("</section>")[0]
    assert (
        "<td>scripted</td><td>3</td>" in models
        and "<td>scripted/anthropic</td><td>3</td>" in models
    )
    assert "scripted − scripted/anthropic = +0.000 (n=3" in models
    assert "0 regression(s), 0 improvement(s), 3 unchanged, of 3 task(s) both ran" in text
    blocks = page.data_blocks()
    index = next(
        i for i, r in enumerate(blocks["run-data"]["rows"])
        if r[2] == "scripted/anthropic" and r[1] == "wrong"
    )  # fmt: skip
    anthropic = blocks[f"d-{index}"]
    assert anthropic["prompt"][-1]["text"] == "say yes"  # read from the Messages request
    assert anthropic["attempts"][1]["answer"] == "still no"
    # a summary that carries its own comparisons (a multi-model run's writer) is shown as is
    given = {"first": "scripted", "second": "scripted/anthropic", "test": "McNemar exact",
             "difference": {"value": 0.0, "n": 3}, "p_value": 1.0, "significant": False,
             "excluded": 0}  # fmt: skip
    (both / "summary.json").write_text(json.dumps({**summary, "comparisons": [given]}))
    assert report_cli(str(both)).returncode == 0
    text = (both / "report.html").read_text()
    assert "<li>scripted − scripted/anthropic = 0.0 (McNemar exact, p=1.0)</li>" in text


def test_report_of_a_folder_that_is_no_run_says_so(tmp_path: Path) -> None:
    done = report_cli(str(tmp_path))
    assert done.returncode == 2
    assert (
        done.stderr.strip()
        == f"error: {tmp_path}: no summary.json (is this an agentbench run folder?)"
    )


def test_report_redacts_the_secrets_of_the_environment(pytester: pytest.Pytester) -> None:
    secret = "sk-test-4f9a1c77e0d2b5a6"
    pytester.makefile(
        ".toml",
        bench_leak=f'[suite]\nname = "leak"\nverifier = {{ kind = "exact" }}\n\n[[task]]\n'
        f'id = "echo"\ninput = "hi"\ntarget = "x"\nscripted = ["the key is {secret}"]\n',
    )
    env_before = os.environ.pop("OPENAI_API_KEY", None)
    try:
        run_dir = run(pytester)
    finally:
        if env_before is not None:
            os.environ["OPENAI_API_KEY"] = env_before
    assert secret in (run_dir / "report.html").read_text()  # the run did not know it
    done = report_cli(str(run_dir), env={"OPENAI_API_KEY": secret})
    assert done.returncode == 0, done.stderr
    text = (run_dir / "report.html").read_text()
    assert secret not in text
    assert detail_of(Page(text), "echo")["attempts"][0]["answer"] == "the key is [redacted]"


def test_a_killed_loop_is_pictured_from_its_score_trace(pytester: pytest.Pytester) -> None:
    pytester.makefile(".toml", bench_loops=LOOPS)
    run_dir = run(pytester)
    result = json.loads(next(run_dir.glob("tasks/loops/stuck*/result.json")).read_text())
    loop = result["attempts"][0]["loop"]
    trace, killed = loop["channels"]["answer"]["trace"], loop["killed"]
    assert 2 <= len(trace) <= 200
    assert trace[-1][1] == killed["chars"] and trace[-1][2] == killed["score"]
    assert [p[1] for p in trace] == sorted(p[1] for p in trace)
    fine = json.loads(next(run_dir.glob("tasks/loops/fine*/result.json")).read_text())
    assert "trace" not in fine["attempts"][0]["loop"]["channels"]["answer"]  # nothing to draw
    text, page, _ = load(run_dir)
    rows = page.data_blocks()["run-data"]["rows"]
    stuck = next(i for i, r in enumerate(rows) if r[1] == "stuck")
    figure = text.split(f'<figure class="loop" id="loop-{stuck}">')[1].split("</figure>")[0]
    assert 'class="killpoint"' in figure and 'class="threshold"' in figure
    assert f"{killed['chars']:,} characters" in figure
    assert f'id="loop-{next(i for i, r in enumerate(rows) if r[1] == "fine")}"' not in text


def test_a_baseline_is_set_side_by_side_regressions_first(pytester: pytest.Pytester) -> None:
    pytester.makefile(".toml", bench_web=WEB)
    before = run(pytester, out="before")
    changed = WEB.replace('scripted = ["ok"]', 'scripted = ["nope"]').replace(
        'scripted = ["no", "still no"]', 'scripted = ["yes"]'
    )
    pytester.makefile(".toml", bench_web=changed)
    after = run(pytester, out="after")
    done = report_cli(str(after), "--baseline", str(before))
    assert done.returncode == 0, done.stderr
    text = (after / "report.html").read_text()
    side = text.split('<section id="side">')[1].split("</section>")[0]
    assert "1 regression(s), 1 improvement(s), 1 unchanged, of 3 task(s) both ran" in side
    order = [side.index(f"web::{task}<") for task in ("plain-pass", "wrong", "inject")]
    assert order == sorted(order)
    # a task the sides disagree on links to a panel with both sides' answers
    assert '<tr class="regression"><td><a href="#d0-0">web::plain-pass</a></td>' in side
    assert '<tr class="improvement"><td><a href="#d0-1">web::wrong</a></td>' in side
    page = Page(text)
    panels = [attrs["id"] for tag, attrs in page.tags if tag == "details"]
    assert panels == ["d0-0", "d0-1"]  # inject: unchanged, no panel
    hrefs = {attrs.get("href") for tag, attrs in page.tags if tag == "a"}
    assert {"#d0-0", "#d0-1"} <= hrefs
    regression = side.split('id="d0-0"')[1].split("</details>")[0]
    baseline_side, this_side = regression.split('<div class="sxs-side">')[1:]
    assert "baseline: <span" in baseline_side and "<pre>ok</pre>" in baseline_side
    assert "this run: <span" in this_side and "<pre>attempt 2: nope</pre>" in this_side
    assert "expected" in this_side.split('<p class="reason">')[1].split("</p>")[0]
    improvement = side.split('id="d0-1"')[1].split("</details>")[0]
    earlier, later = improvement.split('<div class="sxs-side">')[1:]
    assert "<pre>attempt 1: no</pre><pre>attempt 2: still no</pre>" in earlier
    assert "<pre>yes</pre>" in later and '<p class="reason">passed</p>' in later


def test_a_partial_run_says_so_in_a_banner(pytester: pytest.Pytester) -> None:
    pytester.makefile(".toml", bench_web=WEB)
    text, page, summary = load(run(pytester, "-k", "wrong"))
    assert summary["partial"] is True
    banner = text.split('<p class="banner" id="partial">')[1].split("</p>")[0]
    assert banner == "Partial run: 1 of 3 tasks (2 deselected)"
    assert len(page.data_blocks()["run-data"]["rows"]) == 1


def test_the_server_side_table_escapes_what_it_shows() -> None:
    hostile = '<script>alert(1)</script><img src=x onerror="alert(2)">'
    row = ["web", hostile, "m", "failed", 0.0, 0.0, 1, 10, 0.5, f"reward 0 — got {hostile}"]
    html = tasks_section([(0, row)], 1)
    page = Page(html)
    assert [tag for tag, _ in page.tags if tag in ("script", "img")] == []
    cells = html.split('<tr data-i="0">')[1]
    assert escape(hostile) in cells and f"reward 0 — got {escape(hostile)}" in cells


def test_an_agent_task_panel_has_each_turn_its_tool_calls_and_results(
    pytester: pytest.Pytester,
) -> None:
    suite = Path(__file__).parents[2] / "example_suites" / "bench_agent.toml"
    pytester.makefile(".toml", bench_agent=suite.read_text(encoding="utf-8"))
    _, page, _ = load(run(pytester, "-k", "add-slugify"))
    detail = detail_of(page, "add-slugify")
    first = detail["attempts"][0]
    assert [t["turn"] for t in first["turns"]] == list(range(1, len(first["turns"]) + 1))
    calls = [c for t in first["turns"] for c in t["tool_calls"]]
    writes = [c for c in calls if c["name"] == "write_file"]
    assert writes and writes[0]["arguments"].startswith("path: textkit/slug.py\ncontent:\ndef ")
    assert re.fullmatch(r"wrote \d+ bytes to textkit/slug\.py", writes[0]["output"])
    assert all(t["usage"]["total"] for t in first["turns"])  # usage per turn
    assert first["feedback_sent"] and detail["attempts"][1]["verdict"]["reward"] == 1.0
