"""Two report details, through real pytest runs (pytester): the HTML models table's cost
cell counts the tasks whose cost is not known (it read ``not known for 6 of None
task(s)``), and a loop kill's time reads one way in every report (it read ``at 0.0s``,
``at 1 s`` and ``at 0.4s`` in one summary)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from fault_server_support import DyingServer

ROOT = Path(__file__).resolve().parents[2]


def test_the_models_table_cost_cell_counts_the_tasks_of_unknown_cost(
    pytester: pytest.Pytester,
) -> None:
    tasks = "".join(f'[[task]]\nid = "t{i}"\ninput = "3 + 4?"\ntarget = "7"\n' for i in range(3))
    pytester.makefile(".toml", bench_sums=f'[suite]\nverifier = {{ kind = "exact" }}\n{tasks}')
    server = DyingServer()
    try:
        result = pytester.runpytest(
            "--agentbench",
            "-p",
            "no:cacheprovider",
            "--agentbench-base-url",
            server.url,
            "--agentbench-no-stream",
            "--agentbench-model",
            "big=openai-compat/big-model",
            "--agentbench-model",
            "small=openai-compat/small-model",
        )
    finally:
        server.stop()
    result.assert_outcomes(passed=6)
    html = ((pytester.path / "agentbench-results" / "latest").resolve() / "report.html").read_text()
    models = html.split('<section id="models">', 1)[1].split("</section>", 1)[0]
    assert "of None" not in models
    assert models.count("not known for 3 of 3 task(s): no price or no usage") == 2


def test_a_loop_kill_time_reads_one_way_in_every_report(pytester: pytest.Pytester) -> None:
    shutil.copy(ROOT / "example_suites" / "bench_reasoning_loops.toml", pytester.path)
    result = pytester.runpytest(
        "--agentbench", "-p", "no:cacheprovider", "--agentbench-markdown", "s.md"
    )
    run = (pytester.path / "agentbench-results" / "latest").resolve()
    summary = json.loads((run / "summary.json").read_text())
    texts = {
        "terminal": result.stdout.str(),
        "markdown": (pytester.path / "s.md").read_text(),
        "records": "\n".join(str(t.get("error")) + str(t.get("message")) for t in summary["tasks"]),
        "html": (run / "report.html").read_text(),
    }
    killed = [t for t in summary["tasks"] if t["outcome"] == "loop_killed"]
    assert killed
    for where, text in texts.items():
        times = re.findall(r"\bat (\S+) ?s\b", text)
        assert re.search(r"\bat \d+(?:\.\d+)? s\b", text), where
        assert not re.search(r"\bat \d+\.\ds\b", text), (where, times)  # the old "at 0.4s"
    for record in killed:
        seconds = record["loop"]["killed_s"]
        from pytest_agentbench.core.durations import seconds_text

        assert f"at {seconds_text(seconds)} s" in record["message"]
