"""``report.html``: one self-contained page for a run folder, built from its files only
(summary.json, each task's result.json and trajectory.json), so it can be rebuilt from
any run folder, a merged one included (``python -m pytest_agentbench report RUN_DIR``).

Its memory does not grow with the number of tasks: summary.json is read one record at a
time (``html_source.SummaryStream``); each task's table row and panel are made as its
record is read, redacted (the same redaction as every artifact: secret header values and
the given secret strings) and set aside in two temporary files; of every task only a few
numbers stay (its place in the failures-first order, its tokens and wall time, where its
panel lies); then ``html_page.page_pieces`` writes the page piece by piece, the rows and
panels read back one at a time. Only a run of several models, or one set beside a
baseline, reads summary.json once more for the few fields its comparisons need. See
docs/html-report.md.
"""

from __future__ import annotations

import heapq
import json
import tempfile
from array import array
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import field
from pathlib import Path
from typing import IO, TypedDict

from pytest_agentbench.artifacts.jsonio import write_text_atomic
from pytest_agentbench.artifacts.rollout_files import redacted_json
from pytest_agentbench.core.durations import any_seconds_text
from pytest_agentbench.core.fastclass import dataclass
from pytest_agentbench.core.jsontypes import JsonObject, JsonValue
from pytest_agentbench.report import html_svg
from pytest_agentbench.report.html_data import (
    DETAIL_BUDGET,
    SUMMARY_LIMIT,
    DiffPanel,
    Record,
    Side,
    SidePair,
    comparisons,
    is_control,
    mapping,
    model_scores,
    row,
    severity,
    side_by_side,
    task_key,
)
from pytest_agentbench.report.html_page import FIRST_PAGE, json_block, page_pieces
from pytest_agentbench.report.html_panel import side_view, task_detail
from pytest_agentbench.report.html_sections import PageData, RunData
from pytest_agentbench.report.html_source import SummaryStream

DEFAULT_NAME = "report.html"
MAX_LOOP_FIGURES = 60
#: The page is written in pieces of about this many characters.
#: The fields of a task record a comparison of models or runs reads.
_COMPARED = (
    "suite", "task_id", "model", "outcome", "reward", "first_attempt_reward", "rollout_dir",
)  # fmt: skip
#: the disagreeing tasks of one side-by-side table shown with both sides' answers
DIFF_PANELS = 20


class _Compared(TypedDict):
    model_scores: list[JsonValue]
    comparisons: list[JsonValue]
    sides: list[Side]


@dataclass
class _Tasks:
    """What the page keeps of every task while summary.json is read: a few numbers each,
    and the rows and panels in temporary files."""

    rows: IO[bytes]
    panels: IO[bytes]
    count: int = 0
    models: dict[str, None] = field(default_factory=dict)
    suites: set[str] = field(default_factory=set)
    classes: array[int] = field(default_factory=lambda: array("b"))
    rewards: array[float] = field(default_factory=lambda: array("d"))
    tokens: array[float] = field(default_factory=lambda: array("d"))
    walls: array[float] = field(default_factory=lambda: array("d"))
    #: Byte offsets of each panel's block in ``panels`` (one more than tasks) and the
    #: block's length in characters (what the size budget counts).
    offsets: array[int] = field(default_factory=lambda: array("q", [0]))
    lengths: array[int] = field(default_factory=lambda: array("q"))
    #: (0 when killed else 1, task index) of each panel with a loop picture.
    looped: list[tuple[int, int]] = field(default_factory=list)
    #: The first page of the table: the FIRST_PAGE worst tasks, as a heap of
    #: (negated severity key, row) so the least severe is dropped first.
    first: list[tuple[tuple[int, float, int], list[JsonValue]]] = field(default_factory=list)

    def add(self, record: Record, run_dir: Path, secrets: Sequence[str]) -> None:
        index = self.count
        self.count += 1
        self.suites.add(str(record.get("suite")))
        kind, reward = severity(record)
        self.classes.append(kind)
        self.rewards.append(reward)
        if not is_control(record):  # a control is no model's, and no task's tokens or time
            self.models.setdefault(str(record.get("model")), None)
            total = mapping(record.get("usage")).get("total")
            if isinstance(total, int):
                self.tokens.append(float(total))
            duration = record.get("duration_ms")
            if isinstance(duration, int) and record.get("outcome") != "harness_error":
                self.walls.append(float(duration) / 1000)
        values = redacted_json(row(record), secrets)[0]
        self.rows.write(json.dumps(values, ensure_ascii=False).encode("utf-8") + b"\n")
        heapq.heappush(self.first, ((-kind, -reward, -index), values))
        if len(self.first) > FIRST_PAGE:
            heapq.heappop(self.first)
        detail = redacted_json(task_detail(record, run_dir), secrets)[0]
        block = json_block(detail)
        self.panels.write(block.encode("utf-8"))
        self.offsets.append(self.panels.tell())
        self.lengths.append(len(block))
        loop = _loop_attempt(detail).get("loop")
        if isinstance(loop, dict):
            self.looped.append((0 if loop.get("killed") else 1, index))

    def order(self) -> array[int]:
        """Task indexes, the worst first (``html_data.severity``), stable within a class:
        the passes, all alike, in the file's order."""
        groups: dict[int, array[int]] = {}
        for index, kind in enumerate(self.classes):
            groups.setdefault(kind, array("q")).append(index)
        order = array("q")
        for kind in sorted(groups):
            members = groups[kind]
            order.extend(members if kind == 9 else sorted(members, key=self.rewards.__getitem__))
        return order

    def first_page(self) -> list[tuple[int, list[JsonValue]]]:
        ranked = sorted(self.first, reverse=True)
        return [(-key[2], values) for key, values in ranked]

    def panel(self, index: int) -> str:
        self.panels.seek(self.offsets[index])
        return self.panels.read(self.offsets[index + 1] - self.offsets[index]).decode("utf-8")

    def rows_read(self) -> Iterator[list[JsonValue]]:
        self.rows.seek(0)
        for line in self.rows:
            values: list[JsonValue] = json.loads(line)
            yield values


def _panel(block: str) -> JsonObject:
    """A panel's JSON read back (``json_block`` of a ``task_detail``)."""
    detail = json.loads(block)
    return detail if isinstance(detail, dict) else {}


def _loop_attempt(detail: JsonObject) -> Mapping[str, JsonValue]:
    """The panel's first attempt with a loop picture; empty when none has one."""
    attempts = detail.get("attempts")
    for attempt in attempts if isinstance(attempts, list) else []:
        if isinstance(attempt, dict) and attempt.get("loop"):
            return attempt
    return {}


def _stub(block: str) -> str:
    """A panel left out for the size budget: its key and reason, and where to look."""
    detail = _panel(block)
    return json_block({"key": detail.get("key"), "reason": detail.get("reason"), "attempts": [],
                       "prompt": [], "evidence": {},
                       "note": "left out: the report's size budget was spent on earlier tasks; "
                       f"see {detail.get('rollout_dir')}"})  # fmt: skip


def _budget(tasks: _Tasks, order: Iterable[int]) -> set[int]:
    """The tasks whose panels are left out: once the panels so far, the worst first,
    reach ``DETAIL_BUDGET`` characters, each one that would pass it."""
    spent, left_out = 0, set()
    for index in order:
        size = tasks.lengths[index]
        if spent + size > DETAIL_BUDGET:
            left_out.add(index)
            size = len(_stub(tasks.panel(index)))
        spent += size
    return left_out


def _panels(tasks: _Tasks, order: Iterable[int], left_out: set[int]) -> Iterator[tuple[int, str]]:
    for index in order:
        block = tasks.panel(index)
        yield index, _stub(block) if index in left_out else block


def _loop_figures(
    tasks: _Tasks, left_out: set[int], threshold: float | None
) -> list[tuple[int, str, str, str]]:
    """(task index, label, caption, svg) for each task with a killed or suspect stream:
    the killed ones first."""
    found = []
    for _, index in sorted(tasks.looped):
        if index in left_out:
            continue
        detail = _panel(tasks.panel(index))
        attempt = _loop_attempt(detail)
        loop = mapping(attempt.get("loop"))
        killed = mapping(loop.get("killed"))
        caption = (
            f"killed in round {attempt.get('round')} at "
            f"{any_seconds_text(killed.get('killed_s'))} s "
            f"({killed.get('rule')})"
            if loop.get("killed")
            else f"{loop.get('state')} (peak {loop.get('score')})"
            + (", recovered" if loop.get("recovered") else "")
        )
        svg = html_svg.loop_chart(loop, threshold)
        if svg:
            found.append((index, str(detail.get("key")), caption, svg))
            if len(found) == MAX_LOOP_FIGURES:
                break
    return found


def _pictures(
    summary: Mapping[str, JsonValue], tasks: _Tasks, several_models: bool
) -> list[tuple[str, str]]:
    groups = []
    scores = summary.get("scores") or []
    for entry in scores if isinstance(scores, list) else []:
        if not isinstance(entry, dict):
            continue
        label = str(entry.get("suite"))
        if several_models:
            label += f" · {entry.get('model')}"
        groups.append((label, mapping(entry.get("outcomes"))))
    totals = mapping(summary.get("totals"))
    return [
        (html_svg.outcome_mix(groups), "outcome mix per suite"),
        (html_svg.score_by_round(totals.get("repair_curve")), "score by repair round"),
        (html_svg.histogram(tasks.tokens, "tokens per task", "tokens"), "tokens per task"),
        (html_svg.histogram(tasks.walls, "wall time per task", "seconds"), "wall time per task"),
    ]


def _compared(run_dir: Path) -> list[Record]:
    """The fields of each record that comparisons of models or runs read; controls are
    left out (no model played them, and they are never scored)."""
    records = SummaryStream(run_dir, SUMMARY_LIMIT).records()
    return [
        {key: record.get(key) for key in _COMPARED} for record in records if not is_control(record)
    ]


def _comparisons(
    run_dir: Path, head: Record, models: list[str], baseline: Path | None
) -> _Compared:
    """Per model scores, paired comparisons and the side-by-side tables: nothing to read
    again for a run of one model and no baseline (the page shows none of them)."""
    found: _Compared = {"model_scores": [], "comparisons": [], "sides": []}
    given = head.get("models")
    if isinstance(given, list) and all(isinstance(m, dict) for m in given):
        found["model_scores"] = list(given)
    if len(models) < 2 and baseline is None:
        return found
    records = _compared(run_dir)
    found["model_scores"] = model_scores(head, records)
    if len(models) > 1:
        found["comparisons"] = comparisons(head, records)
    by_model = {m: [r for r in records if str(r.get("model")) == m] for m in models}
    for index, other in enumerate(models[1:4], start=1):
        first, second = by_model[models[0]], by_model[other]
        pairs = side_by_side(first, second)
        panels = _diff_panels(f"d{index}", pairs, (first, run_dir), (second, run_dir))
        found["sides"].append(
            {
                "title": f"{models[0]} → {other}",
                "first": models[0],
                "second": other,
                "pairs": pairs,
                "panels": panels,
            }
        )
    if baseline is not None:
        title = f"baseline {baseline.name} → this run"
        earlier = _compared(baseline)
        pairs = side_by_side(earlier, records)
        panels = _diff_panels("d0", pairs, (earlier, baseline), (records, run_dir))
        found["sides"].insert(
            0,
            {
                "title": title,
                "first": "baseline",
                "second": "this run",
                "pairs": pairs,
                "panels": panels,
            },
        )
    return found


def _diff_panels(
    prefix: str,
    pairs: list[SidePair],
    first: tuple[Sequence[Record], Path],
    second: tuple[Sequence[Record], Path],
) -> list[DiffPanel]:
    """For the first ``DIFF_PANELS`` tasks one side passed and the other did not: both
    sides' outcome, reason line and answers (read from each side's rollout folder); the
    pair gets the panel's id, so the table's row links to it."""
    sides = [({task_key(r): r for r in records}, folder) for records, folder in (first, second)]
    panels: list[DiffPanel] = []
    for pair in pairs:
        if len(panels) >= DIFF_PANELS:
            break
        if (pair["a_outcome"] == "passed") == (pair["b_outcome"] == "passed"):
            continue
        views = [side_view(by_key[pair["task"]], folder) for by_key, folder in sides]
        panel = pair["panel"] = f"{prefix}-{len(panels)}"
        panels.append({"id": panel, "task": pair["task"], "a": views[0], "b": views[1]})
    return panels


def write_html_report(
    run_dir: Path,
    out: Path | None = None,
    *,
    secrets: Iterable[str] = (),
    baseline: Path | None = None,
) -> Path:
    """Write the report of ``run_dir`` to ``out`` (default ``run_dir/report.html``)
    atomically; returns its path. ``baseline`` is another run folder to set side by side
    with this one (its tasks matched by suite and task id). AgentbenchError when run_dir
    (or the baseline) holds no summary."""
    target = out if out is not None else run_dir / DEFAULT_NAME
    secrets = tuple(secrets)
    stream = SummaryStream(run_dir, SUMMARY_LIMIT)
    if baseline is not None:
        SummaryStream(baseline, SUMMARY_LIMIT)  # no such summary: say so before the work
    with tempfile.TemporaryFile() as rows, tempfile.TemporaryFile() as panels:
        tasks = _Tasks(rows, panels)
        for record in stream.records():
            tasks.add(record, run_dir, secrets)
        head = stream.head
        models = list(tasks.models)
        order = tasks.order()
        left_out = _budget(tasks, order)
        settings = head.get("settings")
        kill = settings.get("loop_kill") if isinstance(settings, dict) else None
        threshold = kill / 100 if isinstance(kill, int | float) and kill > 0 else None
        compared = _comparisons(run_dir, head, models, baseline)
        gathered: RunData = {
            "run_dir": str(run_dir),
            "summary": head,
            "models": models,
            "suites": sorted(tasks.suites),
            "model_scores": compared["model_scores"],
            "comparisons": compared["comparisons"],
            "sides": compared["sides"],
        }
        shown = redacted_json(gathered, secrets)[0]
        data: PageData = {
            **shown,
            "pictures": _pictures(shown["summary"], tasks, len(models) > 1),
            "loops": _loop_figures(tasks, left_out, threshold),
            "first_page": tasks.first_page(),
            "tasks": tasks.count,
            "order": order,
        }
        pieces = page_pieces(data, tasks.rows_read(), _panels(tasks, order, left_out))
        write_text_atomic(target, pieces)  # written in ~64 KiB batches
    return target
