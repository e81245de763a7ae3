"""What the code-running verifiers (``python_tests``, ``command``) share: the workspace a
check runs in, the limits their options set, and the artifacts they leave.

A check in agent mode judges the agent's own workspace as it was left. Otherwise a fresh
workspace is made per attempt at ``<rollout>/workspace`` (seeded from the task's files),
kept after the run for a person to inspect, pruned to the sandbox's ``KEEP_BYTES``. Without
a rollout directory (a verifier called directly) the workspace is temporary.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

from pytest_agentbench.artifacts.jsonio import write_json_atomic, write_text_atomic
from pytest_agentbench.core.jsontypes import JsonObject, JsonValue
from pytest_agentbench.errors import SandboxError
from pytest_agentbench.sandbox import (
    ISOLATION_MODES,
    KEEP_BYTES,
    CommandResult,
    Limits,
    Workspace,
    forkserver,
)
from pytest_agentbench.sandbox.cpuslots import cpu_slot
from pytest_agentbench.sandbox.process import sandbox_env
from pytest_agentbench.verifiers.base import Check, number_option

DEFAULT_TIMEOUT_S = 30.0
#: The largest report an inner run may send (bigger is not trusted).
REPORT_LIMIT = 32 * 1024 * 1024

#: Options every code-running verifier takes (merged into its options schema).
SANDBOX_OPTIONS: JsonObject = {
    "timeout_s": {
        "type": "number",
        "exclusiveMinimum": 0,
        "maximum": 86400,
        "default": DEFAULT_TIMEOUT_S,
        "description": "Wall-clock seconds the command may run.",
    },
    "memory_mb": {
        "type": "integer",
        "minimum": 32,
        "maximum": 1048576,
        "default": 1024,
        "description": "Address-space limit of the command, in MiB.",
    },
    "isolation": {
        "enum": [*ISOLATION_MODES],
        "default": "auto",
        "description": "auto: the best isolation available; strict: refuse to run "
        "without bubblewrap; basic: no namespaces.",
    },
}


def limits_from(options: Mapping[str, JsonValue]) -> Limits:
    """The sandbox limits a verifier's options ask for."""
    timeout_s = number_option(options, "timeout_s", DEFAULT_TIMEOUT_S)
    return Limits(
        timeout_s=timeout_s,
        cpu_s=timeout_s,
        memory_mb=int(number_option(options, "memory_mb", 1024)),
    )


def run_sandboxed(
    workspace: Workspace,
    argv: str | Sequence[str],
    *,
    limits: Limits,
    stdin: str | None = None,
    env: Mapping[str, str] | None = None,
    pass_fds: Sequence[int] = (),
) -> CommandResult:
    """``workspace.run`` inside a CPU slot (``sandbox/cpuslots.py``): however many
    rollouts are in flight, no more verifications run at once than the machine has cores."""
    with cpu_slot():
        return workspace.run(argv, limits=limits, stdin=stdin, env=env, pass_fds=pass_fds)


def site_paths() -> list[str]:
    """This interpreter's site-packages directories (what ``site`` would add), for runs
    started with ``python -S``."""
    import site

    return [path for path in site.getsitepackages() if Path(path).is_dir()]


def forkable_files(workspace: Workspace, check: Check) -> dict[str, str] | None:
    """The workspace's files when this run may take the fork server (an answer-mode task
    under bubblewrap with a pids cgroup, a few small text files; under ``basic`` with a
    pids cgroup, none: the task runs in its workspace as it is); else None."""
    if check.workspace is not None or not forkserver.usable(workspace.isolation):
        return None
    files: dict[str, str] = {}
    if forkserver.in_place(workspace.isolation):
        return files
    for relative in workspace.list_files():
        path = workspace.path / relative
        if path.is_symlink() or not path.is_file():
            return None
        if len(files) >= forkserver.MAX_FILES or path.stat().st_size > forkserver.MAX_FILE_BYTES:
            return None
        try:
            files[relative] = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return None
    return files


def run_forked(
    workspace: Workspace,
    files: Mapping[str, str],
    runner: Path,
    runner_module: str,
    orders: Mapping[str, JsonValue],
    nonce: str,
    check: Check,
    env: Mapping[str, str] | None = None,
) -> tuple[CommandResult, bytes]:
    """``runner``'s ``main(orders, nonce, fd)`` in a child of this CPU slot's fork server
    (``sandbox/forkserver.py``), with ``files`` as its workspace (or the workspace itself,
    where the server runs tasks in place); the result and what it wrote to its report
    channel."""
    cwd = str(workspace.path) if forkserver.in_place(workspace.isolation) else None
    with cpu_slot() as slot:
        server = forkserver.server_for(slot, workspace.isolation)
        result = server.run(
            files,
            str(runner),
            runner_module,
            orders,
            nonce,
            limits_from(check.options),
            sandbox_env(workspace.path, env),
            REPORT_LIMIT,
            site_paths(),
            cwd,
        )
        kept = server.kept
    _copy_back(workspace, files, kept)
    return result


def _copy_back(
    workspace: Workspace, before: Mapping[str, str], kept: Mapping[str, bytes | None]
) -> None:
    """Write what the run left in its directory into the host workspace (kept for a person
    to inspect), through the workspace's path checks; files too big to copy are named in
    ``.agentbench-left-out.txt``."""
    left_out = []
    for relative, data in sorted(kept.items()):
        if relative.split("/", 1)[0] in (".home", ".tmp"):
            continue
        if data is None:
            left_out.append(relative)
            continue
        if before.get(relative, "").encode("utf-8") == data:
            continue
        with contextlib.suppress(SandboxError, OSError):
            target = workspace.resolve(relative)
            target.parent.mkdir(parents=True, exist_ok=True)
            workspace.resolve(relative)
            flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW
            fd = os.open(target, flags, 0o644)
            with os.fdopen(fd, "wb") as file:
                file.write(data)
    if left_out:
        with contextlib.suppress(SandboxError):
            workspace.write_file(".agentbench-left-out.txt", "\n".join(left_out) + "\n")


def _remove_tree(path: Path) -> None:
    """Remove ``path`` even where the code under test made directories read-only."""

    def retry(function: Callable[[str], object], target: str, _: object) -> None:
        with contextlib.suppress(OSError):
            os.chmod(os.path.dirname(target), stat.S_IRWXU)
            os.chmod(target, stat.S_IRWXU)
        function(target)

    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.exists():
        shutil.rmtree(path, onerror=retry)


@contextlib.contextmanager
def check_workspace(
    check: Check, answer_file: tuple[str, str] | None = None
) -> Iterator[Workspace]:
    """The workspace ``check`` is judged in (see the module docstring). ``answer_file``
    (relative path, text) is written into a fresh workspace, never into an agent's."""
    isolation = str(check.options.get("isolation", "auto"))
    if check.container is not None:  # the agent's workspace, in the task's container
        from pytest_agentbench.sandbox.container_workspace import ContainerWorkspace

        inside = None if check.workspace is None else check.workspace.as_posix()
        yield ContainerWorkspace(check.container, inside)
        return
    if check.workspace is not None:
        yield Workspace(check.workspace, isolation)
        return
    scratch = None
    if check.verifier_dir is not None:
        root = check.verifier_dir.parent / "workspace"
        _remove_tree(root)
    else:
        scratch = tempfile.TemporaryDirectory(prefix="agentbench-workspace-")
        root = Path(scratch.name) / "workspace"
    try:
        task = check.task
        workspace = Workspace.create(root, task.files, task.files_dir, isolation=isolation)
        if answer_file is not None:
            workspace.write_file(*answer_file)
        yield workspace
        if scratch is None:
            workspace.prune(KEEP_BYTES)
    finally:
        if scratch is not None:
            with contextlib.suppress(OSError):
                _remove_tree(root)
            scratch.cleanup()


def clear_artifacts(check: Check, *names: str) -> None:
    """Remove this verifier's artifacts of an earlier attempt, so none is stale."""
    if check.verifier_dir is not None:
        for name in names:
            (check.verifier_dir / name).unlink(missing_ok=True)


def discard_foreign_files(check: Check) -> list[str]:
    """Remove everything in the verifier dir: called after untrusted code ran and before
    the verifier writes its own files, so nothing the code put there (a forged
    ``ctrf.json`` or ``reward.json``, where the sandbox leaves the host writable) is ever
    read as this task's result. Returns the names removed."""
    directory = check.verifier_dir
    if directory is None or not directory.is_dir():
        return []
    removed = []
    for entry in sorted(directory.iterdir()):
        with contextlib.suppress(OSError):
            _remove_tree(entry)
            removed.append(entry.name)
    return removed


def write_artifact(check: Check, name: str, content: str | Mapping[str, JsonValue]) -> None:
    """Write ``verifier/<name>`` atomically (JSON for a mapping); nothing without a
    rollout directory."""
    if check.verifier_dir is None:
        return
    path = check.verifier_dir / name
    if isinstance(content, str):
        write_text_atomic(path, content)
    else:
        write_json_atomic(path, dict(content))
