"""pytest-agentbench: benchmark LLMs and agents with pytest.

The public API: the error tree, the records a verifier or client plugin works with, and
``hookimpl`` for implementing the ``pytest_agentbench_*`` hooks. Importing this package is
cheap (no HTTP client, no schema validator), so the plugin stays inert until asked for.
"""

from __future__ import annotations

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
]
