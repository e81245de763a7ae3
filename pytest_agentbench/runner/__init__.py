"""The rollout runner: generation, verification, repair rounds, outcomes. Knows nothing of
pytest; the plugin calls ``run_rollout`` and writes what it returns."""

from __future__ import annotations

from pytest_agentbench.runner.records import OUTCOMES, Attempt, Outcome, Rollout
from pytest_agentbench.runner.rollout import run_rollout

__all__ = ["OUTCOMES", "Attempt", "Outcome", "Rollout", "run_rollout"]
