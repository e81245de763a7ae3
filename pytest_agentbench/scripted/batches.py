"""The provider batch APIs on the scripted server: OpenAI's Files and Batch API and
Anthropic's Message Batches, shaped as the real APIs shape them, so the official SDKs
and ``models/batch.py`` run their whole flow offline.

Routes (below ``/v1``, as the live endpoints):

- OpenAI: ``POST /files`` (multipart/form-data, ``purpose=batch``), ``GET /files/{id}``,
  ``GET /files/{id}/content``; ``POST /batches``, ``GET /batches`` (newest first),
  ``GET /batches/{id}``, ``POST /batches/{id}/cancel``.
- Anthropic: ``POST /messages/batches``, ``GET /messages/batches`` (newest first),
  ``GET /messages/batches/{id}``, ``POST /messages/batches/{id}/cancel``,
  ``GET /messages/batches/{id}/results``.

Each entry is answered by the live machinery (``answer.py``): the same script book,
turns, usage and body as a live unstreamed request to its endpoint. A batch entry has no
headers, so an entry may carry ``agentbench_headers`` (``x-agentbench-script``,
``x-agentbench-turn``), applied as that entry's headers; a scripted-only extension the
real APIs do not have. A reply that is an HTTP error makes an errored entry; a
``truncate`` or ``hang`` reply an errored one too (HTTP 500: a broken reply has no
content to batch); ``delay_s`` and ``chunk_delay_s`` do not apply; a reply with
``batch_expired`` makes an expired entry (its turn is not used up: the same turn sent
live is answered as usual).

Pace without timing: a batch ends at the ``polls``-th read of its status (``GET`` of
the batch), and its entries are answered then, in input order; a batch cancelled before
that answers none. Listing batches does not count as a read.
"""

from __future__ import annotations

import datetime
import email.policy
import json
import re
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from email.parser import BytesParser
from typing import Literal

from pytest_agentbench.core.jsontypes import JsonObject, JsonValue
from pytest_agentbench.scripted.answer import (
    WIRES,
    choose,
    completion_body,
    log_entry,
    named_script,
)
from pytest_agentbench.scripted.book import ScriptBook
from pytest_agentbench.scripted.wire import openai_error_body
from pytest_agentbench.scripted.wire_anthropic import ANTHROPIC_WIRE

#: The real APIs' limits per batch (OpenAI: per input file).
OPENAI_MAX_REQUESTS = 50_000
OPENAI_MAX_BYTES = 200 * 1024 * 1024
ANTHROPIC_MAX_REQUESTS = 100_000
ANTHROPIC_MAX_BYTES = 256 * 1024 * 1024
#: The endpoints an OpenAI batch may name, and the generation route each answers with.
OPENAI_ENDPOINTS = {"/v1/chat/completions": "/chat/completions", "/v1/responses": "/responses"}
#: What an Anthropic ``custom_id`` must match.
CUSTOM_ID = re.compile(r"[a-zA-Z0-9_-]{1,64}")
#: The completion window: 24 hours.
WINDOW_S = 86400
#: How many validation errors a failed batch lists.
MAX_ERRORS = 100
#: The scripted-only per-entry headers (lower-case names).
ENTRY_HEADERS = "agentbench_headers"

Api = Literal["openai", "anthropic"]
Kind = Literal["succeeded", "errored", "expired", "canceled"]


@dataclass(frozen=True)
class Answer:
    """The HTTP answer of a batch endpoint."""

    status: int
    body: bytes
    content_type: str = "application/json"


def _json(status: int, obj: JsonValue) -> Answer:
    return Answer(status, json.dumps(obj).encode())


def _openai_error(status: int, message: str, param: str | None = None) -> Answer:
    error_type = "invalid_request_error"
    return _json(status, openai_error_body(status, message, error_type, param))


def _anthropic_error(status: int, message: str, error_type: str = "") -> Answer:
    if not error_type:
        error_type = "not_found_error" if status == 404 else "invalid_request_error"
    return _json(status, ANTHROPIC_WIRE.error_body(status, message, error_type))


def _rfc3339(when: float | None) -> JsonValue:
    if when is None:
        return None
    moment = datetime.datetime.fromtimestamp(when, datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _new_id(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:24]}"


@dataclass(frozen=True)
class Entry:
    """One request of a batch: its id, the generation route and body, and the headers
    its ``agentbench_headers`` give it (lower-case names)."""

    custom_id: str
    route: str
    body: JsonObject
    headers: Mapping[str, str]


@dataclass(frozen=True)
class EntryResult:
    """How one entry ended: ``body`` is the completion (succeeded) or the protocol's
    error body (errored, with the HTTP ``status`` a live request would have had)."""

    custom_id: str
    kind: Kind
    status: int = 200
    body: JsonObject | None = None


@dataclass(frozen=True)
class StoredFile:
    """A file of the OpenAI Files API, kept in memory."""

    id: str
    filename: str
    purpose: str
    data: bytes
    created_at: int

    def json(self) -> JsonObject:
        return {
            "id": self.id,
            "object": "file",
            "bytes": len(self.data),
            "created_at": self.created_at,
            "filename": self.filename,
            "purpose": self.purpose,
            "status": "processed",
            "expires_at": None,
            "status_details": None,
        }


@dataclass
class Batch:
    """One batch of either API and where it is: open (not ended yet), cancelling, or
    ended with ``results``. OpenAI's own fields are kept in ``openai``."""

    id: str
    api: Api
    entries: list[Entry]
    created_at: float
    errors: list[JsonObject] = field(default_factory=list)
    openai: JsonObject = field(default_factory=dict)
    reads: int = 0
    cancelled_at: float | None = None
    ended_at: float | None = None
    in_progress_at: float | None = None
    results: list[EntryResult] = field(default_factory=list)
    output_file_id: str | None = None
    error_file_id: str | None = None

    @property
    def ended(self) -> bool:
        return self.ended_at is not None

    def count(self, kind: Kind) -> int:
        return sum(1 for result in self.results if result.kind == kind)


class BatchOffice:
    """The batches and files of one scripted server; safe across threads.

    ``record`` logs an answered entry (the server's request log, marked ``batch``);
    ``origin`` is the server's ``http://host:port`` (Anthropic's ``results_url``)."""

    def __init__(
        self,
        book: ScriptBook,
        record: Callable[[JsonObject], None],
        origin: Callable[[], str],
        polls: int = 1,
    ) -> None:
        self._book = book
        self._record = record
        self._origin = origin
        self.polls = polls
        self._lock = threading.Lock()
        self._files: dict[str, StoredFile] = {}
        self._batches: dict[str, Batch] = {}
        self.created = 0
        self.answered = 0

    def serve(self, method: str, route: str, raw: bytes, content_type: str) -> Answer:
        """Answer ``method route`` with request body ``raw``."""
        parts = route.strip("/").split("/")
        with self._lock:
            if parts[0] == "files":
                return self._files_route(method, parts[1:], raw, content_type)
            if parts[0] == "batches":
                return self._openai_route(method, parts[1:], raw)
            return self._anthropic_route(method, parts[2:], raw)

    # --- OpenAI: files ---------------------------------------------------------------

    def _files_route(self, method: str, rest: list[str], raw: bytes, content_type: str) -> Answer:
        if method == "POST" and not rest:
            return self._upload(raw, content_type)
        if method == "GET" and rest:
            stored = self._files.get(rest[0])
            if stored is None:
                return _openai_error(404, f"No such File object: {rest[0]}", "id")
            if rest[1:] == ["content"]:
                return Answer(200, stored.data, "application/octet-stream")
            if len(rest) == 1:
                return _json(200, stored.json())
        return _openai_error(404, f"unknown endpoint {method} /v1/files/{'/'.join(rest)}")

    def _upload(self, raw: bytes, content_type: str) -> Answer:
        if not content_type.lower().startswith("multipart/form-data"):
            return _openai_error(400, "upload the file as multipart/form-data")
        head = f"Content-Type: {content_type}\r\n\r\n".encode("latin-1", "replace")
        message = BytesParser(policy=email.policy.HTTP).parsebytes(head + raw)
        if not message.is_multipart():
            return _openai_error(400, "the multipart/form-data body could not be read")
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
            return _openai_error(400, "Missing required parameter: 'file'.", "file")
        if purpose != "batch":
            return _openai_error(
                400,
                f"Invalid value for 'purpose': {purpose!r}; the scripted provider stores "
                "batch input files only (purpose=batch).",
                "purpose",
            )
        stored = StoredFile(_new_id("file-"), upload[0], "batch", upload[1], int(time.time()))
        self._files[stored.id] = stored
        return _json(200, stored.json())

    # --- OpenAI: batches -------------------------------------------------------------

    def _openai_route(self, method: str, rest: list[str], raw: bytes) -> Answer:
        if method == "POST" and not rest:
            return self._openai_create(raw)
        if method == "GET" and not rest:
            listed = [self._openai_json(b) for b in self._newest("openai")]
            return _json(200, _page(listed, {"object": "list"}))
        batch = self._batches.get(rest[0]) if rest else None
        if batch is None or batch.api != "openai":
            return _openai_error(404, f"No batch found with id '{'/'.join(rest)}'.", "batch_id")
        if method == "GET" and len(rest) == 1:
            self._read(batch)
            return _json(200, self._openai_json(batch))
        if method == "POST" and rest[1:] == ["cancel"]:
            if batch.ended:
                status = self._openai_status(batch)
                return _openai_error(409, f"Cannot cancel a batch with status '{status}'.")
            if batch.cancelled_at is None:
                batch.cancelled_at = time.time()
            return _json(200, self._openai_json(batch))
        return _openai_error(404, f"unknown endpoint {method} /v1/batches/{'/'.join(rest)}")

    def _openai_create(self, raw: bytes) -> Answer:
        body = _object(raw)
        if body is None:
            return _openai_error(400, "the request body must be a JSON object")
        file_id = body.get("input_file_id")
        if not isinstance(file_id, str):
            return _openai_error(400, "Missing required parameter: 'input_file_id'.")
        stored = self._files.get(file_id)
        if stored is None:
            return _openai_error(404, f"No such File object: {file_id}", "input_file_id")
        if stored.purpose != "batch":
            return _openai_error(
                400, f"File {file_id} has purpose {stored.purpose!r}, not 'batch'.", "input_file_id"
            )
        endpoint = body.get("endpoint")
        if not isinstance(endpoint, str) or endpoint not in OPENAI_ENDPOINTS:
            supported = ", ".join(OPENAI_ENDPOINTS)
            return _openai_error(
                400,
                f"Invalid value for 'endpoint': {endpoint!r}; the scripted provider batches "
                f"{supported}.",
                "endpoint",
            )
        window = body.get("completion_window")
        if window != "24h":
            return _openai_error(
                400,
                f"Invalid value for 'completion_window': {window!r}; expected '24h'.",
                "completion_window",
            )
        metadata = body.get("metadata")
        problem = _metadata_problem(metadata)
        if problem:
            return _openai_error(400, problem, "metadata")
        entries, errors = _openai_entries(stored.data, endpoint)
        batch = Batch(_new_id("batch_"), "openai", entries, time.time(), errors=errors)
        models = {m for e in entries if isinstance(m := e.body.get("model"), str)}
        batch.openai = {
            "endpoint": endpoint,
            "input_file_id": file_id,
            "metadata": metadata,
            "model": models.pop() if len(models) == 1 else None,
        }
        self._batches[batch.id] = batch
        self.created += 1
        return _json(200, self._openai_json(batch))

    def _openai_status(self, batch: Batch) -> str:
        if batch.errors and batch.reads:
            return "failed"
        if batch.ended:
            if batch.cancelled_at is not None:
                return "cancelled"
            return "expired" if batch.count("expired") else "completed"
        if batch.cancelled_at is not None:
            return "cancelling"
        return "in_progress" if batch.reads else "validating"

    def _openai_json(self, batch: Batch) -> JsonObject:
        status = self._openai_status(batch)
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

    def _openai_files(self, batch: Batch) -> None:
        """Write the output file (succeeded entries) and the error file (the others)."""
        output: list[bytes] = []
        failed: list[bytes] = []
        for result in batch.results:
            if result.kind == "canceled":
                continue
            line: JsonObject = {"id": _new_id("batch_req_"), "custom_id": result.custom_id}
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
                    "request_id": _new_id("req_"),
                    "body": result.body,
                }
                line["error"] = None
            (output if result.kind == "succeeded" else failed).append(
                json.dumps(line).encode() + b"\n"
            )
        now = int(time.time())
        if output:
            stored = StoredFile(
                _new_id("file-"), f"{batch.id}_output.jsonl", "batch_output", b"".join(output), now
            )
            self._files[stored.id] = stored
            batch.output_file_id = stored.id
        if failed:
            stored = StoredFile(
                _new_id("file-"), f"{batch.id}_error.jsonl", "batch_output", b"".join(failed), now
            )
            self._files[stored.id] = stored
            batch.error_file_id = stored.id

    # --- Anthropic: message batches --------------------------------------------------

    def _anthropic_route(self, method: str, rest: list[str], raw: bytes) -> Answer:
        if method == "POST" and not rest:
            return self._anthropic_create(raw)
        if method == "GET" and not rest:
            listed = [self._anthropic_json(b) for b in self._newest("anthropic")]
            return _json(200, _page(listed, {}))
        batch = self._batches.get(rest[0]) if rest else None
        if batch is None or batch.api != "anthropic":
            return _anthropic_error(404, f"Message Batch {'/'.join(rest)!r} not found.")
        if method == "GET" and len(rest) == 1:
            self._read(batch)
            return _json(200, self._anthropic_json(batch))
        if method == "POST" and rest[1:] == ["cancel"]:
            if not batch.ended and batch.cancelled_at is None:
                batch.cancelled_at = time.time()
            return _json(200, self._anthropic_json(batch))
        if method == "GET" and rest[1:] == ["results"]:
            if not batch.ended:
                return _anthropic_error(
                    400, f"Message Batch {batch.id} has not ended yet: no results to read."
                )
            lines = [json.dumps(_anthropic_line(r)).encode() + b"\n" for r in batch.results]
            return Answer(200, b"".join(lines), "application/binary")
        where = "/".join(rest)
        return _anthropic_error(404, f"unknown endpoint {method} /v1/messages/batches/{where}")

    def _anthropic_create(self, raw: bytes) -> Answer:
        if len(raw) > ANTHROPIC_MAX_BYTES:
            return _anthropic_error(
                413, f"the batch is larger than {ANTHROPIC_MAX_BYTES} bytes", "request_too_large"
            )
        body = _object(raw)
        requests = body.get("requests") if body is not None else None
        if not isinstance(requests, list) or not requests:
            return _anthropic_error(400, "requests: a non-empty list of requests is required")
        if len(requests) > ANTHROPIC_MAX_REQUESTS:
            return _anthropic_error(
                400, f"requests: at most {ANTHROPIC_MAX_REQUESTS} requests per batch"
            )
        entries: list[Entry] = []
        seen: set[str] = set()
        for index, request in enumerate(requests):
            where = f"requests.{index}"
            if not isinstance(request, dict):
                return _anthropic_error(400, f"{where}: Input should be an object")
            custom_id = request.get("custom_id")
            if not isinstance(custom_id, str) or not CUSTOM_ID.fullmatch(custom_id):
                return _anthropic_error(
                    400,
                    f"{where}.custom_id: String should match pattern '^[a-zA-Z0-9_-]{{1,64}}$'",
                )
            if custom_id in seen:
                return _anthropic_error(
                    400, f"{where}.custom_id: duplicate custom_id {custom_id!r}"
                )
            seen.add(custom_id)
            params = request.get("params")
            if not isinstance(params, dict):
                return _anthropic_error(400, f"{where}.params: Input should be an object")
            headers = _entry_headers(request.get(ENTRY_HEADERS))
            if headers is None:
                return _anthropic_error(
                    400, f"{where}.{ENTRY_HEADERS}: an object of string header values"
                )
            entries.append(Entry(custom_id, "/messages", params, headers))
        batch = Batch(_new_id("msgbatch_"), "anthropic", entries, time.time())
        self._batches[batch.id] = batch
        self.created += 1
        return _json(200, self._anthropic_json(batch))

    def _anthropic_json(self, batch: Batch) -> JsonObject:
        if batch.ended:
            status = "ended"
        else:
            status = "canceling" if batch.cancelled_at is not None else "in_progress"
        results_url = None
        if batch.ended:
            results_url = f"{self._origin()}/v1/messages/batches/{batch.id}/results"
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
            "ended_at": _rfc3339(batch.ended_at),
            "created_at": _rfc3339(batch.created_at),
            "expires_at": _rfc3339(batch.created_at + WINDOW_S),
            "archived_at": None,
            "cancel_initiated_at": _rfc3339(batch.cancelled_at),
            "results_url": results_url,
        }

    # --- both ------------------------------------------------------------------------

    def _newest(self, api: Api) -> list[Batch]:
        return sorted(
            (b for b in self._batches.values() if b.api == api),
            key=lambda b: b.created_at,
            reverse=True,
        )

    def _read(self, batch: Batch) -> None:
        """A read of the batch's status: the ``polls``-th ends it (a cancelled one at its
        next read; a failed one, at its first)."""
        if batch.ended:
            return
        batch.reads += 1
        now = time.time()
        if batch.errors:
            batch.ended_at = now
            return
        if batch.in_progress_at is None:
            batch.in_progress_at = now
        if batch.cancelled_at is not None:
            batch.results = [EntryResult(e.custom_id, "canceled") for e in batch.entries]
            batch.ended_at = now
        elif batch.reads >= self.polls:
            batch.results = [self._answer(batch, entry) for entry in batch.entries]
            batch.ended_at = now
        else:
            return
        if batch.api == "openai":
            self._openai_files(batch)

    def _answer(self, batch: Batch, entry: Entry) -> EntryResult:
        """One entry answered as a live unstreamed request to its endpoint."""
        wire = WIRES[entry.route]

        def errored(status: int, message: str, error_type: str = "") -> EntryResult:
            body = wire.error_body(status, message, error_type or "invalid_request_error")
            return EntryResult(entry.custom_id, "errored", status, body)

        named = named_script(entry.headers.get)
        if isinstance(named, str):
            return errored(400, named)
        if entry.body.get("stream"):
            return errored(400, "stream: streaming is not supported in a batch")
        peeked = self._book.peek(named.key, entry.body.get("model"), named.turn)
        if peeked is not None and peeked.batch_expired:
            return EntryResult(entry.custom_id, "expired")
        choice = choose(self._book, wire, entry.route, entry.body, named)
        logged = log_entry(f"/v1{entry.route}", choice, entry.body, entry.headers)
        logged["batch"] = batch.id
        logged["custom_id"] = entry.custom_id
        self._record(logged)
        self.answered += 1
        if choice.refusal is not None:
            return errored(400, choice.refusal.message)
        reply = choice.reply
        if reply is None:
            return errored(404, choice.missing)
        error = reply.error
        if error is not None:
            return errored(error.status, error.message, error.type)
        if reply.truncate or reply.hang:
            what = "truncated" if reply.truncate else "hung"
            return errored(500, f"the scripted reply {what}: no content to batch", "server_error")
        return EntryResult(
            entry.custom_id, "succeeded", 200, completion_body(wire, reply, entry.body)
        )


def _anthropic_line(result: EntryResult) -> JsonObject:
    outcome: JsonObject = {"type": result.kind}
    if result.kind == "succeeded":
        outcome["message"] = result.body
    elif result.kind == "errored":
        outcome["error"] = result.body
    return {"custom_id": result.custom_id, "result": outcome}


def _page(data: list[JsonObject], extra: JsonObject) -> JsonObject:
    listed = list[JsonValue](data)
    first = data[0]["id"] if data else None
    last = data[-1]["id"] if data else None
    return {**extra, "data": listed, "first_id": first, "last_id": last, "has_more": False}


def _object(raw: bytes) -> JsonObject | None:
    try:
        value: JsonValue = json.loads(raw)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _entry_headers(value: JsonValue) -> dict[str, str] | None:
    """An entry's ``agentbench_headers`` (lower-case names); None when malformed."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        return None
    headers: dict[str, str] = {}
    for name, text in value.items():
        if not isinstance(text, str):
            return None
        headers[name.lower()] = text
    return headers


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


def _openai_entries(data: bytes, endpoint: str) -> tuple[list[Entry], list[JsonObject]]:
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
        line = _object(text)
        if line is None:
            message = "This line is not parseable as valid JSON (one JSON object per line)."
            errors.append(_line_error("invalid_json_line", message, number))
            continue
        custom_id = line.get("custom_id")
        body = line.get("body")
        headers = _entry_headers(line.get(ENTRY_HEADERS))
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
