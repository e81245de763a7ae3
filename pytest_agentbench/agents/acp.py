"""The plugin as an Agent Client Protocol client: an ACP agent under test, over stdio.

ACP is JSON-RPC 2.0, one message a line, on the agent's stdin and stdout. We are the
client (the editor's side): ``initialize``, ``session/new`` with the task's workspace as
``cwd``, ``session/prompt`` with the task's prompt (and, for a repair round, a second
``session/prompt`` with the verifier's feedback in the same session), ``session/cancel``
when the task is stopped. The agent calls us back:

- ``session/update`` notifications (message and thought chunks, tool calls and their
  updates, plans, usage) are recorded, in order, as the rollout's agent events;
- ``session/request_permission`` is answered by the suite's policy (``allow``: the first
  allow option offered, ``reject``: the first reject option, else *cancelled*) and the
  decision is recorded;
- ``fs/read_text_file`` and ``fs/write_text_file`` are served inside the workspace only
  (the sandbox's own path checks: no ``..``, no absolute path outside it, no symlink out);
- anything else (``terminal/*``, which we do not offer) is answered "method not found".

The protocol code knows nothing of processes: it reads and writes two byte streams, so it
runs the same over a sandboxed agent's pipes and in a test.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from pytest_agentbench.core.jsontypes import JsonObject, JsonValue
from pytest_agentbench.errors import AgentbenchError, SandboxError
from pytest_agentbench.sandbox.isolation import Plan
from pytest_agentbench.sandbox.live import LiveCommand
from pytest_agentbench.sandbox.process import CommandResult, Limits
from pytest_agentbench.sandbox.workspace import Workspace

#: The ACP protocol version this client speaks (the ``initialize`` handshake).
PROTOCOL_VERSION = 1
#: How permission requests are answered: the suite's ``permissions`` setting.
PERMISSION_POLICIES = ("allow", "reject")
#: One message line at most (a bigger one is a protocol error, not a memory problem).
MAX_LINE_BYTES = 16 * 1024 * 1024
#: Events kept per session; past it, a count of the dropped ones.
MAX_EVENTS = 5000
#: Characters kept of one recorded text (a chunk run, a tool's input or output).
MAX_TEXT = 4000
#: What a file read through ``fs/read_text_file`` may return.
MAX_READ_BYTES = 4 * 1024 * 1024
#: After ``session/cancel``, how long the prompt's answer is awaited before giving up.
CANCEL_GRACE_S = 3.0

_METHOD_NOT_FOUND = -32601
_INVALID_PARAMS = -32602
_INTERNAL = -32603


class AcpError(AgentbenchError):
    """The ACP conversation failed: the agent exited, answered with an error, sent
    something that is not JSON-RPC, or did not answer in time."""


class AcpTimeout(AcpError):
    """The agent did not answer before the deadline (a prompt: not even once cancelled)."""


@dataclass
class PromptResult:
    """How one ``session/prompt`` ended: the agent's ``stopReason``, the text of its
    message chunks during this prompt, the usage it reported itself (verbatim, or None),
    and whether the deadline came first (the turn was cancelled and the agent said so)."""

    stop_reason: str
    text: str
    agent_usage: JsonObject | None = None
    timed_out: bool = False


@dataclass
class _Pending:
    done: threading.Event = field(default_factory=threading.Event)
    reply: JsonObject | None = None


def _cut(text: str, limit: int = MAX_TEXT) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"[… {len(text) - limit} characters cut]"


def _compact(value: JsonValue) -> JsonValue:
    """A recorded copy of an agent's JSON: long strings cut, deep or long values summed up."""
    text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    if len(text) <= MAX_TEXT:
        return value
    return _cut(text)


class AcpClient:
    """One ACP connection: ``agent_in`` is the agent's stdin, ``agent_out`` its stdout.

    ``workspace`` is where file requests are allowed; ``agent_cwd`` is the same folder as
    the agent sees it (under some sandboxes it differs). ``policy`` answers permission
    requests. ``on_event`` is called with each recorded event as it happens (from the
    reader thread); the events are also kept in :attr:`events`.
    """

    def __init__(
        self,
        agent_in: IO[bytes],
        agent_out: IO[bytes],
        *,
        workspace: Path,
        agent_cwd: str | None = None,
        policy: str = "allow",
        on_event: Callable[[JsonObject], None] | None = None,
    ) -> None:
        if policy not in PERMISSION_POLICIES:
            choices = ", ".join(PERMISSION_POLICIES)
            raise AcpError(f"unknown ACP permission policy {policy!r}; use one of: {choices}")
        self._in = agent_in
        self._out = agent_out
        self.workspace = workspace
        self.agent_cwd = agent_cwd or str(workspace)
        self.policy = policy
        self._on_event = on_event
        self._write_lock = threading.Lock()
        self._lock = threading.Lock()
        self._next_id = 0
        self._pending: dict[int, _Pending] = {}
        self._closed: str | None = None  # why the agent's output ended
        self._reader: threading.Thread | None = None
        self._started = time.monotonic()
        self._text: list[str] = []  # message chunks of the current prompt
        self.events: list[JsonObject] = []
        self.dropped_events = 0
        self.tool_calls: dict[str, JsonObject] = {}
        self.plan: JsonValue = None
        self.agent_info: JsonObject = {}
        self.session_id: str | None = None
        self.protocol_errors: list[str] = []

    # -- the connection -------------------------------------------------------------

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
            self._protocol_error(f"not JSON on stdout: {_cut(text, 200)}")
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

    # -- what the agent tells and asks ---------------------------------------------

    def _record(self, event: JsonObject) -> None:
        event = {"t": round(time.monotonic() - self._started, 3), **event}
        with self._lock:
            if len(self.events) >= MAX_EVENTS:
                self.dropped_events += 1
                return
            self.events.append(event)
        if self._on_event is not None:
            self._on_event(event)

    def _on_notification(self, method: str, params: JsonObject) -> None:
        if method != "session/update":
            self._record({"type": "notification", "method": method})
            return
        update = params.get("update")
        if not isinstance(update, dict):
            self._protocol_error("session/update without an update object")
            return
        kind = update.get("sessionUpdate")
        if kind in ("agent_message_chunk", "agent_thought_chunk", "user_message_chunk"):
            content = update.get("content")
            text = content.get("text") if isinstance(content, dict) else None
            if not isinstance(text, str) or not text:
                return
            name = {"agent_message_chunk": "message", "agent_thought_chunk": "thought"}.get(
                str(kind), "user_message"
            )
            if name == "message":
                self._text.append(text)
            self._chunk(name, text)
        elif kind in ("tool_call", "tool_call_update"):
            self._tool_call(update, first=kind == "tool_call")
        elif kind == "plan":
            self.plan = _compact(update.get("entries"))
            self._record({"type": "plan", "entries": self.plan})
        else:
            self._record({"type": str(kind), "update": _compact(update)})

    def _chunk(self, name: str, text: str) -> None:
        """Consecutive chunks of one kind become one event (the text grows)."""
        with self._lock:
            last = self.events[-1] if self.events else None
            if last is not None and last.get("type") == name:
                before = last.get("text")
                before = before if isinstance(before, str) else ""
                last["text"] = _cut(before + text, MAX_TEXT * 4)
                return
        self._record({"type": name, "text": _cut(text, MAX_TEXT * 4)})

    def _tool_call(self, update: JsonObject, *, first: bool) -> None:
        ident = update.get("toolCallId")
        key = str(ident)
        fields: JsonObject = {"id": key}
        for name in ("title", "kind", "status"):
            value = update.get(name)
            if isinstance(value, str):
                fields[name] = value
        for name, label in (("rawInput", "input"), ("rawOutput", "output")):
            if update.get(name) not in ({}, None):
                fields[label] = _compact(update.get(name))
        with self._lock:
            known = self.tool_calls.setdefault(key, {"id": key})
            known.update(fields)
        self._record({"type": "tool_call" if first else "tool_call_update", **fields})

    def _on_request(self, ident: JsonValue, method: str, params: JsonObject) -> None:
        try:
            if method == "session/request_permission":
                result: JsonValue = self._permission(params)
            elif method == "fs/read_text_file":
                result = self._read_file(params)
            elif method == "fs/write_text_file":
                self._write_file(params)
                result = None
            else:
                self._record({"type": "refused", "method": method})
                self._answer_error(ident, _METHOD_NOT_FOUND, f"{method} is not offered")
                return
        except _Refusal as refusal:
            self._answer_error(ident, refusal.code, str(refusal))
            return
        with contextlib.suppress(AcpError):
            self._send({"jsonrpc": "2.0", "id": ident, "result": result})

    def _answer_error(self, ident: JsonValue, code: int, message: str) -> None:
        with contextlib.suppress(AcpError):
            self._send({"jsonrpc": "2.0", "id": ident, "error": {"code": code, "message": message}})

    def _permission(self, params: JsonObject) -> JsonObject:
        options = params.get("options")
        tool = params.get("toolCall")
        tool_id = tool.get("toolCallId") if isinstance(tool, dict) else None
        title = tool.get("title") if isinstance(tool, dict) else None
        wanted = (
            ("allow_once", "allow_always")
            if self.policy == "allow"
            else (
                "reject_once",
                "reject_always",
            )
        )
        chosen: str | None = None
        for kind in wanted:  # prefer the one-time answer of the policy's side
            for option in options if isinstance(options, list) else []:
                if isinstance(option, dict) and option.get("kind") == kind:
                    option_id = option.get("optionId")
                    if isinstance(option_id, str):
                        chosen = option_id
                        break
            if chosen is not None:
                break
        self._record(
            {
                "type": "permission",
                "tool_call": str(tool_id) if tool_id is not None else None,
                "title": _cut(title, 300) if isinstance(title, str) else None,
                "policy": self.policy,
                "decision": chosen if chosen is not None else "cancelled",
            }
        )
        if chosen is None:
            return {"outcome": {"outcome": "cancelled"}}
        return {"outcome": {"outcome": "selected", "optionId": chosen}}

    def _inside(self, params: JsonObject, method: str) -> str:
        """The workspace-relative path a file request names, or a refusal."""
        path = params.get("path")
        if not isinstance(path, str) or not path:
            raise _Refusal(_INVALID_PARAMS, f"{method}: 'path' must be a non-empty string")
        relative = path
        for root in dict.fromkeys((self.agent_cwd, str(self.workspace))):
            prefix = root.rstrip("/") + "/"
            if path.startswith(prefix):
                relative = path[len(prefix) :]
                break
        try:
            Workspace(self.workspace).resolve(relative)
        except SandboxError as exc:
            self._record({"type": "fs_refused", "method": method, "path": _cut(path, 300)})
            raise _Refusal(_INVALID_PARAMS, f"{method}: {exc}") from None
        return relative

    def _read_file(self, params: JsonObject) -> JsonObject:
        relative = self._inside(params, "fs/read_text_file")
        try:
            text = Workspace(self.workspace).read_file(relative, limit=MAX_READ_BYTES)
        except (SandboxError, OSError) as exc:
            raise _Refusal(_INTERNAL, f"fs/read_text_file: {exc}") from None
        line, limit = params.get("line"), params.get("limit")
        if isinstance(line, int) or isinstance(limit, int):
            lines = text.splitlines(keepends=True)
            start = max(0, (line if isinstance(line, int) else 1) - 1)
            stop = start + limit if isinstance(limit, int) and limit >= 0 else None
            text = "".join(lines[start:stop])
        self._record({"type": "fs_read", "path": relative, "chars": len(text)})
        return {"content": text}

    def _write_file(self, params: JsonObject) -> None:
        relative = self._inside(params, "fs/write_text_file")
        content = params.get("content")
        if not isinstance(content, str):
            raise _Refusal(_INVALID_PARAMS, "fs/write_text_file: 'content' must be a string")
        try:
            Workspace(self.workspace).write_file(relative, content)
        except (SandboxError, OSError) as exc:
            raise _Refusal(_INTERNAL, f"fs/write_text_file: {exc}") from None
        self._record({"type": "fs_write", "path": relative, "chars": len(content)})

    # -- the session ------------------------------------------------------------------

    def initialize(self, deadline: float) -> JsonObject:
        """The handshake; returns the agent's answer (capabilities, info)."""
        result = self.request(
            "initialize",
            {
                "protocolVersion": PROTOCOL_VERSION,
                "clientCapabilities": {
                    "fs": {"readTextFile": True, "writeTextFile": True},
                    "terminal": False,
                },
            },
            deadline,
        )
        if not isinstance(result, dict):
            raise AcpError("ACP initialize: the answer is not an object")
        info = result.get("agentInfo")
        self.agent_info = {
            "protocolVersion": result.get("protocolVersion"),
            **(info if isinstance(info, dict) else {}),
        }
        return result

    def new_session(self, deadline: float) -> str:
        """``session/new`` in the workspace; returns the session id."""
        result = self.request("session/new", {"cwd": self.agent_cwd, "mcpServers": []}, deadline)
        session = result.get("sessionId") if isinstance(result, dict) else None
        if not isinstance(session, str) or not session:
            raise AcpError("ACP session/new: the answer has no sessionId")
        self.session_id = session
        self._record({"type": "session", "session_id": session})
        return session

    def prompt(self, text: str, deadline: float) -> PromptResult:
        """One prompt turn in the session; waits for its ``stopReason`` until ``deadline``.
        At the deadline it cancels the turn (``session/cancel``) and waits
        :data:`CANCEL_GRACE_S` more: an answer then is returned with ``timed_out``, none
        raises AcpTimeout."""
        if self.session_id is None:
            raise AcpError("ACP session/prompt before session/new")
        with self._lock:
            self._text = []
        self._record({"type": "prompt", "text": _cut(text)})
        params: JsonObject = {
            "sessionId": self.session_id,
            "prompt": [{"type": "text", "text": text}],
        }
        ident, pending = self._ask("session/prompt", params)
        timed_out = False
        try:
            result = self._answer("session/prompt", ident, pending, deadline, keep=True)
        except AcpTimeout:
            # the deadline: cancel the turn, and give the agent a moment to say it stopped
            timed_out = True
            self.cancel()
            grace = time.monotonic() + CANCEL_GRACE_S
            result = self._answer("session/prompt", ident, pending, grace)
        stop = result.get("stopReason") if isinstance(result, dict) else None
        usage = result.get("usage") if isinstance(result, dict) else None
        outcome = PromptResult(
            stop_reason=str(stop) if stop is not None else "unknown",
            text="".join(self._text),
            agent_usage=usage if isinstance(usage, dict) else None,
            timed_out=timed_out,
        )
        self._record(
            {
                "type": "prompt_end",
                "stop_reason": outcome.stop_reason,
                "agent_usage": outcome.agent_usage,
            }
        )
        return outcome

    def cancel(self) -> None:
        """Ask the agent to stop its turn (``session/cancel``); never raises."""
        if self.session_id is None:
            return
        self._record({"type": "cancel"})
        with contextlib.suppress(AcpError):
            self.notify("session/cancel", {"sessionId": self.session_id})

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


class _Refusal(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


class AcpAgent:
    """An ACP agent under test, run in the sandbox: started with :meth:`start` (the
    process, ``initialize``, ``session/new`` in the workspace), asked with :meth:`prompt`
    (once for the task, once more per repair round: the same session), ended with
    :meth:`stop` (``session/cancel`` when a turn is still running, a short grace, then
    the whole process group is killed). ``env`` is the agent's whole environment;
    ``network``, ``read_only`` and ``writable`` as for ``run_command``."""

    def __init__(
        self,
        argv: Sequence[str],
        *,
        workspace: Path,
        env: Mapping[str, str],
        limits: Limits,
        plan: Plan,
        policy: str = "allow",
        on_event: Callable[[JsonObject], None] | None = None,
        network: bool = False,
        read_only: Sequence[Path] = (),
        writable: Sequence[Path] = (),
    ) -> None:
        if not argv:
            raise AcpError("an ACP agent needs a command (argv is empty)")
        self.argv = list(argv)
        self.workspace = workspace
        self.env = dict(env)
        self.limits = limits
        self.plan = plan
        self.policy = policy
        self._on_event = on_event
        self.network = network
        self.read_only = list(read_only)
        self.writable = list(writable)
        self.command: LiveCommand | None = None
        self.client: AcpClient | None = None
        self._prompting = threading.Event()

    def start(self, deadline: float) -> AcpClient:
        """Start the agent and open its session; raises AcpError (or SandboxError)."""
        self.command = LiveCommand.start_command(
            self.argv,
            cwd=self.workspace,
            env=self.env,
            limits=self.limits,
            plan=self.plan,
            network=self.network,
            read_only=self.read_only,
            writable=self.writable,
        )
        self.client = AcpClient(
            self.command.stdin,
            self.command.stdout,
            workspace=self.workspace,
            policy=self.policy,
            on_event=self._on_event,
        )
        self.client.start()
        self.client.initialize(deadline)
        self.client.new_session(deadline)
        return self.client

    def prompt(self, text: str, deadline: float) -> PromptResult:
        if self.client is None:
            raise AcpError("ACP agent not started")
        self._prompting.set()
        try:
            return self.client.prompt(text, deadline)
        finally:
            self._prompting.clear()

    def stop(self, reason: str | None = None, grace_s: float = CANCEL_GRACE_S) -> CommandResult:
        """End the agent. A running turn is cancelled first (``session/cancel``) and given
        ``grace_s`` to finish; then the agent's stdin is closed, which tells an ACP agent
        to exit, and it gets ``grace_s`` more; whatever still runs of its process group is
        killed. ``killed_by`` is ``reason`` when the agent had to be killed (``closed``
        when no reason was given: an agent that ignored the end of its input)."""
        command = self.command
        if command is None:
            raise AcpError("ACP agent not started")
        if reason is not None:
            if self.client is not None and self._prompting.is_set():
                self.client.cancel()
                end = time.monotonic() + grace_s
                while self._prompting.is_set() and time.monotonic() < end:
                    time.sleep(0.02)
            return command.finish(reason)
        with contextlib.suppress(OSError, ValueError):
            command.stdin.close()
        command.wait(grace_s)
        return command.finish("closed")
