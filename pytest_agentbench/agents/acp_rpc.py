"""JSON-RPC 2.0 over two byte streams, one message a line: the connection under our ACP
client (agents/acp.py), which adds what the messages mean.

Requests are sent and their answers awaited until a deadline; a reader thread reads the
other side's lines and hands each request and notification to the subclass
(``_on_request``, ``_on_notification``); what is not JSON-RPC is a protocol error, kept
(``_record``). When the other side's output ends, every waiting request learns so.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import field
from typing import IO

from pytest_agentbench.core.fastclass import dataclass
from pytest_agentbench.core.jsontypes import JsonObject, JsonValue
from pytest_agentbench.errors import AgentbenchError

#: One message line at most (a bigger one is a protocol error, not a memory problem).
MAX_LINE_BYTES = 16 * 1024 * 1024


class AcpError(AgentbenchError):
    """The ACP conversation failed: the agent exited, answered with an error, sent
    something that is not JSON-RPC, or did not answer in time."""


class AcpTimeout(AcpError):
    """The agent did not answer before the deadline (a prompt: not even once cancelled)."""


@dataclass
class _Pending:
    done: threading.Event = field(default_factory=threading.Event)
    reply: JsonObject | None = None


class JsonRpcConnection:
    """One JSON-RPC connection: ``agent_in`` is the other side's stdin, ``agent_out``
    its stdout."""

    def __init__(self, agent_in: IO[bytes], agent_out: IO[bytes]) -> None:
        self._in = agent_in
        self._out = agent_out
        self._write_lock = threading.Lock()
        self._lock = threading.Lock()
        self._next_id = 0
        self._pending: dict[int, _Pending] = {}
        self._closed: str | None = None  # why the agent's output ended
        self._reader: threading.Thread | None = None
        self.protocol_errors: list[str] = []

    def _on_request(self, ident: JsonValue, method: str, params: JsonObject) -> None:
        raise NotImplementedError

    def _on_notification(self, method: str, params: JsonObject) -> None:
        raise NotImplementedError

    def _record(self, event: JsonObject) -> None:
        raise NotImplementedError

    def start(self) -> None:
        """Start reading the agent's output (a daemon thread)."""
        self._reader = threading.Thread(target=self._read_loop, name="acp-reader", daemon=True)
        self._reader.start()

    def _send(self, message: JsonObject) -> None:
        data = (json.dumps(message, ensure_ascii=False) + "\n").encode("utf-8")
        with self._write_lock:
            try:
                self._in.write(data)
                self._in.flush()
            except (OSError, ValueError) as exc:  # a closed pipe: the agent is gone
                raise AcpError(f"the ACP agent's stdin is closed ({exc})") from None

    def request(self, method: str, params: JsonObject, deadline: float) -> JsonValue:
        """Send a request and wait for its answer until ``deadline`` (monotonic time).
        Raises AcpError for an error answer, the agent's end, or the deadline."""
        ident, pending = self._ask(method, params)
        return self._answer(method, ident, pending, deadline)

    def _ask(self, method: str, params: JsonObject) -> tuple[int, _Pending]:
        with self._lock:
            if self._closed is not None:
                raise AcpError(f"ACP {method}: the agent is gone ({self._closed})")
            self._next_id += 1
            ident = self._next_id
            pending = self._pending[ident] = _Pending()
        self._send({"jsonrpc": "2.0", "id": ident, "method": method, "params": params})
        return ident, pending

    def _answer(
        self, method: str, ident: int, pending: _Pending, deadline: float, *, keep: bool = False
    ) -> JsonValue:
        """Wait for the answer to request ``ident``; ``keep`` leaves it awaited after a
        timeout (so a late answer still finds it)."""
        answered = pending.done.wait(max(0.0, deadline - time.monotonic()))
        with self._lock:
            closed = self._closed
            if answered or closed is not None or not keep:
                self._pending.pop(ident, None)
        reply = pending.reply
        if reply is None:
            if closed is not None:
                raise AcpError(f"ACP {method}: the agent is gone ({closed})")
            raise AcpTimeout(f"ACP {method}: no answer before the deadline")
        error = reply.get("error")
        if error is not None:
            message = error.get("message") if isinstance(error, dict) else error
            code = error.get("code") if isinstance(error, dict) else None
            raise AcpError(f"ACP {method} failed: {message} (code {code})")
        return reply.get("result")

    def notify(self, method: str, params: JsonObject) -> None:
        self._send({"jsonrpc": "2.0", "method": method, "params": params})

    def _read_loop(self) -> None:
        reason = "its output ended"
        try:
            while True:
                line = self._out.readline(MAX_LINE_BYTES + 1)
                if not line:
                    break
                if len(line) > MAX_LINE_BYTES and not line.endswith(b"\n"):
                    reason = f"it sent a line over {MAX_LINE_BYTES} bytes"
                    break
                if not line.strip():
                    continue
                self._handle_line(line)
        except (OSError, ValueError) as exc:
            reason = f"reading its output failed: {exc}"
        with self._lock:
            self._closed = reason
            pending = list(self._pending.values())
        for waiting in pending:
            waiting.done.set()

    def _handle_line(self, line: bytes) -> None:
        try:
            message: JsonValue = json.loads(line)
        except ValueError:
            text = line.decode("utf-8", errors="replace").strip()
            self._protocol_error(f"not JSON on stdout: {text[:200]}")
            return
        if not isinstance(message, dict):
            self._protocol_error("a JSON-RPC message that is not an object")
            return
        method = message.get("method")
        ident = message.get("id")
        if isinstance(method, str):
            params = message.get("params")
            params = params if isinstance(params, dict) else {}
            if ident is None:
                self._on_notification(method, params)
            else:
                self._on_request(ident, method, params)
            return
        if isinstance(ident, int):
            with self._lock:
                pending = self._pending.get(ident)
            if pending is not None:
                pending.reply = message
                pending.done.set()
                return
        self._protocol_error(f"an answer to no request of ours (id {ident!r})")

    def _protocol_error(self, what: str) -> None:
        if len(self.protocol_errors) < 20:
            self.protocol_errors.append(what)
        self._record({"type": "protocol_error", "detail": what})

    @property
    def closed(self) -> str | None:
        """Why the agent's output ended, or None while it is open."""
        with self._lock:
            return self._closed

    def wait_closed(self, timeout: float) -> bool:
        if self._reader is None:
            return True
        self._reader.join(timeout)
        return not self._reader.is_alive()
