"""``python -m pytest_agentbench export atif RUN_DIR``: each rollout of a finished run as
one ATIF trajectory (Harbor's Agent Trajectory Interchange Format, docs/interchange.md).

Read from the run's files only (result.json, trajectory.json), after the run: a run pays
nothing for it. A rollout becomes: a system step (the first request's system prompt), a
user step (its prompt), then one agent step per model call, the built-in loop's tool
results as that step's observation; a repair round is a user step carrying the feedback
sent; an external agent's process (its exit, whether the gateway stopped it) is a system
step after its attempt; a killed loop is the agent step that was cut, its evidence in the
step's ``extra``. Usage maps to ATIF's metrics (prompt tokens include cached ones) only
where known: an unknown count is left out, never written as 0; our own normalised usage
rides along in ``extra.agentbench.usage``. Judges' calls are not the agent's: they stay
in the root ``extra`` apart from the steps. Everything ATIF has no field for (outcome,
reward, verdicts, the task record) is kept in ``extra.agentbench`` so ``import atif``
can read the run back.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

from pytest_agentbench.artifacts.jsonio import write_json_atomic
from pytest_agentbench.artifacts.paths import safe_name
from pytest_agentbench.core.jsontypes import JsonObject, JsonValue, as_int, as_list, as_object
from pytest_agentbench.errors import AgentbenchError

ATIF_VERSION = "ATIF-v1.7"
AGENT_NAME = "pytest-agentbench"
#: the result.json attempt fields carried in extra.agentbench.attempts (the answer too:
#: an agent's answer need not be its last model message)
_ATTEMPT_FIELDS = (
    "index",
    "answer",
    "thinking",
    "tool_calls",
    "finish_reason",
    "verdict",
    "feedback_sent",
    "usage",
    "usage_native",
    "elapsed_s",
    "waited_s",
    "length_limit",
    "error",
    "loop",
    "turns",
    "cached",
    "batch",
    "batch_live",
    "judge",
)


#: result.json's fields not carried in extra.agentbench.rollout: the attempts and the
#: record are carried apart, and the folder is the importer's to name
_NOT_CARRIED = ("attempts", "record", "rollout_dir")


def rollout_folders(run_dir: Path) -> Iterator[Path]:
    """Each finished rollout's folder under ``run_dir`` (one holding result.json), sorted."""
    tasks = run_dir / "tasks"
    if not tasks.is_dir():
        raise AgentbenchError(f"{run_dir}: no tasks folder (is this an agentbench run folder?)")
    yield from sorted(p.parent for p in tasks.glob("*/*/result.json"))


def _read(path: Path) -> JsonObject:
    try:
        data: JsonValue = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise AgentbenchError(f"{path}: cannot read it: {exc}") from None
    if not isinstance(data, dict):
        raise AgentbenchError(f"{path}: expected a JSON object")
    return data


def atif_metrics(usage: JsonObject) -> JsonObject:
    """ATIF's token counts of our normalised ``usage``: ``prompt_tokens`` is the whole
    prompt side (uncached input plus cache reads and writes, as ATIF counts it), unknown
    when the uncached input is; ``cached_tokens`` the cache reads; a count not known is
    left out."""
    metrics: JsonObject = {}
    given, read, written = as_int(usage.get("input")), as_int(usage.get("cache_read")), None
    written = as_int(usage.get("cache_write"))
    if given is not None:
        metrics["prompt_tokens"] = given + (read or 0) + (written or 0)
    if (output := as_int(usage.get("output"))) is not None:
        metrics["completion_tokens"] = output
    if read is not None:
        metrics["cached_tokens"] = read
    return metrics


def _prompt(request: JsonObject) -> tuple[str | None, str | None]:
    """The system prompt and the first user message of a request body, in any of the
    three protocols (chat ``messages``, Anthropic ``system``, Responses ``instructions``
    and ``input``); None where there is none."""
    body = as_object(request.get("body"))
    system = body.get("system") or body.get("instructions")
    messages = as_list(body.get("messages")) or as_list(body.get("input"))
    if isinstance(body.get("input"), str):
        messages = [{"role": "user", "content": body["input"]}]
    user: str | None = None
    for message in map(as_object, messages):
        role, text = message.get("role"), _text(message.get("content"))
        if role in ("system", "developer") and system is None:
            system = text
        elif role == "user" and user is None:
            user = text
    return _text(system) if system is not None else None, user


def _text(content: JsonValue | None) -> str:
    """A message's text: a string as it is, content parts' texts joined."""
    if isinstance(content, str):
        return content
    parts = [as_object(p).get("text") for p in as_list(content)]
    return "".join(p for p in parts if isinstance(p, str))


def _tool_calls(response: JsonObject) -> list[JsonValue]:
    calls: list[JsonValue] = []
    for n, call in enumerate(map(as_object, as_list(response.get("tool_calls")))):
        raw = call.get("arguments")
        try:
            arguments: JsonValue = json.loads(raw) if isinstance(raw, str) else raw
        except ValueError:
            arguments = None
        out: JsonObject = {
            "tool_call_id": str(call.get("id") or f"call_{n}"),
            "function_name": str(call.get("name") or ""),
            "arguments": arguments if isinstance(arguments, dict) else {},
        }
        if not isinstance(arguments, dict):  # ATIF wants an object: the text as sent
            out["extra"] = {"raw_arguments": raw}
        calls.append(out)
    return calls


def _observation(results: list[JsonValue]) -> JsonObject | None:
    if not results:
        return None
    shown: list[JsonValue] = []
    for result in map(as_object, results):
        extra = {k: v for k, v in result.items() if k not in ("id", "output")}
        shown.append(
            {
                "source_call_id": result.get("id"),
                "content": _text(result.get("output")),
                "extra": extra,
            }
        )
    return {"results": shown}


class _Steps:
    """The steps of one trajectory, numbered as they are added."""

    def __init__(self) -> None:
        self.steps: list[JsonValue] = []

    def add(self, source: str, message: str, **fields: JsonValue) -> JsonObject:
        step: JsonObject = {"step_id": len(self.steps) + 1, "source": source, "message": message}
        step.update({k: v for k, v in fields.items() if v is not None})
        self.steps.append(step)
        return step


def rollout_trajectory(folder: Path, run_id: str, version: str) -> JsonObject:
    """One rollout folder's ATIF trajectory (a dict, valid against atif.schema.json)."""
    result = _read(folder / "result.json")
    trajectory = _read(folder / "trajectory.json")
    requests = [as_object(e) for e in as_list(trajectory.get("requests"))]
    attempts = [as_object(a) for a in as_list(result.get("attempts"))]
    model = str(result.get("model") or trajectory.get("model") or "")
    steps = _Steps()
    calls = [e for e in requests if _is_call(e)]
    first = as_object(calls[0].get("request")) if calls else {}
    system, user = _prompt(first)
    if system:
        steps.add("system", system)
    steps.add("user", user or "")
    plain = bool(calls) and "attempt" not in calls[0]
    agent_name: str = AGENT_NAME
    # the task's agent kind (a python agent runs as a command: its entries say command)
    task_kind = as_object(as_object(result.get("record")).get("agent")).get("kind")
    seen_attempt = 1
    n_calls = 0
    for entry in requests:
        is_call = _is_call(entry)
        n_calls += is_call
        attempt = as_int(entry.get("attempt")) or (n_calls if plain and is_call else seen_attempt)
        if attempt > seen_attempt and 0 < attempt - 1 <= len(attempts):
            feedback = attempts[attempt - 2].get("feedback_sent")
            steps.add(
                "user",
                str(feedback or ""),
                extra={"agentbench": {"repair": attempt - 1}},
            )
            seen_attempt = attempt
        if is_call:
            _call_step(steps, entry, attempts, attempt, model)
        elif "agent" in entry:
            agent = as_object(entry.get("agent"))
            kind = task_kind if isinstance(task_kind, str) else agent.get("kind")
            agent_name = f"{AGENT_NAME} ({kind} agent)"
            steps.add(
                "system",
                _agent_line(agent, kind),
                extra={"agentbench": {"attempt": attempt, "agent": agent}},
            )
    record = as_object(result.get("record"))
    usage = as_object(result.get("usage"))
    final: JsonObject = {
        **{f"total_{k}": v for k, v in atif_metrics(usage).items()},
        "total_steps": len(steps.steps),
        "extra": {"agentbench": {"usage": usage}},
    }
    cost = as_object(record.get("cost")).get("usd")
    if isinstance(cost, int | float) and not isinstance(cost, bool):
        final["total_cost_usd"] = cost
    extra: JsonObject = {
        "run_id": run_id,
        "task_key": result.get("task_key"),
        "suite": result.get("suite"),
        "task_id": result.get("task_id"),
        "model": model,
        "outcome": result.get("outcome"),
        "reward": result.get("reward"),
        "first_attempt_reward": result.get("first_attempt_reward"),
        "pass_threshold": result.get("pass_threshold"),
        "error": result.get("error"),
        "elapsed_s": result.get("elapsed_s"),
        "started_at": result.get("started_at"),
        "attempts": [{k: a.get(k) for k in _ATTEMPT_FIELDS if k in a} for a in attempts],
        "judge": record.get("judge"),
        "record": record,
        "workspace": [e for e in requests if "workspace" in e],
    }
    # the rest of result.json (its schema version, repair settings, failure, loop ...)
    extra["rollout"] = {k: v for k, v in result.items() if k not in extra and k not in _NOT_CARRIED}
    out: JsonObject = {
        "schema_version": ATIF_VERSION,
        "session_id": f"{run_id}/{folder.parent.name}/{folder.name}",
        "agent": {"name": agent_name, "version": version, "model_name": model},
        "steps": steps.steps,
        "final_metrics": final,
        "extra": {"agentbench": extra},
    }
    killed = [
        s
        for s in map(as_object, steps.steps)
        if "killed" in as_object(as_object(s.get("extra")).get("agentbench"))
    ]
    if killed:
        out["notes"] = f"loop killed at step {killed[0]['step_id']} (extra.agentbench.killed)"
    return out


def _is_call(entry: JsonObject) -> bool:
    """Whether a trajectory entry is a model call (answered, killed or failed)."""
    return "agent" not in entry and any(k in entry for k in ("response", "killed", "error"))


def _call_step(
    steps: _Steps, entry: JsonObject, attempts: list[JsonObject], attempt: int, model: str
) -> None:
    """One model call as an agent step."""
    response = as_object(entry.get("response"))
    of_attempt = attempts[attempt - 1] if 0 < attempt <= len(attempts) else {}
    usage = as_object(entry.get("usage")) or (
        as_object(of_attempt.get("usage")) if "turn" not in entry else {}
    )
    text = response.get("text")
    if not isinstance(text, str):  # a killed or failed call: the text the attempt kept
        text = str(of_attempt.get("answer") or "") if "killed" in entry else ""
    thinking = response.get("thinking")
    if not thinking and "killed" in entry:
        thinking = of_attempt.get("thinking")
    own: JsonObject = {"attempt": attempt}
    for key in (
        "turn",
        "call",
        "protocol",
        "translated",
        "relay_refused",
        "dropped_tools",
        "elapsed_s",
        "waited_s",
        "model_s",
        "first_chunk_s",
        "killed",
        "answer_chars",
        "error",
        "status",
        "retries",
    ):
        if key in entry:
            own[key] = entry[key]
    for key in ("finish_reason", "cached", "batch", "batch_live", "status"):
        if key in response:
            own[f"response_{key}"] = response[key]
    if usage:
        own["usage"] = usage
    if "usage" in response:
        own["usage_native"] = response["usage"]
    metrics = atif_metrics(usage) or None
    steps.add(
        "agent",
        text,
        model_name=model,
        reasoning_content=thinking if isinstance(thinking, str) and thinking else None,
        tool_calls=_tool_calls(response) or None,
        observation=_observation(as_list(entry.get("tool_results"))),
        metrics=metrics,
        llm_call_count=1,
        extra={"agentbench": own},
    )


def _agent_line(agent: JsonObject, kind: JsonValue | None) -> str:
    stopped = agent.get("stopped")
    how = f"stopped ({stopped})" if stopped else f"exit code {agent.get('exit_code')}"
    return f"{kind} agent ended: {how}, {agent.get('model_calls')} model call(s)"


def export_run(run_dir: Path, out: Path | None, version: str) -> list[Path]:
    """Write one ``<suite>/<task>[<model>].atif.json`` per rollout of ``run_dir`` under
    ``out`` (default ``RUN_DIR/atif``); the paths written. AgentbenchError naming the file
    when a rollout's files cannot be read."""
    target = out if out is not None else run_dir / "atif"
    run_id = run_dir.resolve().name
    summary = run_dir / "summary.json"
    if summary.is_file():
        found = _read(summary).get("run_id")
        run_id = found if isinstance(found, str) else run_id
    written: list[Path] = []
    for folder in rollout_folders(run_dir):
        path = target / safe_name(folder.parent.name) / f"{folder.name}.atif.json"
        write_json_atomic(path, rollout_trajectory(folder, run_id, version))
        written.append(path)
    return written
