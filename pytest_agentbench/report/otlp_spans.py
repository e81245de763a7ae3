"""A run's spans in OTLP/HTTP JSON (``--agentbench-otlp``, docs/interchange.md): a span
per run, per task, per model call and per tool call, with the OpenTelemetry GenAI
semantic conventions' ``gen_ai.*`` attributes (and OpenInference's span kinds, which
Arize Phoenix shows).

Pure: a task record and its rollout's trajectory.json in, span dicts out; the sending is
session/otlp.py's. Ids are derived, not random: the trace id from the run id (every
span of a run, whatever process sends it, lands in one trace), a task's span id from its
node id and epoch, a call's from the task's and its place. A model call's time is its
own elapsed time laid end to end from the task's start (the files keep durations, not
wall times). Prompts and answers go out only with ``content``; they are the trajectory
file's, which the run redacted before writing.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path

from pytest_agentbench.core.jsontypes import JsonObject, JsonValue, as_int, as_list, as_object
from pytest_agentbench.core.outcome import retries_made
from pytest_agentbench.core.task_record import TaskRecord

#: what a span's attribute may hold
Attr = str | int | float | bool | list[str]
_STATUS_ERROR = 2
_STATUS_OK = 1


def trace_id(run_id: str) -> str:
    """The run's trace id: 32 hex digits of its run id's hash."""
    return hashlib.sha256(f"agentbench-run:{run_id}".encode()).hexdigest()[:32]


def span_id(*parts: object) -> str:
    """A span id (16 hex digits) derived from ``parts``."""
    text = "\x1f".join(str(p) for p in parts)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def _value(value: Attr) -> JsonObject:
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, list):
        return {"arrayValue": {"values": [{"stringValue": v} for v in value]}}
    return {"stringValue": value}


def attributes(values: Mapping[str, Attr | None]) -> list[JsonValue]:
    """OTLP key-value attributes of ``values``; a None value (not known) is left out."""
    return [{"key": k, "value": _value(v)} for k, v in values.items() if v is not None]


def span(
    trace: str,
    ident: str,
    parent: str | None,
    name: str,
    start_ns: int,
    end_ns: int,
    attrs: Mapping[str, Attr | None],
    *,
    error: str | None = None,
    events: list[JsonValue] | None = None,
) -> JsonObject:
    """One span in OTLP JSON (kind INTERNAL, CLIENT for a model call)."""
    out: JsonObject = {
        "traceId": trace,
        "spanId": ident,
        "name": name,
        "kind": 3 if name.startswith("chat ") else 1,
        "startTimeUnixNano": str(start_ns),
        "endTimeUnixNano": str(max(end_ns, start_ns)),
        "attributes": attributes(attrs),
        "status": {"code": _STATUS_ERROR, "message": error} if error else {"code": _STATUS_OK},
    }
    if parent is not None:
        out["parentSpanId"] = parent
    if events:
        out["events"] = events
    return out


def _str(value: JsonValue | None) -> str | None:
    return value if isinstance(value, str) else None


def _seconds(value: JsonValue | None) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0


def task_spans(
    record: TaskRecord,
    run_id: str,
    run_span: str,
    models: Mapping[str, tuple[str, str]],
    *,
    content: bool,
) -> list[JsonValue]:
    """The spans of one finished task: its own, and its model and tool calls read from
    its rollout's trajectory.json (none when that file cannot be read). ``models`` maps a
    model's name in the run to its provider and model id."""
    trace = trace_id(run_id)
    me = span_id(run_id, record.nodeid, record.epoch or 0, len(record.reruns or ()))
    start = record.start_ms * 1_000_000
    provider, model_id = models.get(record.model, ("", record.model))
    usage = record.usage
    attrs: dict[str, Attr | None] = {
        "openinference.span.kind": "AGENT",
        "agentbench.suite": record.suite,
        "agentbench.task_id": record.task_id,
        "agentbench.model": record.model,
        "agentbench.outcome": record.outcome,
        "agentbench.reward": record.reward,
        "agentbench.attempts": record.attempts,
        "agentbench.failure": record.message if record.outcome != "passed" else None,
        "agentbench.epoch": record.epoch,
        "gen_ai.request.model": model_id,
        "gen_ai.provider.name": provider or None,
        "gen_ai.usage.input_tokens": usage.input,
        "gen_ai.usage.output_tokens": usage.output,
    }
    events: list[JsonValue] = []
    if record.loop is not None and record.outcome == "loop_killed":
        evidence = record.loop.to_json()
        events.append(
            {
                "timeUnixNano": str(start + record.duration_ms * 1_000_000),
                "name": "agentbench.loop_killed",
                "attributes": attributes(
                    {f"agentbench.loop.{k}": v for k, v in _flat(evidence).items()}
                ),
            }
        )
    end = start + record.duration_ms * 1_000_000
    error = record.message if record.outcome in ("harness_error", "timeout") else None
    spans: list[JsonValue] = [
        span(
            trace,
            me,
            run_span,
            f"agentbench.task {record.suite}/{record.task_id}[{record.model}]",
            start,
            end,
            attrs,
            error=error,
            events=events,
        )
    ]
    if record.rollout_dir:
        spans.extend(
            _call_spans(
                Path(record.rollout_dir), trace, me, start, provider, model_id, content=content
            )
        )
    return spans


def _flat(values: JsonObject) -> dict[str, Attr | None]:
    """A loop record's scalar fields (the rest as JSON text)."""
    out: dict[str, Attr | None] = {}
    for key, value in values.items():
        if isinstance(value, str | int | float | bool):
            out[key] = value
        elif value is not None:
            out[key] = json.dumps(value)
    return out


def _call_spans(
    folder: Path,
    trace: str,
    parent: str,
    start_ns: int,
    provider: str,
    model_id: str,
    *,
    content: bool,
) -> list[JsonValue]:
    try:
        data: JsonValue = json.loads((folder / "trajectory.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    requests = [as_object(e) for e in as_list(as_object(data).get("requests"))]
    at = start_ns
    spans: list[JsonValue] = []
    for n, entry in enumerate(requests):
        if "agent" in entry or not any(k in entry for k in ("response", "killed", "error")):
            continue
        response = as_object(entry.get("response"))
        took = int(_seconds(entry.get("elapsed_s") or entry.get("model_s")) * 1e9)
        if isinstance(entry.get("at_s"), int | float):  # an agent's call: its own offset
            at = max(at, start_ns + int(_seconds(entry.get("at_s")) * 1e9) - took)
        usage = as_object(entry.get("usage"))
        native = as_object(response.get("usage"))
        finish = response.get("finish_reason")
        body = as_object(as_object(entry.get("request")).get("body"))
        first_chunk = entry.get("first_chunk_s")
        me = span_id(parent, n)
        attrs: dict[str, Attr | None] = {
            "openinference.span.kind": "LLM",
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": provider or None,
            "gen_ai.request.model": model_id,
            "llm.model_name": model_id,
            "gen_ai.response.finish_reasons": [str(finish)] if finish else None,
            "gen_ai.request.stream": True if body.get("stream") is True else None,
            "gen_ai.response.time_to_first_chunk": _seconds(first_chunk)
            if isinstance(first_chunk, int | float)
            else None,
            "gen_ai.usage.input_tokens": as_int(usage.get("input"))
            if usage
            else as_int(native.get("prompt_tokens") or native.get("input_tokens")),
            "gen_ai.usage.output_tokens": as_int(usage.get("output"))
            if usage
            else as_int(native.get("completion_tokens") or native.get("output_tokens")),
            "gen_ai.usage.cache_read.input_tokens": as_int(usage.get("cache_read")),
            "gen_ai.usage.cache_creation.input_tokens": as_int(usage.get("cache_write")),
            "agentbench.attempt": as_int(entry.get("attempt")),
            "agentbench.turn": as_int(entry.get("turn")),
            "agentbench.retries": retries_made(as_list(entry.get("retries"))),
            "agentbench.cached": response.get("cached") is True,
            "agentbench.batched": response.get("batch") is True,
            "agentbench.translated": _str(entry.get("translated")),
            "agentbench.protocol": _str(entry.get("protocol")),
            "agentbench.waited_s": _seconds(entry.get("waited_s")) or None,
        }
        if content:
            attrs["gen_ai.output.text"] = _str(response.get("text"))
            messages = body.get("messages") or body.get("input")
            attrs["gen_ai.input.messages"] = json.dumps(messages) if messages else None
        events: list[JsonValue] = []
        killed = as_object(entry.get("killed"))
        if killed:
            events.append(
                {
                    "timeUnixNano": str(at + took),
                    "name": "agentbench.loop_killed",
                    "attributes": attributes(
                        {f"agentbench.loop.{k}": v for k, v in _flat(killed).items()}
                    ),
                }
            )
        error = entry.get("error")
        spans.append(
            span(
                trace,
                me,
                parent,
                f"chat {model_id}",
                at,
                at + took,
                attrs,
                error=str(error) if error else ("loop killed" if killed else None),
                events=events,
            )
        )
        at += took
        for m, result in enumerate(map(as_object, as_list(entry.get("tool_results")))):
            spent = int(_seconds(result.get("elapsed_s")) * 1e9)
            tool: dict[str, Attr | None] = {
                "openinference.span.kind": "TOOL",
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": str(result.get("name") or ""),
                "gen_ai.tool.call.id": str(result.get("id") or ""),
                "agentbench.tool.is_error": result.get("is_error") is True,
                "agentbench.tool.output_chars": as_int(result.get("output_chars")),
            }
            if content:
                tool["gen_ai.tool.call.result"] = _str(result.get("output"))
            spans.append(
                span(
                    trace,
                    span_id(me, "tool", m),
                    parent,
                    f"execute_tool {tool['gen_ai.tool.name']}",
                    at,
                    at + spent,
                    tool,
                    error="tool error" if result.get("is_error") is True else None,
                )
            )
            at += spent
    return spans
