"""The run's batch store (``--agentbench-batch``): what the providers' batch APIs answered
for the run's first-round requests, read by every process of the run.

One folder (in the folder the xdist controller shares with its workers) holds it:

* ``replies/``: each answered request's reply, keyed by the request's cache key (the key
  ``ProtocolClient._cache_key`` makes, epoch included), in the response cache's entry
  format (models/response_cache.py): a 2xx JSON body, written atomically;
* ``failed.json``: the requests that were planned but have no reply, with why (the
  entry failed, expired or was canceled at the provider; it was not submitted because
  it would pass the spending cap; the wait ran out);
* ``done.json``: written last, when the store is complete; its presence is what tells
  a process that waited for the lock that the batches are over.
* ``log.txt``: the lines the submitting process printed (submission, progress), which
  xdist's controller shows when a worker submits;
* ``lock``: taken by the process that submits (session/batch.py); the others wait on
  it, then read.

A client given the store (``ProtocolClient.batch``) answers a request whose key has a
reply the way a response cache hit is replayed; a request listed in ``failed.json`` is
sent live and its reply says why (``batch_live``).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path

from pytest_agentbench.core.jsontypes import JsonObject
from pytest_agentbench.models.response_cache import Recorded, ResponseCache

DONE = "done.json"
FAILED = "failed.json"
LOCK = "lock"


def _write_json(path: Path, data: JsonObject) -> None:
    fd, temp = tempfile.mkstemp(prefix=f".{path.name}-", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(data, handle, separators=(",", ":"))
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


class BatchStore:
    """The store in ``folder`` (made when missing); see the module docstring. After
    ``load`` it answers from memory: a process reads the folder once."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self._entries = ResponseCache(folder / "replies", "read-write")
        self.replies: dict[str, Recorded] = {}
        self.failures: dict[str, str] = {}

    @property
    def lock_path(self) -> Path:
        return self.folder / LOCK

    @property
    def done(self) -> bool:
        return (self.folder / DONE).is_file()

    def say(self, line: str) -> None:
        """Add a line to the store's log (``log.txt``: the xdist controller shows it)."""
        with open(self.folder / "log.txt", "a", encoding="utf-8") as handle:
            handle.write(line.replace("\n", " ") + "\n")

    def put_reply(self, key: str, recorded: Recorded, *, model: str, endpoint: str) -> None:
        self._entries.write(key, recorded, model=model, endpoint=endpoint)
        self.replies[key] = recorded

    def finish(self, failures: Mapping[str, str], summary: JsonObject) -> None:
        """Write why each request without a reply has none, then mark the store done."""
        self.failures.update(failures)
        _write_json(self.folder / FAILED, dict(self.failures))
        _write_json(self.folder / DONE, summary)

    def load(self) -> None:
        """Read every reply and the failures into memory."""
        try:
            failed = json.loads((self.folder / FAILED).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            failed = {}
        if isinstance(failed, dict):
            self.failures = {str(k): str(v) for k, v in failed.items()}
        for key in {path.stem for path in (self.folder / "replies").glob("*/*.json")}:
            found = self._entries.read(key)
            if found is not None:
                self.replies[key] = found

    def reply(self, key: str) -> Recorded | None:
        return self.replies.get(key)

    def failure(self, key: str) -> str | None:
        return self.failures.get(key)
