"""HTTP pieces every model client shares: deadlines, Retry-After, error messages, URLs."""

from __future__ import annotations

import contextlib
import email.utils
import json
import socket
import threading
import time
from collections.abc import Mapping
from urllib.parse import urlsplit, urlunsplit

import httpx

CONNECT_TIMEOUT_S = 10.0
RATE_LIMIT_STATUSES = (429, 529)
ERROR_BODY_LIMIT = 65536
DETAIL_LIMIT = 300


def public_url(url: str) -> str:
    """The URL without user:password, fit for messages and artifacts."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))


def retry_after_seconds(headers: httpx.Headers) -> float | None:
    """Seconds the server asks us to wait (``retry-after-ms``, ``Retry-After`` as seconds or
    an HTTP date); None when it did not say."""
    millis = headers.get("retry-after-ms")
    if millis is not None:
        try:
            return max(float(millis) / 1000, 0.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(when.timestamp() - time.time(), 0.0)


def error_detail(text: str) -> str:
    """The provider's own error message when the body has one, else the body; one line."""
    detail = text
    try:
        body = json.loads(text)
    except ValueError:
        body = None
    if isinstance(body, Mapping):
        error = body.get("error")
        if isinstance(error, Mapping) and error.get("message"):
            detail = str(error["message"])
        elif isinstance(error, str):
            detail = error
        elif body.get("message"):
            detail = str(body["message"])
        elif body.get("detail"):
            detail = str(body["detail"])
    detail = " ".join(detail.split()) or "(empty body)"
    return detail if len(detail) <= DETAIL_LIMIT else detail[: DETAIL_LIMIT - 1] + "…"


class Watchdog:
    """Shuts the response's socket at the deadline, unblocking a read stuck in recv."""

    def __init__(self, deadline: float | None) -> None:
        self.deadline = deadline
        self.fired = False
        self._lock = threading.Lock()
        self._finished = False
        self._socket: socket.socket | None = None
        self._timer: threading.Timer | None = None

    def arm(self, response: httpx.Response) -> None:
        stream = response.extensions.get("network_stream")
        sock = stream.get_extra_info("socket") if stream is not None else None
        if self.deadline is None or not isinstance(sock, socket.socket):
            return
        self._socket = sock
        self._timer = threading.Timer(max(self.deadline - time.monotonic(), 0.0), self._fire)
        self._timer.daemon = True
        self._timer.start()

    def _fire(self) -> None:
        with self._lock:
            if self._finished or self._socket is None:
                return
            self.fired = True
            with contextlib.suppress(OSError):
                self._socket.shutdown(socket.SHUT_RDWR)

    def finish(self) -> None:
        with self._lock:
            self._finished = True
        if self._timer is not None:
            self._timer.cancel()


def timeout_for(deadline: float | None) -> httpx.Timeout:
    """httpx timeouts for a request that must finish by ``deadline`` (monotonic)."""
    if deadline is None:
        return httpx.Timeout(None, connect=CONNECT_TIMEOUT_S)
    remaining = max(deadline - time.monotonic(), 0.001)
    return httpx.Timeout(remaining, connect=min(CONNECT_TIMEOUT_S, remaining))
