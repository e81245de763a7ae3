"""Verifiers: turn an answer into a Verdict. Built-ins register through the same hook a
third-party plugin uses (``pytest_agentbench_verifiers``)."""

from __future__ import annotations

from pytest_agentbench.verifiers.base import (
    Check,
    ConfigProblem,
    FunctionVerifier,
    Verdict,
    Verifier,
)

__all__ = ["Check", "ConfigProblem", "FunctionVerifier", "Verdict", "Verifier"]
