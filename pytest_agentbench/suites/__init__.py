"""Suites: file formats, the JSON Schema, loading and validation into Task records."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_agentbench.suites.task import Task, VerifierConfig

if TYPE_CHECKING:
    from pytest_agentbench.suites.load import Suite, load_suite

__all__ = ["Suite", "Task", "VerifierConfig", "load_suite"]


def __getattr__(name: str) -> object:
    # Loading pulls in jsonschema; importing Task alone (the runner does) must stay light.
    if name in ("Suite", "load_suite"):
        from pytest_agentbench.suites import load

        return getattr(load, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
