"""pytest-agentbench: benchmark LLMs and agents with pytest.

The public API: the error tree, the records a verifier or client plugin works with, and
``hookimpl`` for implementing the ``pytest_agentbench_*`` hooks. Importing this package is
cheap (no HTTP client, no schema validator), so the plugin stays inert until asked for.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_agentbench.errors import (
    AgentbenchError,
    ModelError,
    ModelTimeout,
    ProviderError,
    RateLimited,
    SandboxError,
    SuiteError,
    TransportError,
    VerifierError,
)

if TYPE_CHECKING:
    import pluggy

    hookimpl: pluggy.HookimplMarker

__version__ = "0.1.0"

__all__ = [
    "AgentbenchError",
    "ModelError",
    "ModelTimeout",
    "ProviderError",
    "RateLimited",
    "SandboxError",
    "SuiteError",
    "TransportError",
    "VerifierError",
    "__version__",
    "hookimpl",
]


def __getattr__(name: str) -> object:
    """``hookimpl``, the marker of the ``pytest_agentbench_*`` hook implementations: the
    same marker as ``pytest.hookimpl`` (the hooks live in pytest's plugin manager, whose
    project name it carries), made when first asked for, so importing this package stays
    cheap and imports neither pytest nor pluggy."""
    if name == "hookimpl":
        import pluggy

        marker = pluggy.HookimplMarker("pytest")
        globals()["hookimpl"] = marker
        return marker
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
