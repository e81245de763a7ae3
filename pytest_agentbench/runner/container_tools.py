"""The built-in tools' workspace inside a rollout's container: ``bash`` runs there
through the engine's ``exec``, files are read, written and listed there. The container
is the sandbox: a path may be absolute (the container's whole filesystem is the agent's)
or relative to its working directory. ``path`` is an empty host folder kept for the
record (what the agent did lives in the container and its copied-out logs)."""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from pytest_agentbench.core.jsontypes import JsonObject
from pytest_agentbench.errors import ContainerError, SandboxError
from pytest_agentbench.sandbox import CommandResult, Limits, Workspace
from pytest_agentbench.sandbox.workspace import LIST_LIMIT, READ_LIMIT

if TYPE_CHECKING:
    from pytest_agentbench.environments.container import Container

_FILE_S = 60.0


class ContainerWorkspace(Workspace):
    """A workspace whose commands and files are the container's, rooted at its working
    directory."""

    def __init__(self, container: Container, path: Path) -> None:
        super().__init__(path, "auto")
        self.container = container
        found = container.exec(["pwd"], timeout_s=_FILE_S)
        self.root = found.stdout.strip() or "/"

    def __repr__(self) -> str:
        return f"ContainerWorkspace({self.container.name!r}, root={self.root!r})"

    def _target(self, relative: str) -> str:
        if not isinstance(relative, str) or not relative.strip():
            raise SandboxError(f"path {relative!r} is empty; give a path in the container")
        if "\x00" in relative:
            raise SandboxError(f"path {relative!r} contains a NUL byte")
        return str(PurePosixPath(self.root, relative))

    def write_file(self, relative: str, text: str) -> None:
        try:
            self.container.write_file(self._target(relative), text.encode("utf-8"))
        except ContainerError as exc:
            raise SandboxError(f"cannot write {relative!r}: {exc}") from None

    def read_file(self, relative: str, limit: int = READ_LIMIT) -> str:
        try:
            data = self.container.read_file(self._target(relative), limit)
        except ContainerError as exc:
            raise SandboxError(f"cannot read {relative!r}: {exc}") from None
        return data.decode("utf-8", errors="replace")

    def list_files(self, relative: str = ".") -> list[str]:
        target = self._target(relative)
        script = f"cd {shlex.quote(target)} && find . -type f | head -n {LIST_LIMIT}"
        found = self.container.exec(["sh", "-c", script], timeout_s=_FILE_S)
        if found.exit_code != 0:
            raise SandboxError(f"cannot list {relative!r}: {found.stderr.strip()}")
        return sorted(line.removeprefix("./") for line in found.stdout.splitlines() if line)

    def run(
        self,
        command: str | Sequence[str],
        *,
        limits: Limits | None = None,
        stdin: str | None = None,
        env: Mapping[str, str] | None = None,
        **_unused: object,
    ) -> CommandResult:
        """Run ``command`` in the container from its working directory, within
        ``limits.timeout_s`` (every process it started ended at the deadline)."""
        limits = limits or Limits()
        argv = ["/bin/sh", "-c", command] if isinstance(command, str) else list(command)
        try:
            done = self.container.exec(
                argv,
                timeout_s=limits.timeout_s,
                env=env,
                workdir=self.root,
                stdin=None if stdin is None else stdin.encode("utf-8"),
                output_cap=limits.output_bytes,
            )
        except ContainerError as exc:
            raise SandboxError(f"cannot run in the container: {exc}") from None
        return CommandResult(
            exit_code=done.exit_code,
            stdout=done.stdout,
            stderr=done.stderr,
            timed_out=done.timed_out,
            killed_by="timeout" if done.timed_out else None,
            truncated=False,
            elapsed_s=done.elapsed_s,
        )

    def containment(self) -> JsonObject:
        engine = self.container.engine
        return {
            "level": "container",
            "detail": f"{engine.name} container {self.container.name}",
            "notes": list(self.container.notes),
        }
