"""A workspace inside a rollout's container: the built-in agent loop's tools (``bash``,
``read_file``, ``write_file``, ``list_files``) carried out there instead of on the host.

The same contract as :class:`Workspace`, rooted at a folder of the container (its
workdir): paths from a model are relative, without ``..``, and may not lead out of the
root through a symlink (checked inside the container, where the links are); commands run
through ``Container.exec`` with the tool's deadline, which ends every process the command
started. The host is never touched: the container is the sandbox, so the per-command
limits of bubblewrap (memory, processes, CPU seconds) are the container's own limits here,
and a command's network is the container's.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath

from pytest_agentbench.core.jsontypes import JsonObject
from pytest_agentbench.environments.container import Container
from pytest_agentbench.errors import SandboxError
from pytest_agentbench.sandbox.process import CommandResult, Limits
from pytest_agentbench.sandbox.workspace import LIST_LIMIT, READ_LIMIT, Workspace

#: How long one file operation in the container may take.
FILE_TIMEOUT_S = 120.0
#: $1 root (resolved), $2 target: fails unless the target's resolved folder is the root or
#: under it, and the target is no symlink.
_CONFINE = r"""
inside() { case "$1/" in "$root"/*) return 0;; *) return 1;; esac; }
root=$1; target=$2
"""

_WRITE = (
    _CONFINE
    + r"""
parent=$(dirname -- "$target")
mkdir -p -- "$parent" || exit 1
out="leads out of the workspace through a symlink"
inside "$(readlink -f -- "$parent")" || { echo "$out" >&2; exit 3; }
if [ -L "$target" ]; then echo "is a symlink" >&2; exit 1; fi
cat > "$target"
"""
)

_READ = (
    _CONFINE
    + r"""
real=$(readlink -f -- "$target") || { echo "No such file or directory" >&2; exit 1; }
inside "$real" || { echo "leads out of the workspace through a symlink" >&2; exit 3; }
if [ -L "$target" ]; then echo "is a symlink" >&2; exit 1; fi
[ -e "$target" ] || { echo "No such file or directory" >&2; exit 1; }
[ -f "$target" ] || { echo "not a regular file" >&2; exit 1; }
echo "size $(wc -c < "$target")" >&2
head -c "$3" -- "$target"
"""
)

_LIST = (
    _CONFINE
    + r"""
real=$(readlink -f -- "$target") || exit 1
inside "$real" || { echo "leads out of the workspace through a symlink" >&2; exit 3; }
[ -d "$target" ] && [ ! -L "$target" ] || { echo "not a directory" >&2; exit 1; }
cd -- "$target" && find . -mindepth 1 \( -type f -o -type l \) -print0
"""
)


class ContainerWorkspace(Workspace):
    """The workspace at ``root`` (absolute; the container's workdir by default, else
    ``/``) of ``container``. ``path`` is that root, as the container sees it."""

    def __init__(self, container: Container, root: str | None = None) -> None:
        root = root or container.spec.workdir or "/"
        if not PurePosixPath(root).is_absolute():
            raise SandboxError(f"a container workspace's root must be absolute; got {root!r}")
        super().__init__(Path(root), isolation="auto")
        self.container = container
        self.root = str(PurePosixPath(root))
        made = container.exec(
            ["sh", "-c", 'mkdir -p -- "$1" && readlink -f -- "$1"', "sh", self.root],
            timeout_s=FILE_TIMEOUT_S,
        )
        if made.exit_code != 0:
            raise SandboxError(
                f"cannot make the workspace {self.root} in {container.name}: {made.stderr}"
            )
        self._root_real = made.stdout.strip()

    def __repr__(self) -> str:
        return f"ContainerWorkspace({self.root!r}, container={self.container.name!r})"

    @classmethod
    def seeded(
        cls,
        container: Container,
        root: str | None = None,
        files: Mapping[str, str] | None = None,
        files_dir: Path | None = None,
    ) -> ContainerWorkspace:
        """The workspace, seeded with a copy of the host folder ``files_dir`` and then
        ``files`` (relative path → text) on top, as :meth:`Workspace.create` does."""
        workspace = cls(container, root)
        if files_dir is not None:
            if not Path(files_dir).is_dir():
                raise SandboxError(f"task files directory {files_dir} is not a directory")
            container.copy_in(Path(files_dir), workspace.root)
        for relative, text in (files or {}).items():
            workspace.write_file(relative, text)
        return workspace

    def resolve(self, relative: str) -> Path:
        """The container path of ``relative``: SandboxError for an empty or absolute path,
        a ``..`` part or a NUL byte. Symlinks are checked by each operation, inside."""
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
        return Path(str(PurePosixPath(self.root).joinpath(*pure.parts)))

    def write_file(self, relative: str, text: str) -> None:
        target = str(self.resolve(relative))
        done = self.container.exec(
            ["sh", "-c", _WRITE, "sh", self._root_real, target],
            timeout_s=FILE_TIMEOUT_S,
            stdin=text.encode("utf-8"),
        )
        if done.exit_code != 0:
            raise SandboxError(f"cannot write {relative!r}: {_why(done.stderr, done.timed_out)}")

    def read_file(self, relative: str, limit: int = READ_LIMIT) -> str:
        target = str(self.resolve(relative))
        done = self.container.exec_raw(
            ["sh", "-c", _READ, "sh", self._root_real, target, str(limit + 1)],
            timeout_s=FILE_TIMEOUT_S,
            cap=limit + 2,
            err_cap=1 << 16,
        )
        stderr = done.stderr.text()
        if done.exit_code != 0:
            raise SandboxError(f"cannot read {relative!r}: {_why(stderr, done.timed_out)}")
        data = bytes(done.stdout.head + done.stdout.tail)
        size = next((line[5:] for line in stderr.splitlines() if line.startswith("size ")), "?")
        text = data[:limit].decode("utf-8", errors="replace")
        if len(data) > limit:
            text += f"\n[… truncated: the file has {size.strip()} bytes, showing the first {limit}]"
        return text

    def list_files(self, relative: str = ".") -> list[str]:
        target = self.root if relative in (".", "./") else str(self.resolve(relative))
        done = self.container.exec_raw(
            ["sh", "-c", _LIST, "sh", self._root_real, target],
            timeout_s=FILE_TIMEOUT_S,
            cap=64 << 20,
            err_cap=1 << 16,
        )
        if done.exit_code != 0:
            raise SandboxError(
                f"cannot list {relative!r}: {_why(done.stderr.text(), done.timed_out)}"
            )
        prefix = PurePosixPath(target).relative_to(self.root)
        found = []
        for entry in bytes(done.stdout.head + done.stdout.tail).split(b"\0"):
            if entry:
                name = entry.decode("utf-8", errors="replace").removeprefix("./")
                found.append((prefix / name).as_posix())
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
        """Run ``command`` (a string goes to ``/bin/sh -c``) in the container, in the
        workspace's root, with ``limits.timeout_s`` and ``limits.output_bytes``; ``stop``
        ends it. ``network``, ``read_only`` and ``writable`` are the container's own
        settings here (ignored); descriptors cannot be passed into a container."""
        argv = ["/bin/sh", "-c", command] if isinstance(command, str) else list(command)
        if not argv:
            raise SandboxError("empty command")
        if pass_fds:
            raise SandboxError("file descriptors cannot be passed into a container")
        limits = limits or Limits()
        done = self.container.exec(
            argv,
            timeout_s=limits.timeout_s,
            env={**(env or {}), **(stand_ins or {})},
            workdir=self.root,
            stdin=stdin.encode("utf-8") if stdin is not None else None,
            output_cap=limits.output_bytes,
            stop=stop,
        )
        killed_by = "timeout" if done.timed_out else ("stopped" if done.stopped else None)
        return CommandResult(
            exit_code=done.exit_code,
            stdout=done.stdout,
            stderr=done.stderr,
            timed_out=done.timed_out,
            killed_by=killed_by,
            truncated=done.truncated,
            elapsed_s=done.elapsed_s,
        )

    def containment(self) -> JsonObject:
        """What contains this workspace's commands: the rollout's container."""
        spec = self.container.spec
        return {
            "level": "container",
            "tool": self.container.engine.name,
            "network": spec.network != "none",
            "readonly_host": True,
            "processes": "container",
            "detail": "; ".join(
                [f"container {self.container.name} of {spec.image}", *self.container.notes]
            ),
        }

    def size_bytes(self) -> int:
        """Bytes under the root (``du``, in the container; 0 when it cannot say)."""
        done = self.container.exec(["du", "-sk", self.root], timeout_s=FILE_TIMEOUT_S)
        first = done.stdout.split()[:1]
        return int(first[0]) * 1024 if done.exit_code == 0 and first and first[0].isdigit() else 0

    def prune(self, max_bytes: int) -> list[str]:
        """Nothing to prune on the host: the files live and go with the container (keep
        them with ``Container.copy_out`` before it is removed)."""
        return []


def _why(stderr: str, timed_out: bool) -> str:
    if timed_out:
        return f"the container did not answer within {FILE_TIMEOUT_S:g} s"
    lines = [line for line in stderr.splitlines() if line.strip() and not line.startswith("size ")]
    return lines[-1].split(": ")[-1] if lines else "failed"
