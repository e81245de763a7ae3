"""Provider batch APIs, the collecting side: a batch's state, the answers of an ended
batch, and the wait for a set of batches (``models/batch.py`` makes them; its docstring
lists the whole interface and the errors).

Every outcome carries either ``recorded`` (the reply as a live unstreamed request would
have received it: HTTP 200, JSON, the body bytes; ``models/response_cache.Recorded``) or
``failure``: ``errored: <why>``, ``expired``, ``canceled``, ``timed out: …`` (``wait``'s
timeout) or ``missing from the results``. An Anthropic batch's ``results_url`` is read
only on the client's own host: the key goes nowhere else.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Collection, Mapping, Sequence

import httpx

from pytest_agentbench.core.fastclass import dataclass
from pytest_agentbench.core.jsontypes import JsonObject, JsonValue
from pytest_agentbench.core.urls import public_url
from pytest_agentbench.errors import ModelError, ProviderError, RateLimited, TransportError
from pytest_agentbench.models.base import ModelClient
from pytest_agentbench.models.batch import (
    RETRY_STATUSES,
    UPLOAD_TIMEOUT_S,
    AnyProtocol,
    Api,
    BatchError,
    anthropic_batches,
    call_api,
    json_object,
    openai_root,
    supported,
)
from pytest_agentbench.models.response_cache import Recorded

#: How many polling rounds in a row may fail for a passing reason before ``wait`` gives up.
READ_FAILURES = 5
_OPENAI_ENDED = ("completed", "failed", "expired", "cancelled")


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


def _batch_url(api: Api, client: AnyProtocol, batch_id: str) -> str:
    if api == "openai":
        return f"{openai_root(client)}/batches/{batch_id}"
    return f"{anthropic_batches(client)}/{batch_id}"


def _read_batch(api: Api, client: AnyProtocol, batch_id: str) -> JsonObject:
    return json_object(call_api(client, "GET", _batch_url(api, client, batch_id)), "the batch")


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
    api, protocol = supported(client)
    return _status_of(api, batch_id, _read_batch(api, protocol, batch_id))


def cancel(client: ModelClient, batch_id: str) -> None:
    """Ask the provider to cancel the batch (entries not yet answered end ``canceled``)."""
    api, protocol = supported(client)
    call_api(protocol, "POST", f"{_batch_url(api, protocol, batch_id)}/cancel")


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


def _file(client: AnyProtocol, file_id: JsonValue) -> bytes:
    if not isinstance(file_id, str) or not file_id:
        return b""
    response = call_api(
        client, "GET", f"{openai_root(client)}/files/{file_id}/content", timeout_s=UPLOAD_TIMEOUT_S
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
    own = f"{anthropic_batches(client)}/{batch_id}/results"
    url = batch.get("results_url")
    # the key goes only where the client's own requests go
    if not isinstance(url, str) or httpx.URL(url).netloc != httpx.URL(own).netloc:
        url = own
    response = call_api(client, "GET", url, timeout_s=UPLOAD_TIMEOUT_S)
    outcomes: dict[str, BatchOutcome] = {}
    for line in _jsonl(response.content):
        outcome = _anthropic_outcome(line)
        if outcome is not None:
            outcomes.setdefault(outcome.custom_id, outcome)
    return list(outcomes.values())


def results(client: ModelClient, batch_id: str) -> list[BatchOutcome]:
    """Every entry's outcome of an ended batch (BatchError when it has not ended)."""
    api, protocol = supported(client)
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
    api, protocol = supported(client)
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
