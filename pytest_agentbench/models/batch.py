"""Provider batch APIs, the client side: OpenAI's Files + Batch API and Anthropic's
Message Batches, spoken over the protocol client's own HTTP client, base URL and key.

The interface (what the run side calls)::

    batch_support(client) -> str | None        None: the client's provider has a batch API
    submit(client, entries, *, metadata=None, limits=None) -> list[str]   batch ids
    status(client, batch_id) -> BatchStatus
    results(client, batch_id) -> list[BatchOutcome]     the batch must have ended
    cancel(client, batch_id) -> None
    wait(client, batch_ids, *, poll_s, timeout_s=None, on_progress=None, expected=(),
         sleep=time.sleep) -> list[BatchOutcome]

``client`` is a bare built-in protocol client (not a retrying or limiting wrapper):
OpenAI Chat Completions or Responses (``openai/…``, ``openai-responses/…``), Anthropic
Messages (``anthropic/…``), or the scripted provider speaking any of them. An
OpenAI-compatible server (``openai-compat/…``) and a plugin's client have no batch API.

An OpenAI batch's endpoint follows the client's protocol (Chat → ``/v1/chat/completions``,
Responses → ``/v1/responses``). ``submit`` splits the entries by the provider's limits
(OpenAI: 50 000 requests and 200 MB per input file; Anthropic: 100 000 requests and
256 MB per batch; ``limits`` overrides them). Every outcome carries either ``recorded``
(the reply as a live unstreamed request would have received it: HTTP 200, JSON, the body
bytes; ``models/response_cache.Recorded``) or ``failure``: ``errored: <why>``,
``expired``, ``canceled``, ``timed out: …`` (``wait``'s timeout) or ``missing from the
results``. Per-entry ``x-agentbench-*`` headers go to the scripted provider only, as the
entry's ``agentbench_headers`` (docs/scripted.md).

Errors: ProviderError / RateLimited (an HTTP error status, with the provider's message),
TransportError (no connection), BatchError (a batch that cannot be made or read); each
names the URL without credentials, never the key. Calls are retried (3 attempts in all)
on 429, 5xx and connection failures.
"""

from __future__ import annotations

import contextlib
import json
import re
import time
import uuid
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

import httpx

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
from pytest_agentbench.models.response_cache import Recorded
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
#: How many polling rounds in a row may fail for a passing reason before ``wait`` gives up.
READ_FAILURES = 5
#: Statuses worth another attempt (rate limits and server errors).
RETRY_STATUSES = (*RATE_LIMIT_STATUSES, 500, 502, 503, 504)
_OPENAI_ENDED = ("completed", "failed", "expired", "cancelled")

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


@dataclass(frozen=True)
class BatchOutcome:
    """How one entry ended: ``recorded`` (the reply, as a live unstreamed request would
    have received it) or ``failure`` (why not)."""

    custom_id: str
    recorded: Recorded | None = None
    failure: str | None = None


@dataclass(frozen=True)
class BatchStatus:
    """A batch's state: the provider's status word, whether it has ended, and its
    request counts as the provider names them."""

    batch_id: str
    status: str
    ended: bool
    counts: Mapping[str, int]
    total: int


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


def _supported(client: ModelClient) -> tuple[Api, AnyProtocol]:
    found = _api(client)
    if isinstance(found, str):
        raise BatchError(found)
    return found


def _openai_root(client: AnyProtocol) -> str:
    """The OpenAI API root (``…/v1``) of a Chat or Responses client."""
    endpoint = client.endpoint
    for suffix in ("/chat/completions", "/responses"):
        if endpoint.endswith(suffix):
            return endpoint.removesuffix(suffix)
    return endpoint


def _batch_endpoint(client: AnyProtocol) -> str:
    return "/v1/responses" if isinstance(client, OpenAIResponsesClient) else "/v1/chat/completions"


def _anthropic_batches(client: AnyProtocol) -> str:
    return f"{client.endpoint}/batches"


def _call(
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


def _json_object(response: httpx.Response, what: str) -> JsonObject:
    try:
        value: JsonValue = response.json()
    except ValueError:
        value = None
    if not isinstance(value, dict):
        public = public_url(str(response.request.url))
        raise BatchError(f"batch API: {what} from {public} is not a JSON object", endpoint=public)
    return value


def _jsonl(data: bytes) -> list[JsonObject]:
    """The JSON objects of a JSONL file (lines that are not one are skipped: their entries
    are reported missing)."""
    found: list[JsonObject] = []
    for line in data.splitlines():
        if not line.strip():
            continue
        try:
            value: JsonValue = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            found.append(value)
    return found


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
    api, protocol = _supported(client)
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
    root = _openai_root(client)
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
    uploaded = _call(
        client,
        "POST",
        f"{root}/files",
        content=form,
        headers={"content-type": f"multipart/form-data; boundary={boundary}"},
        timeout_s=UPLOAD_TIMEOUT_S,
    )
    file_id = _json_object(uploaded, "the uploaded file").get("id")
    if not isinstance(file_id, str):
        raise BatchError(f"batch API: no file id from {public_url(root)}/files")
    body: JsonObject = {
        "input_file_id": file_id,
        "endpoint": endpoint,
        "completion_window": "24h",
    }
    if metadata:
        body["metadata"] = dict[str, JsonValue](metadata)
    created = _call(client, "POST", f"{root}/batches", content=json.dumps(body).encode())
    batch_id = _json_object(created, "the new batch").get("id")
    if not isinstance(batch_id, str):
        raise BatchError(f"batch API: no batch id from {public_url(root)}/batches")
    return batch_id


def _anthropic_submit(client: AnyProtocol, requests: list[bytes]) -> str:
    url = _anthropic_batches(client)
    content = b'{"requests":[' + b",".join(requests) + b"]}"
    created = _call(client, "POST", url, content=content, timeout_s=UPLOAD_TIMEOUT_S)
    batch_id = _json_object(created, "the new batch").get("id")
    if not isinstance(batch_id, str):
        raise BatchError(f"batch API: no batch id from {public_url(url)}", endpoint=url)
    return batch_id


def _batch_url(api: Api, client: AnyProtocol, batch_id: str) -> str:
    if api == "openai":
        return f"{_openai_root(client)}/batches/{batch_id}"
    return f"{_anthropic_batches(client)}/{batch_id}"


def _read_batch(api: Api, client: AnyProtocol, batch_id: str) -> JsonObject:
    return _json_object(_call(client, "GET", _batch_url(api, client, batch_id)), "the batch")


def _counts(batch: JsonObject) -> dict[str, int]:
    counts = batch.get("request_counts")
    if not isinstance(counts, dict):
        return {}
    return {k: v for k, v in counts.items() if isinstance(v, int) and not isinstance(v, bool)}


def _status_of(api: Api, batch_id: str, batch: JsonObject) -> BatchStatus:
    counts = _counts(batch)
    if api == "openai":
        word = str(batch.get("status"))
        return BatchStatus(batch_id, word, word in _OPENAI_ENDED, counts, counts.get("total", 0))
    word = str(batch.get("processing_status"))
    return BatchStatus(batch_id, word, word == "ended", counts, sum(counts.values()))


def status(client: ModelClient, batch_id: str) -> BatchStatus:
    """The batch's state now (one read of it)."""
    api, protocol = _supported(client)
    return _status_of(api, batch_id, _read_batch(api, protocol, batch_id))


def cancel(client: ModelClient, batch_id: str) -> None:
    """Ask the provider to cancel the batch (entries not yet answered end ``canceled``)."""
    api, protocol = _supported(client)
    _call(protocol, "POST", f"{_batch_url(api, protocol, batch_id)}/cancel")


def _recorded(body: JsonObject) -> Recorded:
    return Recorded(200, "application/json", "", json.dumps(body, ensure_ascii=False).encode())


def _error_words(body: JsonValue) -> str:
    """``<type>: <message>`` of a provider error body (OpenAI's or Anthropic's)."""
    if isinstance(body, dict) and isinstance(inner := body.get("error"), dict):
        kind = inner.get("type") or inner.get("code") or "error"
        return f"{kind}: {inner.get('message') or '(no message)'}"
    return "(no error body)"


def _openai_outcome(line: JsonObject) -> BatchOutcome | None:
    custom_id = line.get("custom_id")
    if not isinstance(custom_id, str):
        return None
    response = line.get("response")
    error = line.get("error")
    if isinstance(response, dict):
        code = response.get("status_code")
        body = response.get("body")
        if code == 200 and isinstance(body, dict):
            return BatchOutcome(custom_id, recorded=_recorded(body))
        return BatchOutcome(custom_id, failure=f"errored: HTTP {code}: {_error_words(body)}")
    if isinstance(error, dict):
        code = error.get("code")
        if code == "batch_expired":
            return BatchOutcome(custom_id, failure="expired")
        if code == "batch_cancelled":
            return BatchOutcome(custom_id, failure="canceled")
        return BatchOutcome(custom_id, failure=f"errored: {code}: {error.get('message')}")
    return BatchOutcome(
        custom_id, failure="errored: an output line with neither response nor error"
    )


def _openai_missing(batch: JsonObject) -> str:
    """Why an entry of an ended OpenAI batch has no output line."""
    word = batch.get("status")
    if word == "expired":
        return "expired"
    if word == "cancelled":
        return "canceled"
    if word == "failed":
        errors = batch.get("errors")
        data = errors.get("data") if isinstance(errors, dict) else None
        found = [e for e in data if isinstance(e, dict)] if isinstance(data, list) else []
        said = "; ".join(
            f"line {e.get('line')}: {e.get('message')}" if e.get("line") else str(e.get("message"))
            for e in found[:3]
        )
        return f"errored: the batch failed: {said or 'no reason given'}"
    return "missing from the results"


def _file(client: AnyProtocol, file_id: JsonValue) -> bytes:
    if not isinstance(file_id, str) or not file_id:
        return b""
    response = _call(
        client, "GET", f"{_openai_root(client)}/files/{file_id}/content", timeout_s=UPLOAD_TIMEOUT_S
    )
    return response.content


def _openai_results(client: AnyProtocol, batch_id: str, batch: JsonObject) -> list[BatchOutcome]:
    outcomes: dict[str, BatchOutcome] = {}
    for file_id in (batch.get("output_file_id"), batch.get("error_file_id")):
        for line in _jsonl(_file(client, file_id)):
            outcome = _openai_outcome(line)
            if outcome is not None:
                outcomes.setdefault(outcome.custom_id, outcome)
    total = _counts(batch).get("total")
    if batch.get("status") != "completed" or total != len(outcomes):
        # some entries have no line: the input file says which were sent
        why = _openai_missing(batch)
        for line in _jsonl(_file(client, batch.get("input_file_id"))):
            custom_id = line.get("custom_id")
            if isinstance(custom_id, str) and custom_id not in outcomes:
                outcomes[custom_id] = BatchOutcome(custom_id, failure=why)
    return list(outcomes.values())


def _anthropic_outcome(line: JsonObject) -> BatchOutcome | None:
    custom_id = line.get("custom_id")
    result = line.get("result")
    if not isinstance(custom_id, str) or not isinstance(result, dict):
        return None
    kind = result.get("type")
    message = result.get("message")
    if kind == "succeeded" and isinstance(message, dict):
        return BatchOutcome(custom_id, recorded=_recorded(message))
    if kind == "errored":
        return BatchOutcome(custom_id, failure=f"errored: {_error_words(result.get('error'))}")
    if kind in ("expired", "canceled"):
        return BatchOutcome(custom_id, failure=str(kind))
    return BatchOutcome(custom_id, failure=f"errored: an unknown result type {kind!r}")


def _anthropic_results(client: AnyProtocol, batch_id: str, batch: JsonObject) -> list[BatchOutcome]:
    own = f"{_anthropic_batches(client)}/{batch_id}/results"
    url = batch.get("results_url")
    # the key goes only where the client's own requests go
    if not isinstance(url, str) or httpx.URL(url).netloc != httpx.URL(own).netloc:
        url = own
    response = _call(client, "GET", url, timeout_s=UPLOAD_TIMEOUT_S)
    outcomes: dict[str, BatchOutcome] = {}
    for line in _jsonl(response.content):
        outcome = _anthropic_outcome(line)
        if outcome is not None:
            outcomes.setdefault(outcome.custom_id, outcome)
    return list(outcomes.values())


def results(client: ModelClient, batch_id: str) -> list[BatchOutcome]:
    """Every entry's outcome of an ended batch (BatchError when it has not ended)."""
    api, protocol = _supported(client)
    batch = _read_batch(api, protocol, batch_id)
    return _results(api, protocol, batch_id, batch)


def _results(
    api: Api, protocol: AnyProtocol, batch_id: str, batch: JsonObject
) -> list[BatchOutcome]:
    state = _status_of(api, batch_id, batch)
    if not state.ended:
        url = public_url(_batch_url(api, protocol, batch_id))
        raise BatchError(
            f"{protocol.spec.label}: batch {batch_id} has not ended (status {state.status}): "
            "no results yet",
            endpoint=url,
        )
    if api == "openai":
        return _openai_results(protocol, batch_id, batch)
    return _anthropic_results(protocol, batch_id, batch)


def wait(
    client: ModelClient,
    batch_ids: Sequence[str],
    *,
    poll_s: float,
    timeout_s: float | None = None,
    on_progress: Callable[[Sequence[BatchStatus]], None] | None = None,
    expected: Collection[str] = (),
    sleep: Callable[[float], object] = time.sleep,
) -> list[BatchOutcome]:
    """Poll the batches (every ``poll_s`` seconds) until all have ended, and return every
    entry's outcome. ``on_progress`` hears, each round, the latest state of every batch
    (an ended one keeps its last). A round whose reads fail for a passing reason (a
    lost connection, a 429 or 5xx, after their retries) is waited out, up to
    ``READ_FAILURES`` rounds in a row; any other failure is raised. Past ``timeout_s``
    the batches still running are cancelled and not waited for: their entries (when
    ``expected`` names them) end ``timed out: …``. Every id of ``expected`` gets an
    outcome: one no batch reported is ``missing from the results``."""
    api, protocol = _supported(client)
    pending = list(dict.fromkeys(batch_ids))
    latest: dict[str, BatchStatus] = {}
    outcomes: dict[str, BatchOutcome] = {}
    started = time.monotonic()
    timed_out = False
    failed_rounds = 0
    while pending:
        try:
            for batch_id in list(pending):
                batch = _read_batch(api, protocol, batch_id)
                state = _status_of(api, batch_id, batch)
                if state.ended:
                    for outcome in _results(api, protocol, batch_id, batch):
                        outcomes.setdefault(outcome.custom_id, outcome)
                    pending.remove(batch_id)
                latest[batch_id] = state
            failed_rounds = 0
        except (TransportError, RateLimited, ProviderError) as exc:
            passing = not isinstance(exc, ProviderError) or exc.status in RETRY_STATUSES
            failed_rounds += 1
            if not passing or failed_rounds >= READ_FAILURES:
                raise
        if on_progress is not None:
            on_progress([latest[b] for b in dict.fromkeys(batch_ids) if b in latest])
        if not pending:
            break
        if timeout_s is not None and time.monotonic() - started >= timeout_s:
            for batch_id in pending:
                # (ended meanwhile, or unreachable: its entries go live either way)
                with contextlib.suppress(ModelError):
                    cancel(client, batch_id)
            timed_out = True
            break
        sleep(poll_s)
    missing = "missing from the results"
    if timed_out:
        missing = f"timed out: the batch did not end within {timeout_s:g} s (canceled)"
    for custom_id in expected:
        if custom_id not in outcomes:
            outcomes[custom_id] = BatchOutcome(custom_id, failure=missing)
    return list(outcomes.values())
