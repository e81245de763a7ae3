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

The office keeps the store (files and batches, behind one lock), the routes and the
pace, and answers entries; the two APIs' shapes live apart: ``batch_openai.py`` (what
OpenAI's Files and Batch API accept and render) and ``batch_anthropic.py`` (Anthropic's
Message Batches), over the records of ``batch_records.py``.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable

from pytest_agentbench.core.jsontypes import JsonObject
from pytest_agentbench.scripted import batch_anthropic, batch_openai
from pytest_agentbench.scripted.answer import (
    WIRES,
    choose,
    completion_body,
    log_entry,
    named_script,
)
from pytest_agentbench.scripted.batch_anthropic import anthropic_error
from pytest_agentbench.scripted.batch_openai import openai_error
from pytest_agentbench.scripted.batch_records import (
    Answer,
    Api,
    Batch,
    Entry,
    EntryResult,
    StoredFile,
    json_answer,
    page,
)
from pytest_agentbench.scripted.book import ScriptBook


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
            stored = batch_openai.read_upload(raw, content_type)
            if isinstance(stored, Answer):
                return stored
            self._files[stored.id] = stored
            return json_answer(200, stored.json())
        if method == "GET" and rest:
            found = self._files.get(rest[0])
            if found is None:
                return openai_error(404, f"No such File object: {rest[0]}", "id")
            if rest[1:] == ["content"]:
                return Answer(200, found.data, "application/octet-stream")
            if len(rest) == 1:
                return json_answer(200, found.json())
        return openai_error(404, f"unknown endpoint {method} /v1/files/{'/'.join(rest)}")

    # --- OpenAI: batches -------------------------------------------------------------

    def _openai_route(self, method: str, rest: list[str], raw: bytes) -> Answer:
        if method == "POST" and not rest:
            made = batch_openai.create_batch(raw, self._files)
            if isinstance(made, Answer):
                return made
            return json_answer(200, batch_openai.batch_json(self._keep(made)))
        if method == "GET" and not rest:
            listed = [batch_openai.batch_json(b) for b in self._newest("openai")]
            return json_answer(200, page(listed, {"object": "list"}))
        batch = self._batches.get(rest[0]) if rest else None
        if batch is None or batch.api != "openai":
            return openai_error(404, f"No batch found with id '{'/'.join(rest)}'.", "batch_id")
        if method == "GET" and len(rest) == 1:
            self._read(batch)
            return json_answer(200, batch_openai.batch_json(batch))
        if method == "POST" and rest[1:] == ["cancel"]:
            if batch.ended:
                status = batch_openai.batch_status(batch)
                return openai_error(409, f"Cannot cancel a batch with status '{status}'.")
            if batch.cancelled_at is None:
                batch.cancelled_at = time.time()
            return json_answer(200, batch_openai.batch_json(batch))
        return openai_error(404, f"unknown endpoint {method} /v1/batches/{'/'.join(rest)}")

    # --- Anthropic: message batches --------------------------------------------------

    def _anthropic_route(self, method: str, rest: list[str], raw: bytes) -> Answer:
        if method == "POST" and not rest:
            made = batch_anthropic.create_batch(raw)
            if isinstance(made, Answer):
                return made
            return json_answer(200, batch_anthropic.batch_json(self._keep(made), self._origin()))
        if method == "GET" and not rest:
            origin = self._origin()
            listed = [batch_anthropic.batch_json(b, origin) for b in self._newest("anthropic")]
            return json_answer(200, page(listed, {}))
        batch = self._batches.get(rest[0]) if rest else None
        if batch is None or batch.api != "anthropic":
            return anthropic_error(404, f"Message Batch {'/'.join(rest)!r} not found.")
        if method == "GET" and len(rest) == 1:
            self._read(batch)
            return json_answer(200, batch_anthropic.batch_json(batch, self._origin()))
        if method == "POST" and rest[1:] == ["cancel"]:
            if not batch.ended and batch.cancelled_at is None:
                batch.cancelled_at = time.time()
            return json_answer(200, batch_anthropic.batch_json(batch, self._origin()))
        if method == "GET" and rest[1:] == ["results"]:
            if not batch.ended:
                return anthropic_error(
                    400, f"Message Batch {batch.id} has not ended yet: no results to read."
                )
            lines = [
                json.dumps(batch_anthropic.result_line(r)).encode() + b"\n" for r in batch.results
            ]
            return Answer(200, b"".join(lines), "application/binary")
        where = "/".join(rest)
        return anthropic_error(404, f"unknown endpoint {method} /v1/messages/batches/{where}")

    # --- both ------------------------------------------------------------------------

    def _keep(self, batch: Batch) -> Batch:
        self._batches[batch.id] = batch
        self.created += 1
        return batch

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
            output, error = batch_openai.result_files(batch)
            if output is not None:
                self._files[output.id] = output
                batch.output_file_id = output.id
            if error is not None:
                self._files[error.id] = error
                batch.error_file_id = error.id

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
