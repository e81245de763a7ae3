"""The small per-task record that travels from a worker to the controller and feeds
ctrf.json, summary.json and the terminal summary. JSON-safe, a few hundred bytes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pytest_agentbench.core.records import Rollout


def task_record(
    rollout: Rollout,
    *,
    nodeid: str,
    file: str,
    rollout_dir: Path,
    max_tokens: int | None,
    min_score: float | None = None,
) -> dict[str, Any]:
    """Summarise ``rollout`` for the run-level reports (the details stay in result.json)."""
    verdict = rollout.verdict
    feedback = [
        str(a.verdict.get("feedback"))
        for a in rollout.attempts
        if a.verdict is not None and a.verdict.get("feedback")
    ]
    return {
        "nodeid": nodeid,
        "file": file,
        "suite": rollout.suite,
        "task_id": rollout.task_id,
        "model": rollout.model,
        "outcome": rollout.outcome,
        "reward": rollout.reward,
        "first_attempt_reward": rollout.first_attempt_reward,
        "pass_threshold": rollout.pass_threshold,
        "attempts": len(rollout.attempts),
        "repaired": rollout.repaired,
        "incomplete": rollout.incomplete,
        "failure_kind": rollout.failure_kind,
        "repair": dict(rollout.repair),
        "loop": rollout.loop,
        "last_feedback": feedback[-1] if feedback else None,
        "usage": rollout.usage,
        "error": rollout.error,
        "verdict": None
        if verdict is None
        else {
            "reward": verdict.get("reward"),
            "metrics": dict(verdict.get("metrics") or {}),
            "error": verdict.get("error"),
        },
        "max_tokens": max_tokens,
        "min_score": min_score,
        "start_ms": int(rollout.started_at * 1000),
        "duration_ms": max(0, int(rollout.elapsed_s * 1000)),
        "rollout_dir": str(rollout_dir),
        "verifier_dir": str(rollout_dir / "verifier"),
    }
