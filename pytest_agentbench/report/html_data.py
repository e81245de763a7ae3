"""What the HTML report shows, read from a run folder's files only: summary.json for the
run, its scores and the task records; each task's result.json and trajectory.json for its
panel (prompt, turns, repair rounds, verdicts, loop trace).

Everything here is data (dicts, lists, strings, numbers); ``html_page`` turns it into a
page. Reads are bounded and never raise for a task: a missing or oversized file leaves
that task's panel with a note saying so. Text is cut at ``TEXT_LIMIT`` characters.
"""

from __future__ import annotations

import json
import os
from collections.abc import Hashable, Mapping, Sequence
from pathlib import Path
from typing import Literal, TypedDict

from pytest_agentbench.artifacts.jsonio import dumps
from pytest_agentbench.artifacts.score_stats import score_stats
from pytest_agentbench.artifacts.summary import classify
from pytest_agentbench.core.jsontypes import JsonObject, JsonScalar, JsonValue
from pytest_agentbench.core.stats import compare_paired
from pytest_agentbench.core.task_record import TaskRecord
from pytest_agentbench.report.evidence import failure_reason

SUMMARY_LIMIT = 512 * 1024 * 1024
FILE_LIMIT = 16 * 1024 * 1024
TEXT_LIMIT = 8000
TOOL_OUTPUT_LIMIT = 4000
STDOUT_TAIL = 3000
MAX_TURNS = 60
#: Panels past this many characters of JSON in all are left out (failures come first).
DETAIL_BUDGET = 48 * 1024 * 1024
#: Columns of a task row, in the order the page's data holds them.
ROW_COLUMNS = (
    "suite", "task", "model", "outcome", "reward", "first_try", "attempts", "tokens",
    "wall_s", "reason",
)  # fmt: skip
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


class Side(TypedDict):
    """One side-by-side table: its title, the names of its two sides, the pairs."""

    title: str
    first: str
    second: str
    pairs: list[SidePair]


def cut_text(value: object, limit: int = TEXT_LIMIT) -> str:
    """``value`` as text, cut at ``limit`` characters with a note of what was left out."""
    text = value if isinstance(value, str) else "" if value is None else str(value)
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n… ({len(text) - limit} more characters)"


def mapping(value: JsonValue) -> Mapping[str, JsonValue]:
    """``value`` when it is a JSON object, else an empty one."""
    return value if isinstance(value, dict) else {}


def _number(value: object) -> float | None:
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
        reason = (
            message
            if isinstance(message, str) and message
            else failure_reason(typed)
            if typed is not None
            else str(record.get("error") or record.get("outcome"))
        )
    duration = _number(record.get("duration_ms"))
    attempts, tokens = record.get("attempts"), usage.get("total")
    return [
        str(record.get("suite")),
        str(record.get("task_id")),
        str(record.get("model")),
        str(record.get("outcome")),
        _number(record.get("reward")),
        _number(record.get("first_attempt_reward")),
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
    reward = _number(record.get("reward"))
    return (_SEVERITY.get(str(outcome), 4), 0.0 if reward is None else reward)


# -- models and comparisons -------------------------------------------------------------


def model_scores(summary: Record, records: Sequence[Record]) -> list[JsonValue]:
    """Per model: tasks, outcomes and the score's stats. summary.json's own ``models``
    list is shown as it is when a writer made one (each entry: ``model``, ``tasks``,
    ``outcomes``, ``stats``); else the records are grouped here with the same functions
    summary.json uses."""
    given = summary.get("models")
    if isinstance(given, list) and all(isinstance(m, Mapping) for m in given):
        return list(given)
    errors_as_failures = bool(mapping(summary.get("settings")).get("errors_as_failures"))
    groups: dict[str, list[Record]] = {}
    for record in records:
        groups.setdefault(str(record.get("model")), []).append(record)
    rows: list[JsonValue] = []
    for model, members in groups.items():
        typed = [t for r in members if (t := typed_record(r)) is not None]
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
        if str(record.get("model")) != model:
            continue
        reward = _number(record.get("reward"))
        harness = record.get("outcome") == "harness_error"
        rewards[task_key(record)] = None if harness else (reward or 0.0)
    return rewards


def comparisons(summary: Record, records: Sequence[Record]) -> list[JsonValue]:
    """Paired comparisons of the first model with each other one. summary.json's own
    ``comparisons`` are shown as they are when present (each entry: ``first``,
    ``second``, ``difference`` (an estimate), ``test``, ``p_value``, ``significant``,
    ``excluded``); else they are computed here with ``core.stats.compare_paired``."""
    given = summary.get("comparisons")
    if isinstance(given, list) and all(isinstance(c, Mapping) for c in given):
        return list(given)
    models = list(dict.fromkeys(str(r.get("model")) for r in records))
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
        a, b = _number(before.get("reward")) or 0.0, _number(after.get("reward")) or 0.0
        pairs.append(
            {
                "task": key,
                "a_outcome": before.get("outcome"),
                "a_reward": _number(before.get("reward")),
                "b_outcome": after.get("outcome"),
                "b_reward": _number(after.get("reward")),
                "delta": round(b - a, 6),
                "change": "regression" if b < a else "improvement" if b > a else "same",
            }
        )
    rank = {"regression": 0, "improvement": 1, "same": 2}
    return sorted(pairs, key=lambda p: (rank[p["change"]], p["delta"], p["task"]))


# -- one task's panel ---------------------------------------------------------------------


def _read_json(path: str) -> JsonValue:
    """The file's JSON; None when it is missing, unreadable or above ``FILE_LIMIT``.
    (Paths here are strings: one open and one fstat per file, no ``Path`` objects —
    this runs for every task of the run.)"""
    try:
        with open(path, "rb") as handle:
            if os.fstat(handle.fileno()).st_size > FILE_LIMIT:
                return None
            value: JsonValue = json.loads(handle.read().decode("utf-8"))
            return value
    except (OSError, ValueError):
        return None


def _read_tail(path: str, limit: int) -> str | None:
    try:
        with open(path, "rb") as handle:
            size = handle.seek(0, 2)
            handle.seek(max(0, size - limit))
            data = handle.read(limit)
    except OSError:
        return None
    text = data.decode("utf-8", errors="replace")
    return text if size <= limit else "…" + text


def rollout_folder(record: Record, run_dir: Path) -> Path | None:
    """The task's rollout folder: the one its record names, else the same ``tasks/…``
    path under ``run_dir`` (a run folder that was moved); None when neither exists."""
    named = record.get("rollout_dir")
    if not isinstance(named, str) or not named:
        return None
    if os.path.isfile(f"{named}/result.json"):
        return Path(named)
    parts = Path(named).parts
    if "tasks" in parts:
        moved = run_dir.joinpath(*parts[len(parts) - parts[::-1].index("tasks") - 1 :])
        if (moved / "result.json").is_file():
            return moved
    return None


def _content_text(content: JsonValue) -> str:
    """The text of a message's content in any of the three wire shapes."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(t for t in (_content_text(part) for part in content) if t)
    if isinstance(content, dict):
        for key in ("text", "content", "input_text"):
            if key in content:
                return _content_text(content[key])
    return ""


def prompt_messages(body: JsonValue) -> list[JsonValue]:
    """The prompt of a first request (system, then the messages before the first
    model reply) as ``role``/``text`` pairs, whatever the wire protocol."""
    if not isinstance(body, dict):
        return []
    found: list[JsonValue] = []
    for key in ("system", "instructions"):
        text = _content_text(body.get(key))
        if text:
            found.append({"role": "system", "text": cut_text(text)})
    messages = body.get("messages", body.get("input"))
    if isinstance(messages, str):
        messages = [{"role": "user", "content": messages}]
    for message in messages if isinstance(messages, list) else []:
        if not isinstance(message, dict):
            continue
        role = str(message.get("role") or message.get("type") or "")
        if role == "assistant":
            break
        found.append({"role": role, "text": cut_text(_content_text(message.get("content")))})
    return found


def arguments_text(arguments: JsonValue) -> str:
    """A tool call's arguments for people: a JSON object as ``name: value`` lines, each
    text value as it is (a file's content with its own lines); anything else unchanged."""
    try:
        parsed: JsonValue = json.loads(arguments) if isinstance(arguments, str) else arguments
    except ValueError:
        return cut_text(arguments, TOOL_OUTPUT_LIMIT)
    if not isinstance(parsed, dict):
        return cut_text(arguments, TOOL_OUTPUT_LIMIT)
    lines = []
    for name, value in parsed.items():
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        lines.append(f"{name}:\n{text}" if "\n" in text else f"{name}: {text}")
    return cut_text("\n".join(lines), TOOL_OUTPUT_LIMIT)


def _tool_calls(response: Record, results: JsonValue) -> list[JsonValue]:
    outputs: dict[JsonScalar, Record] = {}
    for result in results if isinstance(results, list) else []:
        if isinstance(result, dict):
            key = result.get("id")
            if not isinstance(key, list | dict):
                outputs[key] = result
    calls: list[JsonValue] = []
    given = response.get("tool_calls") or []
    for call in given if isinstance(given, list | dict) else []:
        if not isinstance(call, dict):
            continue
        key = call.get("id")
        output = outputs.get(key, {}) if not isinstance(key, list | dict) else {}
        calls.append(
            {
                "name": str(call.get("name")),
                "arguments": arguments_text(call.get("arguments")),
                "output": cut_text(output.get("output"), TOOL_OUTPUT_LIMIT),
                "is_error": bool(output.get("is_error")),
            }
        )
    return calls


def _turn(entry: Record) -> JsonObject:
    """One model call of the trajectory: its reply (thinking apart), tool calls with
    their results, usage, or why it ended (killed, an error)."""
    response = mapping(entry.get("response"))
    usage = mapping(entry.get("usage"))
    native = mapping(response.get("usage"))
    turn: JsonObject = {
        "turn": entry.get("turn"),
        "thinking": cut_text(response.get("thinking")),
        "text": cut_text(response.get("text")),
        "tool_calls": _tool_calls(response, entry.get("tool_results")),
        "usage": dict(usage) if usage else ({"native": dict(native)} if native else None),
        "elapsed_s": _number(entry.get("elapsed_s")),
    }
    killed = entry.get("killed")
    if isinstance(killed, dict):
        turn["killed"] = cut_text(
            f"killed in the {killed.get('channel')} at {killed.get('killed_s')} s after "
            f"{killed.get('chars')} characters: period {killed.get('period')} "
            f"×{killed.get('repetitions')}, score {killed.get('score')} "
            f"({killed.get('rule')}); the repeated part: {killed.get('excerpt')!r}",
            600,
        )
    if entry.get("error"):
        turn["error"] = cut_text(entry.get("error"), 2000)
    return turn


def _attempt_turns(requests: list[JsonValue], attempts: int) -> list[list[JsonValue]]:
    """The trajectory's model calls grouped by attempt: by their ``attempt`` number
    (agent mode), else one call per attempt in order (a plain answer)."""
    grouped: list[list[JsonValue]] = [[] for _ in range(attempts)]
    calls = [
        e
        for e in requests
        if isinstance(e, dict) and ("response" in e or "killed" in e or "error" in e)
    ]
    for position, entry in enumerate(calls):
        number = entry.get("attempt")
        index = number - 1 if isinstance(number, int) else position
        if 0 <= index < attempts and len(grouped[index]) < MAX_TURNS:
            grouped[index].append(_turn(entry))
    return grouped


def _loop_trace(loop: JsonValue) -> JsonObject | None:
    """The attempt's loop-watch picture: the channel that scored highest, its score trace
    and, when it was killed, where."""
    if not isinstance(loop, dict):
        return None
    channels = mapping(loop.get("channels"))
    killed = loop.get("killed")
    killed = killed if isinstance(killed, dict) else None
    best: tuple[str, Record] | None = None
    for name, verdict in channels.items():
        if not isinstance(verdict, dict) or not verdict.get("trace"):
            continue
        if killed is not None and killed.get("channel") == name:
            best = (name, verdict)
            break
        if best is None or (_number(verdict.get("score")) or 0) > (
            _number(best[1].get("score")) or 0
        ):
            best = (name, verdict)
    if best is None or (killed is None and best[1].get("state") == "none"):
        return None
    name, chosen = best
    trace = chosen.get("trace")
    points: list[JsonValue] = [
        list(p)
        for p in (trace if isinstance(trace, list) else [])
        if isinstance(p, list) and len(p) == 3
    ]
    return {
        "channel": name,
        "state": chosen.get("state"),
        "score": _number(chosen.get("score")),
        "trace": points,
        "killed": dict(killed) if killed is not None and killed.get("channel") == name else None,
        "recovered": bool(loop.get("recovered")),
    }


def _shown_json(value: object) -> str:
    """``value`` as JSON to read: one member per line, as the rollout's files are written
    (the C encoder's work; a full indent went through the pure-Python encoder, a tenth
    of the report's time); NaN and Infinity, which that refuses, as ``json.dumps`` has
    them."""
    try:
        return dumps(value, indent=1)
    except ValueError:
        return json.dumps(value, indent=1, default=str)


def _verdict(verdict: JsonValue) -> JsonObject | None:
    if not isinstance(verdict, dict):
        return None
    metrics = verdict.get("metrics")
    return {
        "reward": _number(verdict.get("reward")),
        "metrics": metrics if isinstance(metrics, dict) else {},
        "details": cut_text(_shown_json(verdict.get("details") or {}), 3000),
        "feedback": cut_text(verdict.get("feedback"), 3000),
        "error": cut_text(verdict.get("error"), 3000),
    }


def task_detail(record: Record, run_dir: Path) -> JsonObject:
    """One task's panel: the prompt, each attempt (repair round) with its turns, verdict
    and the feedback sent after it, the loop picture, the verifier's evidence."""
    shown: list[JsonValue] = []
    evidence: JsonObject = {}
    detail: JsonObject = {
        "key": task_key(record),
        "nodeid": record.get("nodeid"),
        "reason": row(record)[-1],
        "failure": record.get("failure"),
        "rollout_dir": record.get("rollout_dir"),
        "prompt": [],
        "attempts": shown,
        "evidence": evidence,
    }
    folder = rollout_folder(record, run_dir)
    if folder is None:
        detail["note"] = "no result.json for this task (not written, or the folder moved)"
        return detail
    base = str(folder)
    result = _read_json(f"{base}/result.json")
    trajectory = _read_json(f"{base}/trajectory.json")
    if not isinstance(result, dict):
        detail["note"] = f"{folder / 'result.json'}: unreadable or larger than {FILE_LIMIT} bytes"
        return detail
    given = trajectory.get("requests") if isinstance(trajectory, dict) else None
    requests = given if isinstance(given, list) else []
    first = next((e for e in requests if isinstance(e, dict) and "request" in e), None)
    request = first["request"] if first is not None else None
    if isinstance(request, dict):
        detail["prompt"] = prompt_messages(request.get("body"))
    listed = result.get("attempts") or []
    attempts = [a for a in (listed if isinstance(listed, list) else []) if isinstance(a, dict)]
    turns = _attempt_turns(requests, len(attempts))
    for index, attempt in enumerate(attempts):
        usage = attempt.get("usage")
        shown.append(
            {
                "round": index,
                "answer": cut_text(attempt.get("answer")),
                "thinking": cut_text(attempt.get("thinking")),
                "error": cut_text(attempt.get("error"), 2000),
                "finish_reason": attempt.get("finish_reason"),
                "elapsed_s": _number(attempt.get("elapsed_s")),
                "usage": usage if isinstance(usage, dict) else {},
                "verdict": _verdict(attempt.get("verdict")),
                "feedback_sent": cut_text(attempt.get("feedback_sent"), 3000),
                "turns": turns[index],
                "loop": _loop_trace(attempt.get("loop")),
            }
        )
    verifier = f"{base}/verifier"
    reward = _read_json(f"{verifier}/reward.json")
    if reward is not None:
        evidence["reward.json"] = cut_text(_shown_json(reward), 3000)
    stdout = _read_tail(f"{verifier}/test-stdout.txt", STDOUT_TAIL)
    if stdout:
        evidence["test-stdout.txt (tail)"] = stdout
    return detail
