"""How many requests a local model server serves at once, when it says so.

llama.cpp's server lists its parallel slots at ``GET /slots`` (a JSON list, one entry per
slot). With no ``--agentbench-concurrency`` given, an ``openai-compat`` run sizes its
rollouts in flight from it. A missing, slow or odd endpoint never blocks a run: the probe
gives up after a short timeout and the default stands.
"""

from __future__ import annotations

from pytest_agentbench.core.jsontypes import JsonValue
from pytest_agentbench.models.connections import BASE_HEADERS
from pytest_agentbench.models.plain_http import PlainHTTPTransport
from pytest_agentbench.models.wire import Target, Timeout, WireError

PROBE_TIMEOUT_S = 2.0
MAX_SLOTS = 256


def probe_slots(base_url: str, timeout_s: float = PROBE_TIMEOUT_S) -> int | None:
    """The server's slot count, or None when it does not report one. Never raises."""
    root = base_url.rstrip("/").removesuffix("/v1")
    try:
        data = _slots(f"{root}/slots", timeout_s)
    except (WireError, ValueError):
        return None
    if isinstance(data, dict):
        data = data.get("slots")
    if isinstance(data, list) and 0 < len(data) <= MAX_SLOTS:
        return len(data)
    return None


def _slots(url: str, timeout_s: float) -> JsonValue:
    """What ``GET url`` answered, as JSON; None for a status other than 200."""
    target = Target(url)
    if target.scheme != "http" or target.credentials:
        return _slots_over_httpx(url, timeout_s)
    # a plain-HTTP server (the local ones that have slots) is asked on plain sockets
    # (models/plain_http.py): no CA bundle loaded (it was ~40 ms of a one-task run's
    # start-up), nor httpx imported
    transport = PlainHTTPTransport()
    try:
        timeout = Timeout(connect=timeout_s, read=timeout_s, write=timeout_s, pool=timeout_s)
        response = transport.send("GET", target, BASE_HEADERS, b"", timeout)
        try:
            return response.json() if response.status_code == 200 else None
        finally:
            response.close()
    finally:
        transport.close()


def _slots_over_httpx(url: str, timeout_s: float) -> JsonValue:
    import httpx

    try:
        with httpx.Client(timeout=timeout_s, trust_env=False) as client:
            response = client.get(url)
            if response.status_code != 200:
                return None
            data: JsonValue = response.json()
            return data
    except httpx.HTTPError:
        return None
