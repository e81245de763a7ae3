"""Provider batch APIs, the client side: OpenAI's Files + Batch API and Anthropic's
Message Batches, spoken over the protocol client's own HTTP client, base URL and key.
This module makes batches (which provider has one, the entries, the calls, the upload);
``models/batch_results.py`` collects them (their state, their answers, the wait).

The interface (what the run side calls)::

    batch_support(client) -> str | None        None: the client's provider has a batch API
    submit(client, entries, *, metadata=None, limits=None) -> list[str]   batch ids
    batch_results.status(client, batch_id) -> BatchStatus
    batch_results.results(client, batch_id) -> list[BatchOutcome]   the batch must have ended
    batch_results.cancel(client, batch_id) -> None
    batch_results.wait(client, batch_ids, *, poll_s, timeout_s=None, on_progress=None,
                       expected=(), sleep=time.sleep) -> list[BatchOutcome]

``client`` is a bare built-in protocol client (not a retrying or limiting wrapper):
OpenAI Chat Completions or Responses (``openai/…``, ``openai-responses/…``), Anthropic
Messages (``anthropic/…``), or the scripted provider speaking any of them. An
OpenAI-compatible server (``openai-compat/…``) and a plugin's client have no batch API.

An OpenAI batch's endpoint follows the client's protocol (Chat → ``/v1/chat/completions``,
Responses → ``/v1/responses``). ``submit`` splits the entries by the provider's limits
(OpenAI: 50 000 requests and 200 MB per input file; Anthropic: 100 000 requests and
256 MB per batch; ``limits`` overrides them). Per-entry ``x-agentbench-*`` headers go
to the scripted provider only, as the entry's ``agentbench_headers`` (docs/scripted.md).
What an outcome carries: ``models/batch_results.py``.

Errors: ProviderError / RateLimited (an HTTP error status, with the provider's message),
TransportError (no connection), BatchError (a batch that cannot be made or read); each
names the URL without credentials, never the key. Calls are retried (3 attempts in all)
on 429, 5xx and connection failures.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import field
from typing import Literal

import httpx

from pytest_agentbench.core.fastclass import dataclass
from pytest_agentbench.core.jsontypes import JsonObject, JsonValue
from pytest_agentbench.core.urls import public_url
from pytest_agentbench.errors import (
    RATE_LIMIT_STATUSES,
    ModelError,
    ProviderError,
    RateLimited,
    TransportError,
)
from pytest_agentbench.models.anthropic import AnthropicClient
from pytest_agentbench.models.base import ModelClient
from pytest_agentbench.models.http_replies import error_detail, retry_after_seconds
from pytest_agentbench.models.openai_chat import OpenAIChatClient
from pytest_agentbench.models.openai_responses import OpenAIResponsesClient
from pytest_agentbench.models.scripted import (
    ScriptedAnthropicClient,
    ScriptedClient,
    ScriptedResponsesClient,
)

#: What a ``custom_id`` may be: Anthropic's rule, which OpenAI's ids fit too.
CUSTOM_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
CALL_TIMEOUT_S = 60.0
UPLOAD_TIMEOUT_S = 600.0
ATTEMPTS = 3
#: Seconds before the 2nd and the 3rd attempt (unless the provider asks for longer).
RETRY_WAIT_S = (1.0, 4.0)
#: Statuses worth another attempt (rate limits and server errors).
RETRY_STATUSES = (*RATE_LIMIT_STATUSES, 500, 502, 503, 504)

Api = Literal["openai", "anthropic"]
AnyProtocol = OpenAIChatClient | OpenAIResponsesClient | AnthropicClient


class BatchError(ModelError):
    """A batch could not be made or read. ``batch_ids``: the batches already made when
    ``submit`` failed part-way (they run, and cost, whatever happens next)."""

    def __init__(self, message: str, *, endpoint: str = "", batch_ids: Sequence[str] = ()) -> None:
        super().__init__(message, endpoint=endpoint)
        self.batch_ids = tuple(batch_ids)


@dataclass(frozen=True)
class Limits:
    """How much one batch may hold: requests, and bytes of its input."""

    requests: int
    bytes: int


#: The providers' limits per batch (OpenAI: per input file), their MB read as 10**6
#: bytes: the smaller reading, so a split batch fits either way.
OPENAI_LIMITS = Limits(50_000, 200_000_000)
ANTHROPIC_LIMITS = Limits(100_000, 256_000_000 - 64)  # (less the {"requests":[…]} envelope)


@dataclass(frozen=True)
class BatchEntry:
    """One request for a batch. ``custom_id``: 1–64 of ``[A-Za-z0-9_-]``, unique in the
    submission; ``body``: the request body as sent live (``stream`` and
    ``stream_options`` are dropped); ``headers``: the request's own headers, of which only
    ``x-agentbench-*`` ones are sent, and only to the scripted provider."""

    custom_id: str
    body: Mapping[str, JsonValue]
    headers: Mapping[str, str] = field(default_factory=dict)


def _api(client: ModelClient) -> tuple[Api, AnyProtocol] | str:
    """The batch API a client's provider has, or why it has none."""
    if not isinstance(client, OpenAIChatClient | OpenAIResponsesClient | AnthropicClient):
        return (
            f"{client.spec.label}: {type(client).__name__} is not a built-in protocol client "
            "(pass the bare client, not a wrapper; a plugin's client has no batch API here)"
        )
    scripted = (ScriptedClient, ScriptedResponsesClient, ScriptedAnthropicClient)
    if client.spec.provider == "openai-compat" and not isinstance(client, scripted):
        return f"{client.spec.label}: an OpenAI-compatible server (openai-compat) has no batch API"
    if isinstance(client, AnthropicClient):
        return "anthropic", client
    return "openai", client


def batch_support(client: ModelClient) -> str | None:
    """None when the client's provider has a batch API, else why not."""
    found = _api(client)
    return found if isinstance(found, str) else None


def supported(client: ModelClient) -> tuple[Api, AnyProtocol]:
    """The client's batch API and protocol client; BatchError saying why it has none."""
    found = _api(client)
    if isinstance(found, str):
        raise BatchError(found)
    return found


def openai_root(client: AnyProtocol) -> str:
    """The OpenAI API root (``…/v1``) of a Chat or Responses client."""
    endpoint = client.endpoint
    for suffix in ("/chat/completions", "/responses"):
        if endpoint.endswith(suffix):
            return endpoint.removesuffix(suffix)
    return endpoint


def _batch_endpoint(client: AnyProtocol) -> str:
    return "/v1/responses" if isinstance(client, OpenAIResponsesClient) else "/v1/chat/completions"


def anthropic_batches(client: AnyProtocol) -> str:
    """The Message Batches URL of an Anthropic client."""
    return f"{client.endpoint}/batches"


def call_api(
    client: AnyProtocol,
    method: str,
    url: str,
    *,
    content: bytes | None = None,
    headers: Mapping[str, str] | None = None,
    timeout_s: float = CALL_TIMEOUT_S,
) -> httpx.Response:
    """One batch API call, retried on rate limits, server errors and failed connections."""
    public = public_url(url)
    label = client.spec.label
    error: ModelError | None = None
    for attempt in range(ATTEMPTS):
        if attempt and error is not None:
            time.sleep(min(max(error.retry_after or 0.0, RETRY_WAIT_S[attempt - 1]), 30.0))
        try:
            response = client.http.request(
                method, url, content=content, headers=headers, timeout=timeout_s
            )
        except httpx.HTTPError as exc:
            detail = " ".join(str(exc).split()) or type(exc).__name__
            error = TransportError(
                f"{label}: batch API: {method} {public} failed: {detail}", endpoint=public
            )
            if isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout):
                continue
            raise error from exc
        status = response.status_code
        if status < 400:
            return response
        detail = error_detail(response.text)
        kind = RateLimited if status in RATE_LIMIT_STATUSES else ProviderError
        error = kind(
            f"{label}: batch API: HTTP {status} from {method} {public}: {detail}",
            endpoint=public,
            status=status,
            detail=detail,
        )
        error.retry_after = retry_after_seconds(response.headers)
        if status not in RETRY_STATUSES:
            raise error
    assert error is not None
    raise error


def json_object(response: httpx.Response, what: str) -> JsonObject:
    """The JSON object a batch API call answered; BatchError naming ``what`` otherwise."""
    try:
        value: JsonValue = response.json()
    except ValueError:
        value = None
    if not isinstance(value, dict):
        public = public_url(str(response.request.url))
        raise BatchError(f"batch API: {what} from {public} is not a JSON object", endpoint=public)
    return value


def _check_entries(entries: Sequence[BatchEntry]) -> None:
    seen: set[str] = set()
    for index, entry in enumerate(entries):
        if not CUSTOM_ID.fullmatch(entry.custom_id):
            raise BatchError(
                f"batch entry {index}: custom_id {entry.custom_id!r} must be 1-64 characters "
                "of A-Z, a-z, 0-9, '_' and '-'"
            )
        if entry.custom_id in seen:
            raise BatchError(f"batch entry {index}: custom_id {entry.custom_id!r} is repeated")
        seen.add(entry.custom_id)


def _entry_json(entry: BatchEntry, api: Api, endpoint: str, scripted: bool) -> JsonObject:
    body = {k: v for k, v in entry.body.items() if k not in ("stream", "stream_options")}
    item: JsonObject = {"custom_id": entry.custom_id}
    if api == "openai":
        item.update(method="POST", url=endpoint, body=body)
    else:
        item["params"] = body
    if scripted:
        own = {
            name.lower(): value
            for name, value in entry.headers.items()
            if name.lower().startswith("x-agentbench-")
        }
        if own:
            item["agentbench_headers"] = dict[str, JsonValue](own)
    return item


def _chunks(items: list[bytes], limits: Limits) -> list[list[bytes]]:
    """``items`` (encoded entries) split so each chunk holds at most ``limits``."""
    chunks: list[list[bytes]] = []
    current: list[bytes] = []
    size = 0
    for item in items:
        cost = len(item) + 1
        if cost > limits.bytes:
            raise BatchError(
                f"a batch entry of {cost} bytes is larger than a whole batch may be "
                f"({limits.bytes} bytes)"
            )
        if current and (len(current) >= limits.requests or size + cost > limits.bytes):
            chunks.append(current)
            current, size = [], 0
        current.append(item)
        size += cost
    if current:
        chunks.append(current)
    return chunks


def submit(
    client: ModelClient,
    entries: Sequence[BatchEntry],
    *,
    metadata: Mapping[str, str] | None = None,
    limits: Limits | None = None,
) -> list[str]:
    """Send ``entries`` as one or more batches (split by ``limits``, default the
    provider's); their ids in order. ``metadata`` is attached to OpenAI batches."""
    api, protocol = supported(client)
    _check_entries(entries)
    limits = limits or (OPENAI_LIMITS if api == "openai" else ANTHROPIC_LIMITS)
    endpoint = _batch_endpoint(protocol)
    scripted = isinstance(
        protocol, ScriptedClient | ScriptedResponsesClient | ScriptedAnthropicClient
    )
    items = [
        json.dumps(_entry_json(entry, api, endpoint, scripted), ensure_ascii=False).encode()
        for entry in entries
    ]
    ids: list[str] = []
    for chunk in _chunks(items, limits):
        try:
            if api == "openai":
                ids.append(_openai_submit(protocol, chunk, endpoint, metadata))
            else:
                ids.append(_anthropic_submit(protocol, chunk))
        except ModelError as exc:
            if not ids:
                raise
            raise BatchError(
                f"{exc} (after {len(ids)} batch(es) were made: {', '.join(ids)})",
                endpoint=exc.endpoint,
                batch_ids=ids,
            ) from exc
    return ids


def _openai_submit(
    client: AnyProtocol, lines: list[bytes], endpoint: str, metadata: Mapping[str, str] | None
) -> str:
    root = openai_root(client)
    boundary = f"agentbench-{uuid.uuid4().hex}"
    data = b"\n".join(lines) + b"\n"
    form = (
        (
            f'--{boundary}\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nbatch\r\n'
            f'--{boundary}\r\nContent-Disposition: form-data; name="file"; '
            'filename="agentbench-batch.jsonl"\r\nContent-Type: application/jsonl\r\n\r\n'
        ).encode()
        + data
        + f"\r\n--{boundary}--\r\n".encode()
    )
    uploaded = call_api(
        client,
        "POST",
        f"{root}/files",
        content=form,
        headers={"content-type": f"multipart/form-data; boundary={boundary}"},
        timeout_s=UPLOAD_TIMEOUT_S,
    )
    file_id = json_object(uploaded, "the uploaded file").get("id")
    if not isinstance(file_id, str):
        raise BatchError(f"batch API: no file id from {public_url(root)}/files")
    body: JsonObject = {
        "input_file_id": file_id,
        "endpoint": endpoint,
        "completion_window": "24h",
    }
    if metadata:
        body["metadata"] = dict[str, JsonValue](metadata)
    created = call_api(client, "POST", f"{root}/batches", content=json.dumps(body).encode())
    batch_id = json_object(created, "the new batch").get("id")
    if not isinstance(batch_id, str):
        raise BatchError(f"batch API: no batch id from {public_url(root)}/batches")
    return batch_id


def _anthropic_submit(client: AnyProtocol, requests: list[bytes]) -> str:
    url = anthropic_batches(client)
    content = b'{"requests":[' + b",".join(requests) + b"]}"
    created = call_api(client, "POST", url, content=content, timeout_s=UPLOAD_TIMEOUT_S)
    batch_id = json_object(created, "the new batch").get("id")
    if not isinstance(batch_id, str):
        raise BatchError(f"batch API: no batch id from {public_url(url)}", endpoint=url)
    return batch_id
