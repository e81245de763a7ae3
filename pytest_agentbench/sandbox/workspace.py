"""A workspace: the one directory untrusted code and model-chosen paths may touch.

Paths from a model are confined: no ``..``, nothing absolute, no way out through a
symlink (every path is resolved and must stay under the workspace; files are opened with
``O_NOFOLLOW`` as well). Commands run in it under :mod:`pytest_agentbench.sandbox.process`
with the isolation this machine allows.
"""

from __future__ import annotations

import os
import shutil
import stat
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath

from pytest_agentbench.core.jsontypes import JsonObject
from pytest_agentbench.errors import SandboxError
from pytest_agentbench.sandbox.isolation import plan_for
from pytest_agentbench.sandbox.process import (
    HOME_DIR,
    TMP_DIR,
    CommandResult,
    Limits,
    run_command,
    sandbox_env,
)

#: What ``read_file`` returns at most, in bytes, unless asked otherwise.
READ_LIMIT = 1_000_000
#: ``list_files`` stops after this many entries.
LIST_LIMIT = 10_000
#: A workspace kept for inspection after its run (an agent's, a code verifier's) is
#: pruned to this size with ``prune`` (biggest files first).
KEEP_BYTES = 20 * 1024 * 1024


class Workspace:
    """A directory for one rollout. ``path`` is absolute; ``isolation`` is the sandbox mode
    for its commands (``auto``, ``strict`` or ``basic``; see ``containment``)."""

    def __init__(self, path: Path, isolation: str = "auto") -> None:
        self.path = Path(path).absolute()
        self.isolation = isolation
        self._real = Path(os.path.realpath(self.path))

    def __repr__(self) -> str:
        return f"Workspace({str(self.path)!r}, isolation={self.isolation!r})"

    @classmethod
    def create(
        cls,
        root: Path,
        files: Mapping[str, str] | None = None,
        files_dir: Path | None = None,
        *,
        isolation: str = "auto",
    ) -> Workspace:
        """A new workspace at ``root`` (missing or empty), seeded with a copy of
        ``files_dir`` and then ``files`` (relative path → text) on top of it. A
        ``files_dir`` that holds ``root`` (``files = ".."`` with the results folder
        below it) is refused: the copy would copy itself without end."""
        plan_for(isolation)  # an unknown mode, or strict without bubblewrap, fails here
        root = Path(root).absolute()
        if files_dir is not None and root.resolve().is_relative_to(Path(files_dir).resolve()):
            raise SandboxError(
                f"the task files directory holds the workspace, so it would be copied into "
                f"itself: {files_dir} holds {root}; name a directory that does not hold the "
                "results folder (--agentbench-out)"
            )
        if root.exists() and (not root.is_dir() or any(root.iterdir())):
            raise SandboxError(f"cannot create a workspace at {root}: it exists and is not empty")
        root.mkdir(parents=True, exist_ok=True)
        workspace = cls(root, isolation)
        if files_dir is not None:
            source = Path(files_dir)
            if not source.is_dir():
                raise SandboxError(f"task files directory {source} is not a directory")
            shutil.copytree(source, root, dirs_exist_ok=True, ignore_dangling_symlinks=True)
        for relative, text in (files or {}).items():
            workspace.write_file(relative, text)
        return workspace

    def resolve(self, relative: str) -> Path:
        """The absolute path of ``relative`` inside the workspace. Raises SandboxError for
        an empty or absolute path, a ``..`` part, a NUL byte, or a path that leads out of
        the workspace through a symlink."""
        if not isinstance(relative, str) or not relative.strip():
            raise SandboxError(f"path {relative!r} is empty; give a path inside the workspace")
        if "\x00" in relative:
            raise SandboxError(f"path {relative!r} contains a NUL byte")
        pure = PurePosixPath(relative)
        if pure.is_absolute():
            raise SandboxError(
                f"path {relative!r} is absolute; give a path relative to the workspace"
            )
        if ".." in pure.parts:
            raise SandboxError(f"path {relative!r} contains '..'; it must stay in the workspace")
        target = self.path.joinpath(*pure.parts)
        real = Path(os.path.realpath(target))
        if real != self._real and self._real not in real.parents:
            raise SandboxError(f"path {relative!r} leads out of the workspace through a symlink")
        return target

    def write_file(self, relative: str, text: str) -> None:
        """Write ``text`` (UTF-8) to ``relative``, creating parent directories."""
        target = self.resolve(relative)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            self.resolve(relative)  # the directories made must not have opened a way out
            flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW
            fd = os.open(target, flags, 0o644)
            with os.fdopen(fd, "w", encoding="utf-8") as file:
                file.write(text)
        except OSError as exc:
            raise SandboxError(f"cannot write {relative!r}: {exc.strerror or exc}") from None

    def read_file(self, relative: str, limit: int = READ_LIMIT) -> str:
        """The text of ``relative`` (invalid UTF-8 replaced), at most ``limit`` bytes of
        it; a longer file ends with a line saying how much was left out."""
        target = self.resolve(relative)
        try:
            fd = os.open(target, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError as exc:
            raise SandboxError(f"cannot read {relative!r}: {exc.strerror or exc}") from None
        with os.fdopen(fd, "rb") as file:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise SandboxError(f"cannot read {relative!r}: not a regular file")
            data = file.read(limit + 1)
            size = info.st_size
        text = data[:limit].decode("utf-8", errors="replace")
        if len(data) > limit:
            text += f"\n[… truncated: the file has {size} bytes, showing the first {limit}]"
        return text

    def list_files(self, relative: str = ".") -> list[str]:
        """Files under ``relative``, as sorted workspace-relative POSIX paths (symlinks
        listed, not followed; the command's own HOME and TMPDIR left out), at most
        :data:`LIST_LIMIT` of them."""
        base = self.resolve(relative)
        if not base.is_dir():
            raise SandboxError(f"cannot list {relative!r}: not a directory")
        found: list[str] = []
        for directory, subdirs, names in os.walk(base):
            here = Path(directory)
            if here == self.path:
                subdirs[:] = [d for d in subdirs if d not in (HOME_DIR, TMP_DIR)]
            for name in names + [d for d in subdirs if (here / d).is_symlink()]:
                found.append((here / name).relative_to(self.path).as_posix())
            if len(found) >= LIST_LIMIT:
                break
        return sorted(found)[:LIST_LIMIT]

    def run(
        self,
        command: str | Sequence[str],
        *,
        limits: Limits | None = None,
        stdin: str | None = None,
        env: Mapping[str, str] | None = None,
        pass_fds: Sequence[int] = (),
        stand_ins: Mapping[str, str] | None = None,
        stop: threading.Event | None = None,
        network: bool = False,
        read_only: Sequence[Path] = (),
        writable: Sequence[Path] = (),
    ) -> CommandResult:
        """Run ``command`` (a string goes to ``/bin/sh -c``; a list is the argv) in the
        workspace. ``env`` adds variables to the scrubbed environment (credential-like
        names are refused); ``stand_ins`` adds variables that only look like credentials
        (an agent's gateway key, good for its gateway route alone); ``pass_fds`` are
        descriptors the command inherits; ``stop`` kills the command's group once set;
        ``network`` keeps the host's network (an agent reaching its gateway);
        ``read_only`` folders stay visible read-only (an agent's program), ``writable``
        ones writable (the gateway's socket, for a strict sandbox). Never
        raises for what the command does; SandboxError when it cannot be started."""
        argv = ["/bin/sh", "-c", command] if isinstance(command, str) else list(command)
        if not argv:
            raise SandboxError("empty command")
        (self.path / HOME_DIR).mkdir(exist_ok=True)
        (self.path / TMP_DIR).mkdir(exist_ok=True)
        return run_command(
            argv,
            cwd=self.path,
            env={**sandbox_env(self.path, env), **(stand_ins or {})},
            limits=limits or Limits(),
            plan=plan_for(self.isolation),
            stdin=stdin,
            pass_fds=pass_fds,
            stop=stop,
            network=network,
            read_only=read_only,
            writable=writable,
        )

    def containment(self) -> JsonObject:
        """The containment this workspace's commands get (see ``sandbox.containment``)."""
        return plan_for(self.isolation).as_dict()

    def size_bytes(self) -> int:
        """Bytes in the workspace's regular files (symlinks not followed)."""
        total = 0
        for directory, _, names in os.walk(self.path):
            for name in names:
                try:
                    info = os.lstat(os.path.join(directory, name))
                except OSError:
                    continue
                if stat.S_ISREG(info.st_mode):
                    total += info.st_size
        return total

    def prune(self, max_bytes: int) -> list[str]:
        """Delete the biggest files until the workspace holds at most ``max_bytes``, so
        the copy kept for inspection stays small; returns what was deleted."""
        sizes: list[tuple[int, Path]] = []
        for directory, _, names in os.walk(self.path):
            for name in names:
                path = Path(directory, name)
                if not path.is_symlink():
                    try:
                        sizes.append((path.stat().st_size, path))
                    except OSError:
                        continue
        total = sum(size for size, _ in sizes)
        removed = []
        for size, path in sorted(sizes, key=lambda item: -item[0]):
            if total <= max_bytes:
                break
            path.unlink(missing_ok=True)
            total -= size
            removed.append(path.relative_to(self.path).as_posix())
        return removed
