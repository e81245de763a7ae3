"""The records of the scripted batch office (``batches.py``), shared by both APIs: a
batch, its entries and how each ended, a stored file, and the HTTP answer an endpoint
gives; with the small JSON readings and renderings both APIs make of them."""

from __future__ import annotations

import datetime
import json
import uuid
from collections.abc import Mapping
from dataclasses import field
from typing import Literal

from pytest_agentbench.core.fastclass import dataclass
from pytest_agentbench.core.jsontypes import JsonObject, JsonValue

#: The completion window: 24 hours.
WINDOW_S = 86400
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


def json_answer(status: int, obj: JsonValue) -> Answer:
    return Answer(status, json.dumps(obj).encode())


def rfc3339(when: float | None) -> JsonValue:
    if when is None:
        return None
    moment = datetime.datetime.fromtimestamp(when, datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def new_id(prefix: str) -> str:
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


def page(data: list[JsonObject], extra: JsonObject) -> JsonObject:
    """A list of batches as both APIs page it (one page, newest first)."""
    listed = list[JsonValue](data)
    first = data[0]["id"] if data else None
    last = data[-1]["id"] if data else None
    return {**extra, "data": listed, "first_id": first, "last_id": last, "has_more": False}


def json_object(raw: bytes) -> JsonObject | None:
    """``raw`` read as a JSON object; None when it is not one."""
    try:
        value: JsonValue = json.loads(raw)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def entry_headers(value: JsonValue) -> dict[str, str] | None:
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
