"""The rollout runner: generation, verification, repair rounds, outcomes. Knows nothing of
pytest; the plugin calls ``run_rollout`` and writes the ``Rollout`` record it returns
(core/records.py)."""

from __future__ import annotations

from pytest_agentbench.runner.rollout import run_rollout

__all__ = ["run_rollout"]
