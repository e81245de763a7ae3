"""What the HTML report shows, read from a run folder's files only: summary.json for the
run, its scores and the task records, made into task rows, per-model scores, paired
comparisons and side-by-side tables. Each task's panel (prompt, turns, repair rounds,
verdicts, loop trace), read from its rollout folder, is ``html_panel.py``.

Everything here is data (dicts, lists, strings, numbers); ``html_sections`` and
``html_page`` turn it into a page. Text is cut at ``TEXT_LIMIT`` characters.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from typing import Literal, TypedDict

from pytest_agentbench.artifacts.score_stats import score_stats
from pytest_agentbench.artifacts.summary import classify
from pytest_agentbench.core.fastclass import dataclass
from pytest_agentbench.core.jsontypes import JsonObject, JsonValue
from pytest_agentbench.core.paired import compare_paired
from pytest_agentbench.core.task_record import TaskRecord

SUMMARY_LIMIT = 512 * 1024 * 1024
TEXT_LIMIT = 8000
#: Panels past this many characters of JSON in all are left out (failures come first).
DETAIL_BUDGET = 48 * 1024 * 1024
#: Columns of a task row, in the order the page's data holds them.
ROW_COLUMNS = (
    "suite", "task", "model", "outcome", "reward", "first_try", "attempts", "tokens",
    "wall_s", "reason",
)  # fmt: skip
#: The model column of a control's row: controls are played by no model of the run.
NO_MODEL = "—"
_SEVERITY = {"harness_error": 0, "loop_killed": 1, "timeout": 2, "length_exceeded": 3}
#: A task record as summary.json holds it (read, not yet checked).
Record = Mapping[str, JsonValue]


class SidePair(TypedDict):
    """One task both sides of a side-by-side table ran."""

    task: str
    a_outcome: JsonValue
    a_reward: float | None
    b_outcome: JsonValue
    b_reward: float | None
    delta: float
    change: Literal["regression", "improvement", "same"]
    #: the id of the panel showing both sides of a task one passed and the other not
    panel: str | None


class SideView(TypedDict):
    """One side of a disagreement: its outcome, reason line and each attempt's answer."""

    outcome: JsonValue
    reason: str
    answers: list[str]


class DiffPanel(TypedDict):
    """A task the two sides disagree on (one passed, the other not), both sides shown."""

    id: str
    task: str
    a: SideView
    b: SideView


class Side(TypedDict):
    """One side-by-side table: its title, the names of its two sides, the pairs."""

    title: str
    first: str
    second: str
    pairs: list[SidePair]
    panels: list[DiffPanel]


def cut_text(value: object, limit: int = TEXT_LIMIT) -> str:
    """``value`` as text, cut at ``limit`` characters with a note of what was left out."""
    text = value if isinstance(value, str) else "" if value is None else str(value)
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n… ({len(text) - limit} more characters)"


def mapping(value: JsonValue) -> Mapping[str, JsonValue]:
    """``value`` when it is a JSON object, else an empty one."""
    return value if isinstance(value, dict) else {}


def number(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def typed_record(record: Mapping[str, object]) -> TaskRecord | None:
    """A task of summary.json read as the record the reports take; None when it is not
    one (the page still shows what the file holds)."""
    try:
        return TaskRecord.from_json(record)
    except ValueError:
        return None


def task_key(record: Record) -> str:
    return f"{record.get('suite')}::{record.get('task_id')}"


def row(record: Record) -> list[JsonValue]:
    """One task row, in ``ROW_COLUMNS`` order: the one-line reason for any task that did
    not pass."""
    usage = mapping(record.get("usage"))
    reason = ""
    if record.get("outcome") != "passed":
        message = record.get("message")
        typed = typed_record(record)
        if isinstance(message, str) and message:
            reason = message
        elif typed is not None:
            from pytest_agentbench.report.evidence import failure_reason  # failures only

            reason = failure_reason(typed)
        else:
            reason = str(record.get("error") or record.get("outcome"))
    duration = number(record.get("duration_ms"))
    attempts, tokens = record.get("attempts"), usage.get("total")
    task, model = str(record.get("task_id")), str(record.get("model"))
    control = record.get("control")
    if isinstance(control, dict):  # a control is no model's task: named for its control
        kind = "canary" if control.get("canary") else "control"
        task, model = f"{task} [{kind}-{control.get('name')}]", NO_MODEL
    return [
        str(record.get("suite")),
        task,
        model,
        str(record.get("outcome")),
        number(record.get("reward")),
        number(record.get("first_attempt_reward")),
        attempts if isinstance(attempts, int) else None,
        tokens if isinstance(tokens, int) else None,
        None if duration is None else round(duration / 1000, 3),
        reason,
    ]


def severity(record: Record) -> tuple[int, float]:
    """The task's place in the failures-first order, the lowest first: harness errors,
    loops, timeouts, length, the other failures, each by reward, lowest first; passes
    last (all alike, so they keep their order)."""
    outcome = record.get("outcome")
    if outcome == "passed":
        return (9, 0.0)
    reward = number(record.get("reward"))
    return (_SEVERITY.get(str(outcome), 4), 0.0 if reward is None else reward)


# -- models and comparisons -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Scored:
    """The fields of a record a score reads (``score_stats.Scored``): the comparisons
    keep only a few fields of each record, too few to read it back as a whole one."""

    outcome: str
    reward: float | None
    first_attempt_reward: float | None

    @classmethod
    def of(cls, record: Record) -> _Scored:
        return cls(
            str(record.get("outcome")),
            number(record.get("reward")),
            number(record.get("first_attempt_reward")),
        )


def is_control(record: Record) -> bool:
    """A control's (or a canary's) record: never a model's task, never scored."""
    return record.get("control") is not None


def model_scores(summary: Record, records: Sequence[Record]) -> list[JsonValue]:
    """Per model: tasks, outcomes and the score's stats. summary.json's own ``models``
    list is shown as it is when a writer made one (each entry: ``model``, ``tasks``,
    ``outcomes``, ``stats``); else the records (controls left out) are grouped here with
    the same functions summary.json uses."""
    given = summary.get("models")
    if isinstance(given, list) and all(isinstance(m, Mapping) for m in given):
        return list(given)
    errors_as_failures = bool(mapping(summary.get("settings")).get("errors_as_failures"))
    groups: dict[str, list[Record]] = {}
    for record in records:
        if not is_control(record):
            groups.setdefault(str(record.get("model")), []).append(record)
    rows: list[JsonValue] = []
    for model, members in groups.items():
        typed = [_Scored.of(r) for r in members]
        outcomes: JsonObject = dict(classify(typed))
        rows.append(
            {
                "model": model,
                "tasks": len(members),
                "outcomes": outcomes,
                "stats": score_stats(typed, errors_as_failures=errors_as_failures),
            }
        )
    return rows


def _task_rewards(records: Sequence[Record], model: str) -> dict[Hashable, float | bool | None]:
    """Per task of ``model``: its reward (a task with no verdict counts 0), None for a
    harness error (left out of a paired comparison)."""
    rewards: dict[Hashable, float | bool | None] = {}
    for record in records:
        if str(record.get("model")) != model or is_control(record):
            continue
        reward = number(record.get("reward"))
        harness = record.get("outcome") == "harness_error"
        rewards[task_key(record)] = None if harness else (reward or 0.0)
    return rewards


def comparisons(summary: Record, records: Sequence[Record]) -> list[JsonValue]:
    """Paired comparisons of the first model with each other one. summary.json's own
    ``comparisons`` are shown as they are when present (each entry: ``first``,
    ``second``, ``difference`` (an estimate), ``test``, ``p_value``, ``significant``,
    ``excluded``); else they are computed here with ``core.paired.compare_paired``."""
    given = summary.get("comparisons")
    if isinstance(given, list) and all(isinstance(c, Mapping) for c in given):
        return list(given)
    models = list(dict.fromkeys(str(r.get("model")) for r in records if not is_control(r)))
    found: list[JsonValue] = []
    for other in models[1:4]:
        first, second = _task_rewards(records, models[0]), _task_rewards(records, other)
        result = compare_paired(first, second)
        found.append(
            {
                "first": models[0],
                "second": other,
                "difference": result.difference.as_dict(),
                "test": result.test,
                "p_value": result.p_value,
                "significant": result.significant,
                "excluded": result.excluded,
                "words": result.words(models[0], other),
            }
        )
    return found


def side_by_side(reference: Sequence[Record], other: Sequence[Record]) -> list[SidePair]:
    """Tasks both sides ran, matched by suite and task id: each side's outcome and reward
    and the change (other − reference); regressions (the other side lower) first, the
    largest drop first, then improvements, then the unchanged."""
    first = {task_key(r): r for r in reference}
    pairs: list[SidePair] = []
    for record in other:
        key = task_key(record)
        if key not in first:
            continue
        before, after = first[key], record
        a, b = number(before.get("reward")) or 0.0, number(after.get("reward")) or 0.0
        pairs.append(
            {
                "task": key,
                "a_outcome": before.get("outcome"),
                "a_reward": number(before.get("reward")),
                "b_outcome": after.get("outcome"),
                "b_reward": number(after.get("reward")),
                "delta": round(b - a, 6),
                "change": "regression" if b < a else "improvement" if b > a else "same",
                "panel": None,
            }
        )
    rank = {"regression": 0, "improvement": 1, "same": 2}
    return sorted(pairs, key=lambda p: (rank[p["change"]], p["delta"], p["task"]))


# -- cost -------------------------------------------------------------------------------


def model_costs(summary: Record) -> dict[str, JsonObject]:
    """Per model: its cost over its suites (summary.json's ``scores[].cost``, added up):
    ``usd`` (None when no suite's cost is known), ``tasks``, ``unknown`` (tasks with no
    known cost) and ``per_solved_usd``."""
    found: dict[str, tuple[list[float], int, int, int]] = {}
    scores = summary.get("scores")
    for entry in scores if isinstance(scores, list) else []:
        cost = mapping(mapping(entry).get("cost"))
        if not cost:
            continue
        model = str(mapping(entry).get("model"))
        usd, unknown, solved, tasks = found.get(model, ([], 0, 0, 0))
        value = number(cost.get("usd"))
        if value is not None:
            usd.append(value)
        unknown += int(number(cost.get("unknown")) or 0)
        solved += int(number(cost.get("solved")) or 0)
        tasks += int(number(cost.get("tasks")) or 0)
        found[model] = (usd, unknown, solved, tasks)
    costs: dict[str, JsonObject] = {}
    for model, (usd, unknown, solved, tasks) in found.items():
        whole = math.fsum(usd) if usd else None
        per_solved = whole / solved if whole is not None and solved and not unknown else None
        costs[model] = {
            "usd": whole,
            "tasks": tasks,
            "unknown": unknown,
            "per_solved_usd": per_solved,
        }
    return costs


def cheapest_for_score(points: Sequence[tuple[str, float, float]]) -> list[bool]:
    """For each (model, cost, score): whether it is the cheapest for its score, that is
    no other model scores at least as well for less, or better for the same."""
    marks = []
    for name, cost, score in points:
        beaten = any(
            other != name and ((c < cost and s >= score) or (c <= cost and s > score))
            for other, c, s in points
        )
        marks.append(not beaten)
    return marks
