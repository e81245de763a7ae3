"""Write a rollout's files: result.json, trajectory.json, verifier/reward.json."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from pytest_agentbench.artifacts.jsonio import write_json_atomic
from pytest_agentbench.runner.records import Rollout

REDACTED = "[redacted]"
_SECRET_HEADERS = {"authorization", "x-api-key", "api-key", "proxy-authorization"}


def redact(value: Any, secrets: Iterable[str] = ()) -> Any:
    """A copy of ``value`` with secret header values and every known secret string
    replaced by ``[redacted]`` — the last line of defence before anything hits disk."""
    secret_list = [s for s in secrets if s and len(s) >= 4]

    def walk(item: Any, key: str | None = None) -> Any:
        if key is not None and key.lower() in _SECRET_HEADERS:
            return REDACTED
        if isinstance(item, Mapping):
            return {k: walk(v, str(k)) for k, v in item.items()}
        if isinstance(item, list | tuple):
            return [walk(v) for v in item]
        if isinstance(item, str):
            for secret in secret_list:
                if secret in item:
                    item = item.replace(secret, REDACTED)
        return item

    return walk(value)


def write_rollout(task_dir: Path, rollout: Rollout, secrets: Iterable[str] = ()) -> None:
    """Write the rollout's trajectory and verifier files under ``task_dir`` atomically,
    redacting ``secrets``. ``result.json`` comes last (``write_result``): its presence
    means the task finished."""
    secrets = tuple(secrets)
    write_json_atomic(
        task_dir / "trajectory.json",
        redact(
            {"task": rollout.task_key, "model": rollout.model, "requests": rollout.trajectory},
            secrets,
        ),
    )
    verdict = rollout.verdict
    if verdict is not None:
        reward: dict[str, Any] = {
            "reward": verdict["reward"],
            "metrics": verdict.get("metrics") or {},
            "details": verdict.get("details") or {},
        }
        if verdict.get("error"):
            reward["error"] = verdict["error"]
        write_json_atomic(task_dir / "verifier" / "reward.json", redact(reward, secrets))


def write_result(
    task_dir: Path,
    rollout: Rollout,
    record: Mapping[str, Any],
    *,
    fingerprint: str,
    secrets: Iterable[str] = (),
) -> None:
    """Write ``result.json``: the rollout, the settings fingerprint it ran under, and the
    record the reports use (so a resumed run can report the task without running it)."""
    result = rollout.as_dict()
    result["rollout_dir"] = str(task_dir)
    result["fingerprint"] = fingerprint
    result["record"] = dict(record)
    write_json_atomic(task_dir / "result.json", redact(result, tuple(secrets)))


def read_result(task_dir: Path) -> dict[str, Any] | None:
    """A finished task's result.json, or None when it is missing or unreadable."""
    try:
        data = json.loads((task_dir / "result.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None
