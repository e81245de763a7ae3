"""Anthropic's Message Batches as the scripted batch office speaks them: what a create
request must hold (checked as the real API checks it) and how a batch and its results
are rendered. The routes and the pace live in ``batches.py``; this module keeps no
state."""

from __future__ import annotations

import re
import time

from pytest_agentbench.core.jsontypes import JsonObject
from pytest_agentbench.scripted.batch_records import (
    ENTRY_HEADERS,
    WINDOW_S,
    Answer,
    Batch,
    Entry,
    EntryResult,
    entry_headers,
    json_answer,
    json_object,
    new_id,
    rfc3339,
)
from pytest_agentbench.scripted.wire_anthropic import ANTHROPIC_WIRE

#: The real API's limits per batch.
ANTHROPIC_MAX_REQUESTS = 100_000
ANTHROPIC_MAX_BYTES = 256 * 1024 * 1024
#: What a ``custom_id`` must match.
CUSTOM_ID = re.compile(r"[a-zA-Z0-9_-]{1,64}")


def anthropic_error(status: int, message: str, error_type: str = "") -> Answer:
    if not error_type:
        error_type = "not_found_error" if status == 404 else "invalid_request_error"
    return json_answer(status, ANTHROPIC_WIRE.error_body(status, message, error_type))


def create_batch(raw: bytes) -> Batch | Answer:
    """A ``POST /messages/batches`` body checked and made a batch; the refusal
    otherwise (the first problem found)."""
    if len(raw) > ANTHROPIC_MAX_BYTES:
        return anthropic_error(
            413, f"the batch is larger than {ANTHROPIC_MAX_BYTES} bytes", "request_too_large"
        )
    body = json_object(raw)
    requests = body.get("requests") if body is not None else None
    if not isinstance(requests, list) or not requests:
        return anthropic_error(400, "requests: a non-empty list of requests is required")
    if len(requests) > ANTHROPIC_MAX_REQUESTS:
        return anthropic_error(
            400, f"requests: at most {ANTHROPIC_MAX_REQUESTS} requests per batch"
        )
    entries: list[Entry] = []
    seen: set[str] = set()
    for index, request in enumerate(requests):
        where = f"requests.{index}"
        if not isinstance(request, dict):
            return anthropic_error(400, f"{where}: Input should be an object")
        custom_id = request.get("custom_id")
        if not isinstance(custom_id, str) or not CUSTOM_ID.fullmatch(custom_id):
            return anthropic_error(
                400,
                f"{where}.custom_id: String should match pattern '^[a-zA-Z0-9_-]{{1,64}}$'",
            )
        if custom_id in seen:
            return anthropic_error(400, f"{where}.custom_id: duplicate custom_id {custom_id!r}")
        seen.add(custom_id)
        params = request.get("params")
        if not isinstance(params, dict):
            return anthropic_error(400, f"{where}.params: Input should be an object")
        headers = entry_headers(request.get(ENTRY_HEADERS))
        if headers is None:
            return anthropic_error(
                400, f"{where}.{ENTRY_HEADERS}: an object of string header values"
            )
        entries.append(Entry(custom_id, "/messages", params, headers))
    return Batch(new_id("msgbatch_"), "anthropic", entries, time.time())


def batch_json(batch: Batch, origin: str) -> JsonObject:
    """The batch's status object; ``origin`` is the server's ``http://host:port``."""
    if batch.ended:
        status = "ended"
    else:
        status = "canceling" if batch.cancelled_at is not None else "in_progress"
    results_url = None
    if batch.ended:
        results_url = f"{origin}/v1/messages/batches/{batch.id}/results"
    return {
        "id": batch.id,
        "type": "message_batch",
        "processing_status": status,
        "request_counts": {
            "processing": 0 if batch.ended else len(batch.entries),
            "succeeded": batch.count("succeeded"),
            "errored": batch.count("errored"),
            "canceled": batch.count("canceled"),
            "expired": batch.count("expired"),
        },
        "ended_at": rfc3339(batch.ended_at),
        "created_at": rfc3339(batch.created_at),
        "expires_at": rfc3339(batch.created_at + WINDOW_S),
        "archived_at": None,
        "cancel_initiated_at": rfc3339(batch.cancelled_at),
        "results_url": results_url,
    }


def result_line(result: EntryResult) -> JsonObject:
    """One line of a batch's results."""
    outcome: JsonObject = {"type": result.kind}
    if result.kind == "succeeded":
        outcome["message"] = result.body
    elif result.kind == "errored":
        outcome["error"] = result.body
    return {"custom_id": result.custom_id, "result": outcome}
