"""The HTML report is made as it is written, so its memory does not grow with the run:
summary.json is read one record at a time, and the page takes each task's row and panel
only when it writes it (docs/html-report.md, "Size")."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from html_report_support import Page

from pytest_agentbench.core.records import OUTCOMES
from pytest_agentbench.errors import AgentbenchError
from pytest_agentbench.report.html_data import ROW_COLUMNS
from pytest_agentbench.report.html_page import json_block, page_pieces
from pytest_agentbench.report.html_report import write_html_report
from pytest_agentbench.report.html_source import CHUNK, SummaryStream

TASKS = 300


def _row(k: int) -> list[Any]:
    return ["s", f"t{k}", "m", "failed" if k % 3 else "passed", 0.5, 0.0, 1, 2, 0.1, "<b>no"]


def _data(order: list[int]) -> dict[str, Any]:
    return {
        "summary": {"run_id": "r", "totals": {"tasks": TASKS}},
        "run_dir": "run",
        "models": ["m"],
        "suites": ["s"],
        "model_scores": [],
        "comparisons": [],
        "sides": [],
        "pictures": [],
        "loops": [],
        "first_page": [(i, _row(i)) for i in order[:100]],
        "tasks": TASKS,
        "order": order,
    }


def test_the_page_takes_each_row_and_panel_only_when_it_writes_it() -> None:
    written: list[str] = []
    ahead: list[int] = []  # rows and panels taken before the one before them was written

    def rows() -> Any:
        for k in range(TASKS):
            if k and json_block(_row(k - 1)) not in "".join(written[-2:]):
                ahead.append(k)
            yield _row(k)

    def panels() -> Any:
        for k in reversed(range(TASKS)):
            if k < TASKS - 1 and f'id="d-{k + 1}"' not in written[-1]:
                ahead.append(k)
            yield k, json_block({"key": f"s::t{k}", "answer": "</script><!--"})

    order = list(reversed(range(TASKS)))
    for piece in page_pieces(_data(order), rows(), panels()):
        written.append(piece)
    assert ahead == []
    text = "".join(written)
    blocks = Page(text).data_blocks()
    whole = {
        "columns": list(ROW_COLUMNS),
        "rows": [_row(k) for k in range(TASKS)],
        "order": order,
        "suites": ["s"],
        "models": ["m"],
        "outcomes": list(OUTCOMES),
        "loops": [],
    }
    # the run's data, written a row at a time, is the text of the whole one
    assert f'<script type="application/json" id="run-data">{json_block(whole)}</script>' in text
    assert blocks["d-7"] == {"key": "s::t7", "answer": "</script><!--"}
    assert list(blocks)[1:4] == [f"d-{TASKS - 1}", f"d-{TASKS - 2}", f"d-{TASKS - 3}"]


def _summary(tasks: list[Any]) -> dict[str, Any]:
    return {"schema_version": 1, "run_id": "r", "totals": {"tasks": len(tasks)},
            "tasks": tasks, "settings": {"loop_kill": 80, "note": "é" * 70000}}  # fmt: skip


def _records(count: int) -> list[Any]:
    return [
        {"task_id": f"t{k}", "reward": k / 7, "message": "ü€" * (k % 500), "rounds": [k, 1e-9]}
        for k in range(count)
    ]


@pytest.mark.parametrize("indent", [None, 2])
def test_summary_json_read_a_record_at_a_time_is_the_document(
    tmp_path: Path, indent: int | None
) -> None:
    records = _records(400)
    document = _summary([*records[:200], "not a record", *records[200:]])
    text = json.dumps(document, ensure_ascii=False, indent=indent)
    assert len(text) > 3 * CHUNK  # values cut by chunks, members after the tasks
    (tmp_path / "summary.json").write_text(text, encoding="utf-8")
    stream = SummaryStream(tmp_path, 10**9)
    assert list(stream.records()) == records
    assert stream.head == {k: v for k, v in document.items() if k != "tasks"}


def test_a_cut_summary_hands_over_its_records_before_the_fault(tmp_path: Path) -> None:
    text = json.dumps(_summary(_records(2000)), ensure_ascii=False)
    cut = text[: text.index('{"task_id": "t1500"')]
    (tmp_path / "summary.json").write_text(cut, encoding="utf-8")
    read = []
    with pytest.raises(AgentbenchError, match=r"summary\.json: cannot read it"):
        for record in SummaryStream(tmp_path, 10**9).records():
            read.append(record["task_id"])
    assert read == [f"t{k}" for k in range(1500)]


def test_a_summary_without_tasks_or_too_large_is_refused(tmp_path: Path) -> None:
    (tmp_path / "summary.json").write_text('{"run_id": "r"}', encoding="utf-8")
    with pytest.raises(AgentbenchError, match="not a pytest-agentbench summary"):
        list(SummaryStream(tmp_path, 10**9).records())
    with pytest.raises(AgentbenchError, match="larger than 4 bytes"):
        SummaryStream(tmp_path, 4)


def test_members_of_the_wrong_kind_are_passed_over_not_a_traceback(tmp_path: Path) -> None:
    """summary.json read as JSON and narrowed where read: a member of another kind than
    the writer's (a hand-edited or foreign file) is shown as missing."""
    odd = {"suite": "s", "task_id": "t0", "model": "m", "outcome": "failed", "usage": [1],
           "attempts": "2", "reward": "0.5", "rollout_dir": 7}  # fmt: skip
    document = {"run_id": "r", "tool": None, "totals": "x", "settings": [1], "scores": {"a": 1},
                "coverage": 3, "gate": [], "models": "m", "tasks": [odd, 5]}  # fmt: skip
    (tmp_path / "summary.json").write_text(json.dumps(document), encoding="utf-8")
    text = write_html_report(tmp_path).read_text(encoding="utf-8")
    blocks = Page(text).data_blocks()
    assert blocks["run-data"]["rows"] == [["s", "t0", "m", "failed", None, None, None, None,
                                           None, "failed"]]  # fmt: skip
    assert blocks["d-0"]["note"].startswith("no result.json")
    assert '<strong id="score-value">no score</strong>' in text
