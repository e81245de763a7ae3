"""The response cache (``--agentbench-cache [DIR]``): a request identical to one already
answered is answered from the recorded reply, not sent.

A request's key is a SHA-256 of everything that decides its answer: the client's
protocol, the endpoint without credentials (its path names the protocol, its host the
provider), the request body exactly as it would be sent (model, messages, tools, every
sampling setting, the seed, max_tokens, streaming or not), the headers that change an
answer (``anthropic-version``, ``anthropic-beta``, ``openai-beta``, and the scripted
provider's script and turn), and the task's epoch (so the K epochs of a task stay K
samples). Nothing else: the API key, the user agent and the timing are not part of it.

An entry holds the reply as it came off the wire (status, content type and encoding, the
body bytes), so a hit is replayed through the same client path as a live reply: the
stream parser, the loop watch, usage and the records see the same bytes. Only complete
replies with a 2xx status are written (an error, a broken stream or a loop-killed one is
sent again next time). Entries hold no key or credential (the request's headers are not
stored, only hashed), are written atomically (a temporary file and a rename), and an
entry that cannot be read is a miss with a warning, never a crash: several runs and
xdist workers may share one folder.

Modes: ``read-write`` (the default: replay hits, record misses), ``read`` (replay hits,
record nothing), ``write`` (send everything, record what is not recorded yet),
``refresh`` (send everything, record it over the old entries).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import tempfile
import time
import warnings
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Literal, get_args

from pytest_agentbench.core.fastclass import dataclass
from pytest_agentbench.core.jsontypes import JsonObject, JsonValue
from pytest_agentbench.models.wire import BytesBody, ByteStream, Headers, Response

CacheMode = Literal["read-write", "read", "write", "refresh"]
CACHE_MODES: tuple[CacheMode, ...] = get_args(CacheMode)
DEFAULT_DIR = ".agentbench-cache"
ENTRY_VERSION = 1
#: Request headers that change what a provider answers (lower case); nothing else is
#: part of the key, and none of these ever holds a credential.
KEY_HEADERS = (
    "anthropic-version",
    "anthropic-beta",
    "openai-beta",
    "x-agentbench-script",
    "x-agentbench-turn",
)


@dataclass(frozen=True, slots=True)
class Recorded:
    """A reply as it came off the wire."""

    status: int
    content_type: str
    content_encoding: str
    body: bytes

    def response(self) -> Response:
        """The reply as a response (models/wire.py), to be read like a live one."""
        headers = [("content-type", self.content_type)]
        if self.content_encoding:
            headers.append(("content-encoding", self.content_encoding))
        return Response(self.status, Headers(headers), BytesBody(self.body))


class Tee:
    """A response stream that keeps a copy of every chunk read from it."""

    def __init__(self, inner: ByteStream) -> None:
        self.inner = inner
        self.chunks: list[bytes] = []

    def __iter__(self) -> Iterator[bytes]:
        for chunk in self.inner:
            self.chunks.append(chunk)
            yield chunk

    def close(self) -> None:
        self.inner.close()


def request_key(
    *,
    protocol: str,
    endpoint: str,
    body: Mapping[str, JsonValue],
    headers: Mapping[str, str],
    epoch: str | None,
) -> str:
    """The cache key of a request (module docstring)."""
    material: JsonObject = {
        "v": ENTRY_VERSION,
        "protocol": protocol,
        "endpoint": endpoint,
        "body": dict(body),
        "headers": {k.lower(): v for k, v in headers.items() if k.lower() in KEY_HEADERS},
        "epoch": epoch,
    }
    blob = json.dumps(material, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()


class ResponseCache:
    """One cache folder in one mode; thread-safe (no state but the files)."""

    def __init__(self, folder: Path, mode: CacheMode = "read-write") -> None:
        self.folder = folder
        self.mode: CacheMode = mode

    @property
    def reads(self) -> bool:
        return self.mode in ("read-write", "read")

    @property
    def writes(self) -> bool:
        return self.mode != "read"

    def path(self, key: str) -> Path:
        return self.folder / key[:2] / f"{key}.json"

    def read(self, key: str) -> Recorded | None:
        """The recorded reply for ``key``; None for a miss (nothing recorded, the mode
        does not read, or an entry that cannot be read: then with a warning)."""
        if not self.reads:
            return None
        path = self.path(key)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        except OSError as exc:
            _warn(path, str(exc))
            return None
        try:
            data = json.loads(text)
            if not isinstance(data, dict) or data.get("v") != ENTRY_VERSION:
                raise ValueError("not a cache entry of this version")
            status, body = data["status"], base64.b64decode(data["body"], validate=True)
            if not isinstance(status, int) or not 200 <= status < 300:
                raise ValueError(f"status {status!r}")
            return Recorded(
                status, str(data["content_type"]), str(data.get("content_encoding") or ""), body
            )
        except (ValueError, KeyError, TypeError) as exc:
            _warn(path, str(exc))
            return None

    def write(self, key: str, recorded: Recorded, *, model: str, endpoint: str) -> None:
        """Record ``recorded`` for ``key`` atomically (``write`` keeps an entry that is
        there already, ``refresh`` replaces it). A failure to write is a warning: the run
        has its reply either way."""
        if not self.writes or not 200 <= recorded.status < 300:
            return
        path = self.path(key)
        if self.mode == "write" and path.exists():
            return
        entry: JsonObject = {
            "v": ENTRY_VERSION,
            "created": round(time.time(), 3),
            "model": model,
            "endpoint": endpoint,
            "status": recorded.status,
            "content_type": recorded.content_type,
            "content_encoding": recorded.content_encoding,
            "body": base64.b64encode(recorded.body).decode("ascii"),
        }
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, temp = tempfile.mkstemp(prefix=".entry-", dir=path.parent)
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as handle:
                    json.dump(entry, handle, separators=(",", ":"))
                os.replace(temp, path)
            except BaseException:
                Path(temp).unlink(missing_ok=True)
                raise
        except OSError as exc:
            warnings.warn(
                f"agentbench cache: could not record an entry in {self.folder}: {exc}",
                stacklevel=2,
            )


def _warn(path: Path, why: str) -> None:
    warnings.warn(
        f"agentbench cache: {path} cannot be read ({why}); the request is sent instead",
        stacklevel=3,
    )


@dataclass(frozen=True, slots=True)
class CacheStats:
    """What a cache folder holds: entries, bytes, and the oldest entry's age."""

    entries: int
    size: int
    oldest_s: float | None


def entries(folder: Path) -> list[tuple[Path, os.stat_result]]:
    """Every entry of ``folder`` with its stat, oldest first."""
    found = []
    for path in folder.glob("*/*.json"):
        try:
            found.append((path, path.stat()))
        except OSError:
            continue
    found.sort(key=lambda item: item[1].st_mtime)
    return found


def cache_stats(folder: Path) -> CacheStats:
    found = entries(folder)
    oldest = time.time() - found[0][1].st_mtime if found else None
    return CacheStats(len(found), sum(st.st_size for _, st in found), oldest)


def prune(folder: Path, *, max_age_s: float | None = None, max_bytes: int | None = None) -> int:
    """Remove entries older than ``max_age_s``, then the oldest until the folder holds at
    most ``max_bytes``; how many were removed."""
    found = entries(folder)
    now = time.time()
    removed = 0
    size = sum(st.st_size for _, st in found)
    for path, st in found:
        old = max_age_s is not None and now - st.st_mtime > max_age_s
        big = max_bytes is not None and size > max_bytes
        if not (old or big):
            continue
        try:
            path.unlink()
        except OSError:
            continue
        removed += 1
        size -= st.st_size
    return removed
