"""Which reply answers a request: the scripts a scripted server holds, and where each
conversation is in its script.

The script: the one a request names (header), else the one its ``model`` names, else the
default script. The turn: given by the request (``x-agentbench-turn``), else a counter
per script that advances on each new conversation state. Retries stay on their turn,
whoever makes them, as a provider sees them: the turn's errors (``Reply.error_at``) count
its attempts, and without a turn header a request identical to an earlier one that was
answered with an error is a retry of that turn. Past the end of a script its last reply
repeats.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Mapping

from pytest_agentbench.core.jsontypes import JsonValue
from pytest_agentbench.scripted.script import Reply


class ScriptBook:
    """Scripts by key, the default script, and the turn state; safe across threads.
    ``remember`` bounds how many retried turns are kept (the oldest are dropped)."""

    def __init__(self, remember: int = 1000) -> None:
        self._lock = threading.Lock()
        self._remember = remember
        self._scripts: dict[str, tuple[Reply, ...]] = {}
        self._default: tuple[Reply, ...] | None = None
        self._counters: dict[str | None, int] = {}
        self._attempts: dict[tuple[str | None, int], int] = {}
        self._retry_turns: dict[tuple[str | None, str], int] = {}

    def add_scripts(self, scripts: Mapping[str, tuple[Reply, ...]]) -> None:
        """Register or replace scripts; a replaced script restarts its turns only when its
        replies changed (every pytest-xdist worker posts the same scripts)."""
        with self._lock:
            for key, replies in scripts.items():
                if self._scripts.get(key) != replies:
                    self._forget(key)
                self._scripts[key] = replies

    def set_default(self, replies: tuple[Reply, ...] | None) -> None:
        """Set (or with None, remove) the script for requests that name no known key."""
        with self._lock:
            self._default = replies
            self._forget(None)

    def _forget(self, key: str | None) -> None:
        self._counters.pop(key, None)
        for seen in [k for k in self._attempts if k[0] == key]:
            del self._attempts[seen]
        for retry in [k for k in self._retry_turns if k[0] == key]:
            del self._retry_turns[retry]

    def keys(self) -> list[str]:
        with self._lock:
            return sorted(self._scripts)

    def _key(self, key: str | None, model: JsonValue) -> str | None:
        """The script key that answers (None: the default script)."""
        if key is None and isinstance(model, str) and model in self._scripts:
            key = model
        return key if key in self._scripts else None

    def script(self, key: str | None, model: JsonValue) -> tuple[Reply, ...]:
        """The replies of the script that would answer (empty when none matches)."""
        with self._lock:
            chosen = self._key(key, model)
            replies = self._scripts[chosen] if chosen is not None else self._default
            return replies or ()

    def peek(self, key: str | None, model: JsonValue, turn: int | None) -> Reply | None:
        """The reply that would answer at ``turn`` (else the script's next turn), without
        using the turn up; None when no script matches."""
        with self._lock:
            key = self._key(key, model)
            replies = self._scripts[key] if key is not None else self._default
            if replies is None:
                return None
            if turn is None:
                turn = self._counters.get(key, 0)
            return replies[min(turn, len(replies) - 1)]

    def pick(
        self, key: str | None, model: JsonValue, turn: int | None, request_id: str = ""
    ) -> tuple[str | None, int, Reply] | None:
        """The script key, turn and reply answering a request; None when no script
        matches. ``request_id`` fingerprints the request (path and body); without an
        explicit ``turn``, a request identical to one answered with an error retries
        that turn. The reply returned carries at most the one error answering this
        attempt. A truncated or hung reply is not an error answer: the next request,
        retry or not, moves on."""
        with self._lock:
            key = self._key(key, model)
            replies = self._scripts[key] if key is not None else self._default
            if replies is None:
                return None
            retry = (key, request_id) if turn is None and request_id else None
            if turn is None and retry is not None:
                turn = self._retry_turns.get(retry)
            if turn is None:
                turn = self._counters.get(key, 0)
                self._counters[key] = turn + 1
            reply = replies[min(turn, len(replies) - 1)]
            if reply.errors:
                seen = self._attempts.get((key, turn), 0)
                self._attempts[(key, turn)] = seen + 1
                error = reply.error_at(seen)
                reply = dataclasses.replace(reply, errors=(error,) if error else ())
            if retry is not None:
                self._retry_turns.pop(retry, None)
                if reply.error is not None:
                    self._retry_turns[retry] = turn
                    while len(self._retry_turns) > self._remember:
                        del self._retry_turns[next(iter(self._retry_turns))]
            return key, turn, reply
