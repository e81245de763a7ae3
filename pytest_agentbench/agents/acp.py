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
- ``fs/read_text_file`` and ``fs/write_text_file`` are served where the agent runs
  (agents/acp_services.py): on the host inside the workspace only (the sandbox's own path
  checks: no ``..``, no absolute path outside it, no symlink out), in a task's container
  in the container as the agent sees it, never on the host;
- ``terminal/*`` is offered in a container only (its commands run there, each on a
  thread of its own, so a ``wait_for_exit`` holds up nothing else);
- anything else is answered "method not found".

The protocol code knows nothing of processes: it reads and writes two byte streams, so it
runs the same over a sandboxed agent's pipes, a container's ``exec`` and in a test. The
agent's process is agents/acp_process.py's.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO

from pytest_agentbench.agents.acp_rpc import AcpError, AcpTimeout, JsonRpcConnection
from pytest_agentbench.agents.acp_services import (
    INVALID_PARAMS,
    MAX_READ_BYTES,
    ContainerTerminals,
    FileRequests,
    Refusal,
    WorkspaceFiles,
)
from pytest_agentbench.core.fastclass import dataclass
from pytest_agentbench.core.jsontypes import JsonObject, JsonValue

#: The ACP protocol version this client speaks (the ``initialize`` handshake).
PROTOCOL_VERSION = 1
#: How permission requests are answered: the suite's ``permissions`` setting.
PERMISSION_POLICIES = ("allow", "reject")
#: Events kept per session; past it, a count of the dropped ones.
MAX_EVENTS = 5000
#: Characters kept of one recorded text (a chunk run, a tool's input or output).
MAX_TEXT = 4000
#: After ``session/cancel``, how long the prompt's answer is awaited before giving up.
CANCEL_GRACE_S = 3.0

_METHOD_NOT_FOUND = -32601


@dataclass
class PromptResult:
    """How one ``session/prompt`` ended: the agent's ``stopReason``, the text of its
    message chunks during this prompt, the usage it reported itself (verbatim, or None),
    and whether the deadline came first (the turn was cancelled and the agent said so)."""

    stop_reason: str
    text: str
    agent_usage: JsonObject | None = None
    timed_out: bool = False


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


class AcpClient(JsonRpcConnection):
    """One ACP connection: ``agent_in`` is the agent's stdin, ``agent_out`` its stdout.

    ``workspace`` is where file requests are allowed; ``agent_cwd`` is the same folder as
    the agent sees it (under some sandboxes it differs); ``files`` serves the file
    requests elsewhere (in a container), ``terminals`` the terminals (offered only when
    given). ``policy`` answers permission
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
        files: FileRequests | None = None,
        terminals: ContainerTerminals | None = None,
    ) -> None:
        if policy not in PERMISSION_POLICIES:
            choices = ", ".join(PERMISSION_POLICIES)
            raise AcpError(f"unknown ACP permission policy {policy!r}; use one of: {choices}")
        super().__init__(agent_in, agent_out)
        self.workspace = workspace
        self.agent_cwd = agent_cwd or str(workspace)
        self.files: FileRequests = files or WorkspaceFiles(workspace, self.agent_cwd)
        self.terminals = terminals
        self.policy = policy
        self._on_event = on_event
        self._started = time.monotonic()
        self._text: list[str] = []  # message chunks of the current prompt
        self.events: list[JsonObject] = []
        self.dropped_events = 0
        self.tool_calls: dict[str, JsonObject] = {}
        self.plan: JsonValue = None
        self.agent_info: JsonObject = {}
        self.session_id: str | None = None

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
        if method.startswith("terminal/") and self.terminals is not None:
            # a terminal may be waited for: served on a thread of its own
            threading.Thread(
                target=self._terminal, args=(ident, method, params), daemon=True
            ).start()
            return
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
        except Refusal as refusal:
            if method.startswith("fs/"):
                path = params.get("path")
                shown = _cut(path, 300) if isinstance(path, str) else None
                self._record({"type": "fs_refused", "method": method, "path": shown})
            self._answer_error(ident, refusal.code, str(refusal))
            return
        with contextlib.suppress(AcpError):
            self._send({"jsonrpc": "2.0", "id": ident, "result": result})

    def _terminal(self, ident: JsonValue, method: str, params: JsonObject) -> None:
        """One ``terminal/*`` request, answered from its own thread."""
        terminals = self.terminals
        assert terminals is not None
        try:
            result = terminals.serve(method, params)
        except Refusal as refusal:
            self._answer_error(ident, refusal.code, str(refusal))
            return
        event: JsonObject = {"type": method.replace("/", "_")}
        if method == "terminal/create":
            command = params.get("command")
            args = params.get("args")
            event["command"] = _cut(str(command), 300)
            if isinstance(args, list):
                event["args"] = _compact(args)
        found = (result if isinstance(result, dict) else params).get("terminalId")
        if found is not None:
            event["terminal"] = str(found)
        if method == "terminal/wait_for_exit" and isinstance(result, dict):
            event["exit_code"] = result.get("exitCode")
        self._record(event)
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

    def _read_file(self, params: JsonObject) -> JsonObject:
        where, text = self.files.read(params.get("path"), MAX_READ_BYTES)
        line, limit = params.get("line"), params.get("limit")
        if isinstance(line, int) or isinstance(limit, int):
            lines = text.splitlines(keepends=True)
            start = max(0, (line if isinstance(line, int) else 1) - 1)
            stop = start + limit if isinstance(limit, int) and limit >= 0 else None
            text = "".join(lines[start:stop])
        self._record({"type": "fs_read", "path": _cut(where, 300), "chars": len(text)})
        return {"content": text}

    def _write_file(self, params: JsonObject) -> None:
        content = params.get("content")
        if not isinstance(content, str):
            raise Refusal(INVALID_PARAMS, "fs/write_text_file: 'content' must be a string")
        where = self.files.write(params.get("path"), content)
        self._record({"type": "fs_write", "path": _cut(where, 300), "chars": len(content)})

    # -- the session ------------------------------------------------------------------

    def initialize(self, deadline: float) -> JsonObject:
        """The handshake; returns the agent's answer (capabilities, info)."""
        result = self.request(
            "initialize",
            {
                "protocolVersion": PROTOCOL_VERSION,
                "clientCapabilities": {
                    "fs": {"readTextFile": True, "writeTextFile": True},
                    "terminal": self.terminals is not None,
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
