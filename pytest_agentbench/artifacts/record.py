"""The small per-task record that travels from a worker to the controller and feeds
ctrf.json, summary.json and the terminal summary. JSON-safe, a few hundred bytes."""

from __future__ import annotations

from collections.abc import Mapping
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
    sampling: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Summarise ``rollout`` for the run-level reports (the details stay in result.json).
    ``sampling`` is the sampling settings sent with its requests (``Sampling.public()``)."""
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
        "sampling": dict(sampling or {}),
        "min_score": min_score,
        "start_ms": int(rollout.started_at * 1000),
        "duration_ms": max(0, int(rollout.elapsed_s * 1000)),
        "rollout_dir": str(rollout_dir),
        "verifier_dir": str(rollout_dir / "verifier"),
    }


def record_without_rollout(
    *,
    nodeid: str,
    file: str,
    suite: str,
    task_id: str,
    model: str,
    outcome: str,
    cause: str,
    failure_kind: str,
    start_ms: int,
    duration_ms: int,
    rollout_dir: str | None = None,
    pass_threshold: float | None = None,
    usage: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The record of a task that ended without a rollout record (a plugin's exception,
    pytest-timeout, a crashed xdist worker): the same fields as :func:`task_record`, no
    attempts, and ``cause`` kept whole as its error, message and trace."""
    return {
        "nodeid": nodeid,
        "file": file,
        "suite": suite,
        "task_id": task_id,
        "model": model,
        "outcome": outcome,
        "reward": None,
        "first_attempt_reward": None,
        "pass_threshold": pass_threshold,
        "attempts": 0,
        "repaired": False,
        "incomplete": False,
        "failure_kind": failure_kind,
        "repair": {},
        "loop": None,
        "last_feedback": None,
        "usage": usage if usage is not None else {},
        "error": cause,
        "verdict": None,
        "max_tokens": None,
        "min_score": None,
        "start_ms": start_ms,
        "duration_ms": duration_ms,
        "rollout_dir": rollout_dir,
        "verifier_dir": str(Path(rollout_dir) / "verifier") if rollout_dir else None,
        "message": cause,
        "trace": cause,
    }
