"""``python -m pytest_agentbench import atif FILES... --out RUN_DIR``: ATIF trajectories
read back into a run folder, so ``rescore`` and the HTML report work on them.

A file ``export atif`` wrote comes back as it was: its ``extra.agentbench`` holds the
task record, the outcome, the verdicts and each attempt's facts, the steps give the
trajectory back (one model call per agent step, a repair round per user step after the
first answer, an agent process per system step after one). A file another harness
wrote has no verdict: it becomes a task of suite ``atif`` whose answer is its last agent
message, outcome ``failed`` with reward null and a message saying so, its usage from its
metrics (a count the file does not give stays unknown). docs/interchange.md lists what
each direction keeps and loses.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path

from pytest_agentbench.artifacts.atif_export import ATIF_VERSION
from pytest_agentbench.artifacts.jsonio import write_json_atomic
from pytest_agentbench.artifacts.paths import mark_run_folder, new_run_id, safe_name, task_dir
from pytest_agentbench.artifacts.reports import write_run_reports
from pytest_agentbench.artifacts.summary import RunFacts
from pytest_agentbench.core.jsontypes import JsonObject, JsonValue, as_int, as_list, as_object
from pytest_agentbench.core.records import SCHEMA_VERSION
from pytest_agentbench.core.task_record import RunSummary, TaskRecord
from pytest_agentbench.errors import AgentbenchError

_SOURCES = ("system", "user", "agent")
#: result.json's fields for a trajectory another harness wrote (no verdict, no repair)
_FOREIGN_ROLLOUT: JsonObject = {
    "schema_version": SCHEMA_VERSION,
    "repair": {},
    "failure_kind": None,
    "failure": None,
    "final_reward": None,
    "repaired": False,
    "incomplete": False,
    "loop": None,
    "fingerprint": "",
}
#: a call's own facts export atif keeps beside the response (the rest go back into it)
_RESPONSE_KEYS = ("finish_reason", "cached", "batch", "batch_live", "status")


def read_atif(path: Path) -> JsonObject:
    """An ATIF file's trajectory, its shape checked as far as import needs it;
    AgentbenchError naming the file and the place otherwise."""
    try:
        data: JsonValue = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise AgentbenchError(f"{path}: cannot read it as JSON: {exc}") from None
    if not isinstance(data, dict):
        raise AgentbenchError(f"{path}: expected an ATIF trajectory (a JSON object)")
    version = data.get("schema_version")
    if not isinstance(version, str) or not version.startswith("ATIF-v1."):
        raise AgentbenchError(
            f"{path}: schema_version: expected ATIF-v1.x (this reads up to {ATIF_VERSION}), "
            f"got {version!r}"
        )
    if not isinstance(data.get("agent"), dict):
        raise AgentbenchError(f"{path}: agent: expected an object")
    steps = data.get("steps")
    if not isinstance(steps, list) or not steps:
        raise AgentbenchError(f"{path}: steps: expected a non-empty list")
    for n, step in enumerate(steps):
        where = f"{path}: steps[{n}]"
        if not isinstance(step, dict):
            raise AgentbenchError(f"{where}: expected an object")
        if step.get("step_id") != n + 1:
            raise AgentbenchError(f"{where}.step_id: expected {n + 1}, got {step.get('step_id')!r}")
        if step.get("source") not in _SOURCES:
            raise AgentbenchError(
                f"{where}.source: expected one of {', '.join(_SOURCES)}, got {step.get('source')!r}"
            )
    return data


def _text(message: JsonValue | None) -> str:
    if isinstance(message, str):
        return message
    parts = [as_object(p).get("text") for p in as_list(message)]
    return "".join(p for p in parts if isinstance(p, str))


def _usage_of(metrics: JsonObject) -> JsonObject:
    """Our normalised usage from ATIF metrics: uncached input is the prompt less its
    cached part; a count the metrics lack stays unknown (null)."""
    prompt, cached = as_int(metrics.get("prompt_tokens")), as_int(metrics.get("cached_tokens"))
    output = as_int(metrics.get("completion_tokens"))
    given = None if prompt is None else prompt - (cached or 0)
    total = prompt + output if prompt is not None and output is not None else None
    return {
        "input": given,
        "output": output,
        "cache_read": cached,
        "cache_write": None,
        "reasoning": None,
        "total": total,
        "recovered": False,
    }


def _entries(steps: list[JsonObject]) -> tuple[list[JsonValue], dict[int, str], list[JsonObject]]:
    """The trajectory entries of ``steps``, each attempt's repair feedback (by attempt)
    and each attempt's last agent step."""
    entries: list[JsonValue] = []
    feedback: dict[int, str] = {}
    last: dict[int, JsonObject] = {}
    attempt, answered, calls = 1, False, 0
    prompt: list[JsonValue] = []
    for step in steps:
        own = as_object(as_object(step.get("extra")).get("agentbench"))
        source = step["source"]
        if source in ("system", "user") and not answered and "agent" not in own:
            prompt.append({"role": source, "content": _text(step.get("message"))})
        elif source == "user":  # after an answer: a repair round
            attempt = as_int(own.get("repair")) or attempt
            feedback[attempt] = _text(step.get("message"))
            attempt += 1
        elif source == "system" and "agent" in own:
            entries.append(
                {"attempt": as_int(own.get("attempt")) or attempt, "agent": own["agent"]}
            )
        elif source == "agent":
            answered, calls = True, calls + 1
            attempt = as_int(own.get("attempt")) or attempt
            entry = _call_entry(step, own, attempt, calls)
            if calls == 1:
                entry = {"request": {"body": {"messages": prompt}}, **entry}
            entries.append(entry)
            last[attempt] = step
    return entries, feedback, [last[k] for k in sorted(last)]


def _call_entry(step: JsonObject, own: JsonObject, attempt: int, calls: int) -> JsonObject:
    response: JsonObject = {"text": _text(step.get("message"))}
    if isinstance(step.get("reasoning_content"), str):
        response["thinking"] = step["reasoning_content"]
    response["tool_calls"] = [
        {
            "id": call.get("tool_call_id"),
            "name": call.get("function_name"),
            "arguments": as_object(call.get("extra")).get("raw_arguments")
            if "raw_arguments" in as_object(call.get("extra"))
            else json.dumps(call.get("arguments")),
        }
        for call in map(as_object, as_list(step.get("tool_calls")))
    ]
    for key in _RESPONSE_KEYS:
        if f"response_{key}" in own:
            response[key] = own[f"response_{key}"]
    if "usage_native" in own:
        response["usage"] = own["usage_native"]
    entry: JsonObject = {"attempt": attempt}
    if not own:
        entry.update({"turn": calls, "call": calls})
    skip = {"attempt", "usage", "usage_native"} | {f"response_{k}" for k in _RESPONSE_KEYS}
    entry.update({k: v for k, v in own.items() if k not in skip})
    if "killed" not in own or response["text"] or response["tool_calls"]:
        entry["response"] = response
    if "usage" in own or not own:  # our export says when a call's usage was its own
        entry["usage"] = own.get("usage") or _usage_of(as_object(step.get("metrics")))
    results = as_list(as_object(step.get("observation")).get("results"))
    if results:
        entry["tool_results"] = [
            {
                "id": r.get("source_call_id"),
                "output": _text(r.get("content")),
                **as_object(r.get("extra")),
            }
            for r in map(as_object, results)
        ]
    return entry


def import_files(files: Sequence[Path], out: Path, version: str) -> RunSummary:
    """Write the run folder ``out`` from ATIF ``files``: a rollout folder each
    (result.json, trajectory.json, verifier/reward.json when a verdict is known), then
    summary.json and ctrf.json. AgentbenchError naming the file when one cannot be read."""
    started = time.time()
    trajectories = [(path, read_atif(path)) for path in files]  # all checked before writing
    out = out.resolve()  # records name their folders wherever rescore is run from
    out.mkdir(parents=True, exist_ok=True)
    mark_run_folder(out)
    records: list[TaskRecord] = []
    for path, data in trajectories:
        records.append(_write_rollout(path, data, out))
    now = int(time.time() * 1000)
    facts = RunFacts(
        run_id=new_run_id(),
        settings={"imported": [str(p) for p in files]},
        tool_version=version,
        start_ms=min((r.start_ms for r in records), default=int(started * 1000)),
        stop_ms=now,
        partial=False,
        exit_status=None,
        sections={"imported": {"format": "atif", "files": len(files)}},
    )
    return write_run_reports(out, records, facts)


def _write_rollout(path: Path, data: JsonObject, out: Path) -> TaskRecord:
    ours = as_object(as_object(data.get("extra")).get("agentbench"))
    steps = [as_object(s) for s in as_list(data.get("steps"))]
    entries, feedback, lasts = _entries(steps)
    entries.extend(as_list(ours.get("workspace")))
    agent = as_object(data.get("agent"))
    record_json = as_object(ours.get("record"))
    if record_json:
        suite, task_id = str(record_json.get("suite")), str(record_json.get("task_id"))
        model = str(record_json.get("model"))
    else:
        suite, task_id = "atif", str(data.get("session_id") or path.name.split(".")[0])
        model = str(agent.get("model_name") or agent.get("name"))
    folder = task_dir(out, suite, task_id, model)
    saved = [as_object(a) for a in as_list(ours.get("attempts"))] or [{} for _ in lasts] or [{}]
    attempts: list[JsonValue] = []
    for n, facts in enumerate(saved):
        step = lasts[n] if n < len(lasts) else {}
        attempt: JsonObject = {"index": n, **facts}
        attempt.setdefault("answer", _text(step.get("message")))
        attempt.setdefault("thinking", str(step.get("reasoning_content") or ""))
        attempt.setdefault("feedback_sent", feedback.get(n + 1))
        attempt.setdefault("usage", _usage_of(as_object(step.get("metrics"))))
        attempts.append(attempt)
    final = as_object(data.get("final_metrics"))
    usage = as_object(as_object(as_object(final.get("extra")).get("agentbench")).get("usage"))
    if not usage:
        usage = _usage_of({k.removeprefix("total_"): v for k, v in final.items()})
    if record_json:
        record_json = {**record_json, "rollout_dir": str(folder)}
        if record_json.get("verifier_dir") is not None:
            record_json["verifier_dir"] = str(folder / "verifier")
    else:
        record_json = _foreign_record(path, suite, task_id, model, usage, len(attempts), folder)
    try:
        record = TaskRecord.from_json(record_json)
    except ValueError as exc:
        raise AgentbenchError(f"{path}: extra.agentbench.record: {exc}") from None
    result: JsonObject = {
        **_FOREIGN_ROLLOUT,
        "attempts_used": len(attempts),
        **as_object(ours.get("rollout")),
        "task_key": ours.get("task_key") or f"{path}::{task_id}[{model}]",
        "suite": suite,
        "task_id": task_id,
        "model": model,
        "outcome": record.outcome,
        "reward": record.reward,
        "first_attempt_reward": record.first_attempt_reward,
        "pass_threshold": record.pass_threshold,
        "attempts": attempts,
        "usage": usage,
        "started_at": ours.get("started_at") or record.start_ms / 1000,
        "elapsed_s": ours.get("elapsed_s") or record.duration_ms / 1000,
        "error": record.error,
        "rollout_dir": str(folder),
        "imported_from": str(path),
        "record": record.to_json(),
    }
    write_json_atomic(
        folder / "trajectory.json",
        {"task": result["task_key"], "model": model, "requests": entries},
    )
    verdict = as_object(as_object(attempts[-1]).get("verdict")) if attempts else {}
    if verdict:
        reward = {k: verdict.get(k) for k in ("reward", "metrics", "details")}
        write_json_atomic(folder / "verifier" / "reward.json", reward)
    write_json_atomic(folder / "result.json", result)
    return record


def _foreign_record(
    path: Path,
    suite: str,
    task_id: str,
    model: str,
    usage: JsonObject,
    attempts: int,
    folder: Path,
) -> JsonObject:
    """The task record of a trajectory another harness wrote: no verdict is known."""
    return {
        "nodeid": f"{path.name}::{task_id}[{model}]",
        "file": "",
        "suite": suite,
        "task_id": task_id,
        "model": model,
        "outcome": "failed",
        "reward": None,
        "first_attempt_reward": None,
        "pass_threshold": None,
        "attempts": max(attempts, 1),
        "repaired": False,
        "incomplete": False,
        "failure_kind": None,
        "repair": {"repairs": 0, "mode": "conversation", "feedback": "names"},
        "loop": None,
        "last_feedback": None,
        "usage": usage,
        "error": None,
        "verdict": None,
        "max_tokens": None,
        "min_score": None,
        "start_ms": int(path.stat().st_mtime * 1000),
        "duration_ms": 0,
        "rollout_dir": str(folder),
        "verifier_dir": None,
        "message": f"imported from ATIF ({safe_name(path.name)}): no verdict; rescore it",
    }
