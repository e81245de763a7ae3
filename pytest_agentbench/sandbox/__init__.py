"""The sandbox: workspaces and process isolation for untrusted code.

``Workspace`` is the directory a rollout's code lives in; ``Workspace.run`` runs a command
there under ``Limits`` and returns a ``CommandResult``; ``containment`` says what isolation
this machine gives (docs/sandbox.md has the threat model).
"""

from __future__ import annotations

from pytest_agentbench.errors import SandboxError
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
