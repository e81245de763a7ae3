"""What our ACP client serves the agent besides the conversation: its file requests
(``fs/read_text_file``, ``fs/write_text_file``) and, in a container, its terminals
(``terminal/create``, ``output``, ``wait_for_exit``, ``kill``, ``release``).

Where they are served depends on where the agent runs:

- **On the host** (:class:`WorkspaceFiles`): inside the task's workspace only, with the
  sandbox's own path checks (no ``..``, no absolute path outside it, no symlink out): the
  host is not the agent's to read. No terminals are offered (the agent runs its own
  commands, in its sandbox).
- **In the task's container** (:class:`ContainerFileRequests`,
  :class:`ContainerTerminals`): in the container, as the agent itself sees it there — a
  relative path from the workdir, an absolute one anywhere in the container, a symlink
  followed inside it — through the engine's ``exec``, never the host's filesystem (the
  host's own folders mounted there, the agent's installation and the gateway's socket,
  are read-only). The container is the agent's sandbox: what it could do with its own
  shell, it may ask of us.
"""

from __future__ import annotations

import os
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import field
from pathlib import Path, PurePosixPath
from typing import Protocol

from pytest_agentbench.core.fastclass import dataclass
from pytest_agentbench.core.jsontypes import JsonObject, JsonValue
from pytest_agentbench.environments.container import Container, LiveExec
from pytest_agentbench.errors import ContainerError, SandboxError
from pytest_agentbench.sandbox.workspace import Workspace

INVALID_PARAMS = -32602
INTERNAL = -32603
#: What a file read through ``fs/read_text_file`` may return.
MAX_READ_BYTES = 4 * 1024 * 1024
#: A terminal's output kept by default (its tail: ACP cuts from the beginning).
TERMINAL_OUTPUT_BYTES = 1 << 20


class Refusal(Exception):
    """A request we answer with a JSON-RPC error (``code``) instead of a result."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


class FileRequests(Protocol):
    """Where an agent's file requests are served: each returns the path as recorded and
    raises :class:`Refusal` with the reason."""

    def read(self, path: JsonValue, limit: int) -> tuple[str, str]: ...

    def write(self, path: JsonValue, content: str) -> str: ...


def _path(path: JsonValue, method: str) -> str:
    if not isinstance(path, str) or not path:
        raise Refusal(INVALID_PARAMS, f"{method}: 'path' must be a non-empty string")
    return path


class WorkspaceFiles:
    """File requests served inside the host workspace ``workspace`` only (``agent_cwd``:
    the same folder as the agent sees it, under some sandboxes another path)."""

    def __init__(self, workspace: Path, agent_cwd: str) -> None:
        self.workspace = workspace
        self.agent_cwd = agent_cwd

    def _inside(self, path: JsonValue, method: str) -> str:
        """The workspace-relative path a file request names, or a refusal."""
        given = _path(path, method)
        relative = given
        for root in dict.fromkeys((self.agent_cwd, str(self.workspace))):
            prefix = root.rstrip("/") + "/"
            if given.startswith(prefix):
                relative = given[len(prefix) :]
                break
        try:
            Workspace(self.workspace).resolve(relative)
        except SandboxError as exc:
            raise Refusal(INVALID_PARAMS, f"{method}: {exc}") from None
        return relative

    def read(self, path: JsonValue, limit: int) -> tuple[str, str]:
        relative = self._inside(path, "fs/read_text_file")
        try:
            return relative, Workspace(self.workspace).read_file(relative, limit=limit)
        except (SandboxError, OSError) as exc:
            raise Refusal(INTERNAL, f"fs/read_text_file: {exc}") from None

    def write(self, path: JsonValue, content: str) -> str:
        relative = self._inside(path, "fs/write_text_file")
        try:
            Workspace(self.workspace).write_file(relative, content)
        except (SandboxError, OSError) as exc:
            raise Refusal(INTERNAL, f"fs/write_text_file: {exc}") from None
        return relative


class ContainerFileRequests:
    """File requests served in ``container`` as the agent sees it: a relative path from
    ``workdir``, an absolute one as it is there (links followed inside)."""

    def __init__(self, container: Container, workdir: str) -> None:
        self.container = container
        self.workdir = workdir

    def _where(self, path: JsonValue, method: str) -> str:
        given = _path(path, method)
        if "\x00" in given:
            raise Refusal(INVALID_PARAMS, f"{method}: the path contains a NUL byte")
        return str(PurePosixPath(self.workdir) / given)  # an absolute path stays itself

    def read(self, path: JsonValue, limit: int) -> tuple[str, str]:
        where = self._where(path, "fs/read_text_file")
        try:
            data = self.container.read_file(where, limit)
        except ContainerError as exc:
            raise Refusal(INTERNAL, f"fs/read_text_file: {_reason(exc)}") from None
        return where, data.decode("utf-8", errors="replace")

    def write(self, path: JsonValue, content: str) -> str:
        where = self._where(path, "fs/write_text_file")
        try:
            self.container.write_file(where, content.encode("utf-8"))
        except ContainerError as exc:
            raise Refusal(INTERNAL, f"fs/write_text_file: {_reason(exc)}") from None
        return where


def _reason(exc: ContainerError) -> str:
    """The engine's words without the container's name (the agent needs the why)."""
    text = str(exc)
    return text.split(": ", 1)[1] if ": " in text else text


def _read_some(fd: int) -> bytes:
    try:
        return os.read(fd, 65536)
    except OSError:
        return b""


@dataclass
class _Terminal:
    live: LiveExec
    limit: int
    output: bytearray = field(default_factory=bytearray)
    truncated: bool = False
    reader: threading.Thread | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    def read(self) -> None:
        fd = self.live.stdout.fileno()
        while chunk := _read_some(fd):
            with self.lock:
                self.output += chunk
                if len(self.output) > self.limit:
                    del self.output[: len(self.output) - self.limit]
                    self.truncated = True

    def exit_status(self) -> JsonObject | None:
        if self.reader is not None and self.reader.is_alive():
            return None
        end_code = self.live.exit_status
        if end_code is None and self.live.proc.poll() is None:
            return None
        return {"exitCode": end_code, "signal": "SIGKILL" if end_code is None else None}


class ContainerTerminals:
    """The agent's terminals, run in ``container`` (from ``workdir`` unless the request
    names a ``cwd``): each an exec whose output (stdout and stderr together) is kept,
    its tail within ``outputByteLimit``; each ends by the attempt's deadline
    (``seconds_left``) at the latest, its processes killed inside the container."""

    def __init__(
        self, container: Container, workdir: str, seconds_left: Callable[[], float]
    ) -> None:
        self.container = container
        self.workdir = workdir
        self.seconds_left = seconds_left
        self._terminals: dict[str, _Terminal] = {}
        self._lock = threading.Lock()

    def _get(self, params: JsonObject) -> _Terminal:
        ident = params.get("terminalId")
        with self._lock:
            found = self._terminals.get(str(ident))
        if found is None:
            raise Refusal(INVALID_PARAMS, f"no terminal {ident!r}")
        return found

    def serve(self, method: str, params: JsonObject) -> JsonValue:
        """The answer to one ``terminal/*`` request; raises Refusal."""
        if method == "terminal/create":
            return self._create(params)
        terminal = self._get(params)
        if method == "terminal/output":
            with terminal.lock:
                text = bytes(terminal.output).decode("utf-8", errors="replace")
                truncated = terminal.truncated
            found: JsonObject = {"output": text, "truncated": truncated}
            status = terminal.exit_status()
            if status is not None:
                found["exitStatus"] = status
            return found
        if method == "terminal/wait_for_exit":
            while terminal.exit_status() is None:
                if terminal.reader is not None:
                    terminal.reader.join(0.2)
                else:
                    time.sleep(0.05)
            return terminal.exit_status()
        if method in ("terminal/kill", "terminal/release"):
            terminal.live.finish("killed")
            if method == "terminal/release":
                with self._lock:
                    self._terminals.pop(str(params.get("terminalId")), None)
            return None
        raise Refusal(-32601, f"{method} is not offered")

    def _create(self, params: JsonObject) -> JsonObject:
        command = params.get("command")
        if not isinstance(command, str) or not command:
            raise Refusal(INVALID_PARAMS, "terminal/create: 'command' must be a string")
        raw_args = params.get("args")
        args = [str(a) for a in raw_args] if isinstance(raw_args, list) else []
        env: dict[str, str] = {}
        given = params.get("env")
        for item in given if isinstance(given, list) else []:
            if isinstance(item, dict) and isinstance(item.get("name"), str):
                env[str(item["name"])] = str(item.get("value", ""))
        cwd = params.get("cwd")
        workdir = str(PurePosixPath(self.workdir) / cwd) if isinstance(cwd, str) else self.workdir
        limit = params.get("outputByteLimit")
        cap = limit if isinstance(limit, int) and limit > 0 else TERMINAL_OUTPUT_BYTES
        left = self.seconds_left()
        if left <= 0:
            raise Refusal(INTERNAL, "terminal/create: the attempt's deadline has passed")
        # no arguments: the command is a shell line (as editors run it); else a program
        argv = ["sh", "-c", command] if not args else [command, *args]
        try:
            live = self.container.exec_live(
                ["sh", "-c", 'exec "$@" 2>&1', "sh", *argv],
                timeout_s=left,
                env=env,
                workdir=workdir,
            )
        except ContainerError as exc:
            raise Refusal(INTERNAL, f"terminal/create: {exc}") from None
        live.stdin.close()
        terminal = _Terminal(live, cap)
        terminal.reader = threading.Thread(target=terminal.read, daemon=True)
        terminal.reader.start()
        ident = f"term-{secrets.token_hex(4)}"
        with self._lock:
            self._terminals[ident] = terminal
        return {"terminalId": ident}

    def close(self) -> None:
        """End every terminal still running."""
        with self._lock:
            left = list(self._terminals.values())
            self._terminals.clear()
        for terminal in left:
            terminal.live.finish("released")
