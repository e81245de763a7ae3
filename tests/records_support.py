"""Task records made by hand for the tests of the reports: every field a record has, set
to a plain default, with the given ones over them, read through ``TaskRecord.from_json``
(so a test's record is one the run could have written)."""

from __future__ import annotations

from typing import Any

from pytest_agentbench.core.task_record import TaskRecord


def make_record(**fields: Any) -> TaskRecord:
    """A failed task's record with ``fields`` (JSON values, as in result.json) over the
    defaults; a ``verdict`` missing ``error`` or ``metrics`` gets None / {}."""
    data: dict[str, Any] = {
        "nodeid": f"bench_s.toml::{fields.get('task_id', 't')}",
        "file": "bench_s.toml",
        "suite": "s",
        "task_id": "t",
        "model": "scripted",
        "outcome": "failed",
        "reward": 0.0,
        "first_attempt_reward": None,
        "pass_threshold": 1.0,
        "attempts": 1,
        "repaired": False,
        "incomplete": False,
        "failure_kind": None,
        "repair": {},
        "loop": None,
        "last_feedback": None,
        "usage": {},
        "error": None,
        "verdict": None,
        "max_tokens": None,
        "min_score": None,
        "start_ms": 0,
        "duration_ms": 0,
        "rollout_dir": None,
        "verifier_dir": None,
        "failure": None,
    }
    data.update(fields)
    verdict = data.get("verdict")
    if isinstance(verdict, dict):
        data["verdict"] = {"reward": None, "metrics": {}, "error": None, **verdict}
    return TaskRecord.from_json(data)
