"""Model clients: one per wire protocol, one interface (ModelClient) for the rest."""

from __future__ import annotations

from pytest_agentbench.models.base import (
    Generation,
    ModelClient,
    ModelRequest,
    ModelSpec,
    StreamEvent,
    ToolCall,
    ToolSpec,
    Usage,
)

__all__ = [
    "Generation",
    "ModelClient",
    "ModelRequest",
    "ModelSpec",
    "StreamEvent",
    "ToolCall",
    "ToolSpec",
    "Usage",
]
