"""One task's panel of the HTML report, read from its rollout folder: result.json for
the attempts (repair rounds) and their verdicts, trajectory.json for the prompt and each
model call's turn (reply, tool calls with their results, usage, a kill), the loop-watch
trace, and the verifier's evidence (reward.json, the tail of test-stdout.txt).

Reads are bounded and never raise: a missing or oversized file leaves the panel with a
note saying so. The task rows and the run's tables are ``html_data.py``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from pytest_agentbench.artifacts.jsonio import dumps
from pytest_agentbench.core.durations import any_seconds_text
from pytest_agentbench.core.jsontypes import JsonObject, JsonScalar, JsonValue
from pytest_agentbench.report.html_data import (
    Record,
    SideView,
    cut_text,
    mapping,
    number,
    row,
    task_key,
)

FILE_LIMIT = 16 * 1024 * 1024
TOOL_OUTPUT_LIMIT = 4000
STDOUT_TAIL = 3000
MAX_TURNS = 60


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
        "turn": entry.get("turn", entry.get("call")),
        "thinking": cut_text(response.get("thinking")),
        "text": cut_text(response.get("text")),
        "tool_calls": _tool_calls(response, entry.get("tool_results")),
        "usage": dict(usage) if usage else ({"native": dict(native)} if native else None),
        "elapsed_s": number(entry.get("elapsed_s")),
    }
    killed = entry.get("killed")
    if isinstance(killed, dict):
        turn["killed"] = cut_text(
            f"killed in the {killed.get('channel')} at "
            f"{any_seconds_text(killed.get('killed_s'))} s after "
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


def _agent_runs(requests: list[JsonValue], attempts: int) -> list[JsonObject | None]:
    """Per attempt, what its agent under test did (the trajectory's ``agent`` entries):
    a one-line summary and its output, for the panel; None without one."""
    found: list[JsonObject | None] = [None] * attempts
    for entry in requests:
        agent = entry.get("agent") if isinstance(entry, dict) else None
        number_ = entry.get("attempt") if isinstance(entry, dict) else None
        if not isinstance(agent, dict) or not isinstance(number_, int):
            continue
        if not 0 < number_ <= attempts:
            continue
        ended = agent.get("stopped") or agent.get("killed_by")
        parts = [
            f"exit {agent.get('exit_code')}" if ended is None else f"ended: {ended}",
            f"{agent.get('model_calls')} model calls",
            f"network {agent.get('network')}",
        ]
        differ = agent.get("usage_disagreement")
        if isinstance(differ, dict) and differ:
            parts.append(f"usage disagrees: {json.dumps(differ)}")
        output = f"$ {' '.join(str(a) for a in mapping_list(agent.get('argv')))}\n"
        output += f"--- stdout ---\n{agent.get('stdout') or ''}\n"
        output += f"--- stderr ---\n{agent.get('stderr') or ''}"
        found[number_ - 1] = {"summary": " · ".join(parts), "output": cut_text(output, 8000)}
    return found


def mapping_list(value: JsonValue) -> list[JsonValue]:
    return value if isinstance(value, list) else []


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
        if best is None or (number(verdict.get("score")) or 0) > (
            number(best[1].get("score")) or 0
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
        "score": number(chosen.get("score")),
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
        "reward": number(verdict.get("reward")),
        "metrics": metrics if isinstance(metrics, dict) else {},
        "details": cut_text(_shown_json(verdict.get("details") or {}), 3000),
        "feedback": cut_text(verdict.get("feedback"), 3000),
        "error": cut_text(verdict.get("error"), 3000),
    }


def side_view(record: Record, run_dir: Path, limit: int = 3000) -> SideView:
    """One side of a disagreement: its outcome, its reason line (from the full record in
    its result.json) and each attempt's answer (the final one last), cut at ``limit``
    characters; a note when the rollout folder is gone."""
    outcome = record.get("outcome")
    view: SideView = {"outcome": outcome, "reason": "passed", "answers": []}
    folder = rollout_folder(record, run_dir)
    result = _read_json(f"{folder}/result.json") if folder is not None else None
    if not isinstance(result, dict):
        view["answers"] = ["(no result.json for this task: not written, or the folder moved)"]
        if outcome != "passed":
            view["reason"] = str(outcome)
        return view
    full = result.get("record")
    if outcome != "passed":
        view["reason"] = str(row(full if isinstance(full, dict) else record)[-1])
    listed = result.get("attempts")
    attempts = [a for a in (listed if isinstance(listed, list) else []) if isinstance(a, dict)]
    for index, attempt in enumerate(attempts):
        text = cut_text(attempt.get("answer") or attempt.get("error") or "", limit)
        view["answers"].append(f"attempt {index + 1}: {text}" if len(attempts) > 1 else text)
    return view


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
    agents = _agent_runs(requests, len(attempts))
    for index, attempt in enumerate(attempts):
        usage = attempt.get("usage")
        shown.append(
            {
                "round": index,
                "answer": cut_text(attempt.get("answer")),
                "thinking": cut_text(attempt.get("thinking")),
                "error": cut_text(attempt.get("error"), 2000),
                "finish_reason": attempt.get("finish_reason"),
                "elapsed_s": number(attempt.get("elapsed_s")),
                "usage": usage if isinstance(usage, dict) else {},
                "verdict": _verdict(attempt.get("verdict")),
                "feedback_sent": cut_text(attempt.get("feedback_sent"), 3000),
                "turns": turns[index],
                "agent": agents[index],
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
