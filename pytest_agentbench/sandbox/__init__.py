"""The sandbox: workspaces and process isolation for untrusted code.

``Workspace`` is the directory a rollout's code lives in; ``Workspace.run`` runs a command
there under ``Limits`` and returns a ``CommandResult``; ``containment`` says what isolation
this machine gives (docs/sandbox.md has the threat model).

The names are looked up on first use: a run whose tasks start no sandboxed command (a plain
answer, an in-process verifier) imports a submodule it needs (``cpuslots``) without the
isolation, process and workspace modules.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_agentbench.errors import SandboxError

if TYPE_CHECKING:
    from pytest_agentbench.sandbox.isolation import ISOLATION_MODES, containment
    from pytest_agentbench.sandbox.process import CommandResult, Limits
    from pytest_agentbench.sandbox.workspace import KEEP_BYTES, Workspace

__all__ = [
    "ISOLATION_MODES",
    "KEEP_BYTES",
    "CommandResult",
    "Limits",
    "SandboxError",
    "Workspace",
    "containment",
]


def __getattr__(name: str) -> object:
    if name in ("ISOLATION_MODES", "containment"):
        from pytest_agentbench.sandbox import isolation

        return getattr(isolation, name)
    if name in ("CommandResult", "Limits"):
        from pytest_agentbench.sandbox import process

        return getattr(process, name)
    if name in ("KEEP_BYTES", "Workspace"):
        from pytest_agentbench.sandbox import workspace

        return getattr(workspace, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
