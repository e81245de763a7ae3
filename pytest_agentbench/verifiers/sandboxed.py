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
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_agentbench.artifacts.jsonio import write_json_atomic, write_text_atomic
from pytest_agentbench.sandbox import ISOLATION_MODES, KEEP_BYTES, CommandResult, Limits, Workspace
from pytest_agentbench.sandbox.cpuslots import cpu_slot
from pytest_agentbench.verifiers.base import Check

DEFAULT_TIMEOUT_S = 30.0

#: Options every code-running verifier takes (merged into its options schema).
SANDBOX_OPTIONS: dict[str, Any] = {
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
        "enum": list(ISOLATION_MODES),
        "default": "auto",
        "description": "auto: the best isolation available; strict: refuse to run "
        "without bubblewrap; basic: no namespaces.",
    },
}


def limits_from(options: Mapping[str, Any]) -> Limits:
    """The sandbox limits a verifier's options ask for."""
    return Limits(
        timeout_s=float(options.get("timeout_s", DEFAULT_TIMEOUT_S)),
        cpu_s=float(options.get("timeout_s", DEFAULT_TIMEOUT_S)),
        memory_mb=int(options.get("memory_mb", 1024)),
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


def _remove_tree(path: Path) -> None:
    """Remove ``path`` even where the code under test made directories read-only."""

    def retry(function: Any, target: str, _: Any) -> None:
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


def write_artifact(check: Check, name: str, content: str | Mapping[str, Any]) -> None:
    """Write ``verifier/<name>`` atomically (JSON for a mapping); nothing without a
    rollout directory."""
    if check.verifier_dir is None:
        return
    path = check.verifier_dir / name
    if isinstance(content, str):
        write_text_atomic(path, content)
    else:
        write_json_atomic(path, dict(content))
