"""OpenAI's Files and Batch API as the scripted batch office speaks it: what it accepts
(a multipart upload, a batch's parameters, its input file read line by line as OpenAI
validates it) and how it renders a batch (its status object, its output and error files).
The routes and the pace live in ``batches.py``; this module keeps no state."""

from __future__ import annotations

import email.policy
import json
import time
from collections.abc import Mapping
from email.parser import BytesParser

from pytest_agentbench.core.jsontypes import JsonObject, JsonValue
from pytest_agentbench.scripted.batch_records import (
    ENTRY_HEADERS,
    WINDOW_S,
    Answer,
    Batch,
    Entry,
    StoredFile,
    entry_headers,
    json_answer,
    json_object,
    new_id,
)
from pytest_agentbench.scripted.wire import openai_error_body

#: The real API's limits per input file.
OPENAI_MAX_REQUESTS = 50_000
OPENAI_MAX_BYTES = 200 * 1024 * 1024
#: The endpoints an OpenAI batch may name, and the generation route each answers with.
OPENAI_ENDPOINTS = {"/v1/chat/completions": "/chat/completions", "/v1/responses": "/responses"}
#: How many validation errors a failed batch lists.
MAX_ERRORS = 100


def openai_error(status: int, message: str, param: str | None = None) -> Answer:
    error_type = "invalid_request_error"
    return json_answer(status, openai_error_body(status, message, error_type, param))


def read_upload(raw: bytes, content_type: str) -> StoredFile | Answer:
    """A ``POST /files`` body read as the batch input file it uploads; the refusal
    otherwise."""
    if not content_type.lower().startswith("multipart/form-data"):
        return openai_error(400, "upload the file as multipart/form-data")
    head = f"Content-Type: {content_type}\r\n\r\n".encode("latin-1", "replace")
    message = BytesParser(policy=email.policy.HTTP).parsebytes(head + raw)
    if not message.is_multipart():
        return openai_error(400, "the multipart/form-data body could not be read")
    purpose: str | None = None
    upload: tuple[str, bytes] | None = None
    for part in message.walk():
        if part is message:
            continue
        name = part.get_param("name", header="content-disposition")
        payload = part.get_payload(decode=True)
        if not isinstance(payload, bytes):
            continue
        if name == "purpose":
            purpose = payload.decode("utf-8", "replace").strip()
        elif name == "file":
            upload = (part.get_filename() or "upload.jsonl", payload)
    if upload is None:
        return openai_error(400, "Missing required parameter: 'file'.", "file")
    if purpose != "batch":
        return openai_error(
            400,
            f"Invalid value for 'purpose': {purpose!r}; the scripted provider stores "
            "batch input files only (purpose=batch).",
            "purpose",
        )
    return StoredFile(new_id("file-"), upload[0], "batch", upload[1], int(time.time()))


def create_batch(raw: bytes, files: Mapping[str, StoredFile]) -> Batch | Answer:
    """A ``POST /batches`` body checked and made a batch over its input file (a batch
    whose file has invalid lines is made too: it fails at its first read); the refusal
    otherwise."""
    body = json_object(raw)
    if body is None:
        return openai_error(400, "the request body must be a JSON object")
    file_id = body.get("input_file_id")
    if not isinstance(file_id, str):
        return openai_error(400, "Missing required parameter: 'input_file_id'.")
    stored = files.get(file_id)
    if stored is None:
        return openai_error(404, f"No such File object: {file_id}", "input_file_id")
    if stored.purpose != "batch":
        return openai_error(
            400, f"File {file_id} has purpose {stored.purpose!r}, not 'batch'.", "input_file_id"
        )
    endpoint = body.get("endpoint")
    if not isinstance(endpoint, str) or endpoint not in OPENAI_ENDPOINTS:
        supported = ", ".join(OPENAI_ENDPOINTS)
        return openai_error(
            400,
            f"Invalid value for 'endpoint': {endpoint!r}; the scripted provider batches "
            f"{supported}.",
            "endpoint",
        )
    window = body.get("completion_window")
    if window != "24h":
        return openai_error(
            400,
            f"Invalid value for 'completion_window': {window!r}; expected '24h'.",
            "completion_window",
        )
    metadata = body.get("metadata")
    problem = _metadata_problem(metadata)
    if problem:
        return openai_error(400, problem, "metadata")
    entries, errors = _input_entries(stored.data, endpoint)
    batch = Batch(new_id("batch_"), "openai", entries, time.time(), errors=errors)
    models = {m for e in entries if isinstance(m := e.body.get("model"), str)}
    batch.openai = {
        "endpoint": endpoint,
        "input_file_id": file_id,
        "metadata": metadata,
        "model": models.pop() if len(models) == 1 else None,
    }
    return batch


def batch_status(batch: Batch) -> str:
    """The batch's ``status`` word."""
    if batch.errors and batch.reads:
        return "failed"
    if batch.ended:
        if batch.cancelled_at is not None:
            return "cancelled"
        return "expired" if batch.count("expired") else "completed"
    if batch.cancelled_at is not None:
        return "cancelling"
    return "in_progress" if batch.reads else "validating"


def batch_json(batch: Batch) -> JsonObject:
    """The batch's status object."""
    status = batch_status(batch)
    ended = None if batch.ended_at is None else int(batch.ended_at)
    started = None if batch.in_progress_at is None else int(batch.in_progress_at)
    cancel = None if batch.cancelled_at is None else int(batch.cancelled_at)
    done = status == "completed" or status == "expired"
    errors: JsonValue = None
    if status == "failed":
        errors = {"object": "list", "data": list[JsonValue](batch.errors)}
    failed = sum(1 for r in batch.results if r.kind != "succeeded" and r.kind != "canceled")
    return {
        "id": batch.id,
        "object": "batch",
        "endpoint": batch.openai.get("endpoint"),
        "model": batch.openai.get("model"),
        "errors": errors,
        "input_file_id": batch.openai.get("input_file_id"),
        "completion_window": "24h",
        "status": status,
        "output_file_id": batch.output_file_id,
        "error_file_id": batch.error_file_id,
        "created_at": int(batch.created_at),
        "in_progress_at": started,
        "expires_at": int(batch.created_at) + WINDOW_S,
        "finalizing_at": ended if done else None,
        "completed_at": ended if status == "completed" else None,
        "failed_at": ended if status == "failed" else None,
        "expired_at": ended if status == "expired" else None,
        "cancelling_at": cancel,
        "cancelled_at": ended if status == "cancelled" else None,
        "request_counts": {
            "total": len(batch.entries),
            "completed": batch.count("succeeded"),
            "failed": failed,
        },
        "metadata": batch.openai.get("metadata"),
    }


def result_files(batch: Batch) -> tuple[StoredFile | None, StoredFile | None]:
    """An ended batch's output file (succeeded entries) and error file (the others);
    None for one that would be empty."""
    output: list[bytes] = []
    failed: list[bytes] = []
    for result in batch.results:
        if result.kind == "canceled":
            continue
        line: JsonObject = {"id": new_id("batch_req_"), "custom_id": result.custom_id}
        if result.kind == "expired":
            line["response"] = None
            line["error"] = {
                "code": "batch_expired",
                "message": "This request could not be executed before the completion "
                "window expired.",
            }
        else:
            line["response"] = {
                "status_code": result.status,
                "request_id": new_id("req_"),
                "body": result.body,
            }
            line["error"] = None
        (output if result.kind == "succeeded" else failed).append(json.dumps(line).encode() + b"\n")
    now = int(time.time())
    output_file = error_file = None
    if output:
        name = f"{batch.id}_output.jsonl"
        output_file = StoredFile(new_id("file-"), name, "batch_output", b"".join(output), now)
    if failed:
        name = f"{batch.id}_error.jsonl"
        error_file = StoredFile(new_id("file-"), name, "batch_output", b"".join(failed), now)
    return output_file, error_file


def _metadata_problem(metadata: JsonValue) -> str:
    """Why OpenAI would refuse ``metadata`` ("" when it would not): at most 16 pairs,
    keys up to 64 characters, string values up to 512."""
    if metadata is None:
        return ""
    if not isinstance(metadata, dict):
        return "'metadata' must be an object of string values"
    if len(metadata) > 16:
        return "'metadata' may hold at most 16 key-value pairs"
    for key, value in metadata.items():
        if len(key) > 64:
            return f"'metadata' key {key[:20]!r}… is longer than 64 characters"
        if not isinstance(value, str) or len(value) > 512:
            return f"'metadata' value of {key!r} must be a string of at most 512 characters"
    return ""


def _line_error(code: str, message: str, line: int | None, param: str | None = None) -> JsonObject:
    return {"code": code, "message": message, "param": param, "line": line}


def _input_entries(data: bytes, endpoint: str) -> tuple[list[Entry], list[JsonObject]]:
    """A batch input file read as OpenAI validates it: every line a JSON object with a
    unique ``custom_id``, ``method`` POST, ``url`` the batch's endpoint and a ``body``
    naming the batch's one model. The entries, and the errors (each naming its line)."""
    errors: list[JsonObject] = []
    if len(data) > OPENAI_MAX_BYTES:
        errors.append(
            _line_error(
                "file_too_large", f"The input file is larger than {OPENAI_MAX_BYTES} bytes.", None
            )
        )
        return [], errors
    lines = data.split(b"\n")
    if lines and not lines[-1].strip():
        lines.pop()
    if not lines:
        return [], [_line_error("empty_file", "The batch input file is empty.", None)]
    if len(lines) > OPENAI_MAX_REQUESTS:
        message = f"The input file holds {len(lines)} requests; at most {OPENAI_MAX_REQUESTS}."
        return [], [_line_error("too_many_requests", message, None)]
    route = OPENAI_ENDPOINTS[endpoint]
    entries: list[Entry] = []
    seen: set[str] = set()
    model: JsonValue = None
    for number, text in enumerate(lines, start=1):
        line = json_object(text)
        if line is None:
            message = "This line is not parseable as valid JSON (one JSON object per line)."
            errors.append(_line_error("invalid_json_line", message, number))
            continue
        custom_id = line.get("custom_id")
        body = line.get("body")
        headers = entry_headers(line.get(ENTRY_HEADERS))
        problem: JsonObject | None = None
        if not isinstance(custom_id, str) or not custom_id:
            message = "Missing required parameter: 'custom_id'."
            problem = _line_error("missing_required_parameter", message, number, "custom_id")
        elif custom_id in seen:
            message = (
                f"The custom_id {custom_id!r} is used by an earlier line; each must be unique."
            )
            problem = _line_error("duplicate_custom_id", message, number, "custom_id")
        elif line.get("method") != "POST":
            message = f"Invalid value for 'method': {line.get('method')!r}; expected 'POST'."
            problem = _line_error("invalid_method", message, number, "method")
        elif line.get("url") != endpoint:
            message = (
                f"The url {line.get('url')!r} does not match the batch's endpoint {endpoint!r}."
            )
            problem = _line_error("mismatched_endpoint", message, number, "url")
        elif not isinstance(body, dict):
            message = "Missing required parameter: 'body' (a JSON object)."
            problem = _line_error("missing_required_parameter", message, number, "body")
        elif not isinstance(body.get("model"), str):
            message = "Missing required parameter: 'body.model'."
            problem = _line_error("missing_required_parameter", message, number, "body.model")
        elif model is not None and body.get("model") != model:
            message = f"The model {body.get('model')!r} differs from the batch's model {model!r}."
            problem = _line_error("mismatched_model", message, number, "body.model")
        elif headers is None:
            message = f"'{ENTRY_HEADERS}' must be an object of string header values."
            problem = _line_error("invalid_agentbench_headers", message, number, ENTRY_HEADERS)
        if problem is not None:
            errors.append(problem)
            continue
        assert isinstance(custom_id, str) and isinstance(body, dict) and headers is not None
        seen.add(custom_id)
        model = body.get("model")
        entries.append(Entry(custom_id, route, body, headers))
    return entries, errors[:MAX_ERRORS]
