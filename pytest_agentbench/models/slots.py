"""How many requests a local model server serves at once, when it says so.

llama.cpp's server lists its parallel slots at ``GET /slots`` (a JSON list, one entry per
slot). With no ``--agentbench-concurrency`` given, an ``openai-compat`` run sizes its
rollouts in flight from it. A missing, slow or odd endpoint never blocks a run: the probe
gives up after a short timeout and the default stands.
"""

from __future__ import annotations

import httpx

from pytest_agentbench.core.jsontypes import JsonValue
from pytest_agentbench.models.plain_http import PlainHTTPTransport

PROBE_TIMEOUT_S = 2.0
MAX_SLOTS = 256


def probe_slots(base_url: str, timeout_s: float = PROBE_TIMEOUT_S) -> int | None:
    """The server's slot count, or None when it does not report one. Never raises."""
    root = base_url.rstrip("/").removesuffix("/v1")
    # a plain-HTTP server (the local ones that have slots) is asked on plain sockets
    # (models/plain_http.py): no CA bundle loaded (it was ~40 ms of a one-task run's
    # start-up), no httpcore imported
    transport = PlainHTTPTransport() if root.startswith("http://") else None
    try:
        with httpx.Client(timeout=timeout_s, trust_env=False, transport=transport) as client:
            response = client.get(f"{root}/slots")
            if response.status_code != 200:
                return None
            data: JsonValue = response.json()
    except (httpx.HTTPError, ValueError):
        return None
    if isinstance(data, dict):
        data = data.get("slots")
    if isinstance(data, list) and 0 < len(data) <= MAX_SLOTS:
        return len(data)
    return None
