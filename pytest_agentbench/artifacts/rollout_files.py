"""Write a rollout's files: result.json, trajectory.json, verifier/reward.json."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TypeVar, cast

from pytest_agentbench.artifacts.jsonio import dumps, write_text_atomic
from pytest_agentbench.core.jsontypes import JsonObject, JsonValue
from pytest_agentbench.core.records import Rollout

REDACTED = "[redacted]"
_T = TypeVar("_T")
_SECRET_HEADERS = {"authorization", "x-api-key", "api-key", "proxy-authorization"}


def _secret_list(secrets: Iterable[str]) -> list[str]:
    return [s for s in secrets if s and len(s) >= 4]


def _needs_redaction(text: str, secret_list: list[str]) -> bool:
    """Whether JSON ``text`` may hold a secret: a secret header's name, or a secret
    (as it is, or as JSON escapes it). A cheap scan; the walk runs only when it hits."""
    lowered = text.lower()
    if any(name in lowered for name in _SECRET_HEADERS):
        return True
    return any(s in text or dumps(s)[1:-1] in text for s in secret_list)


def redact(value: _T, secrets: Iterable[str] = ()) -> _T:
    """``value`` with secret header values and every known secret string replaced by
    ``[redacted]`` (a copy; ``value`` itself when there is nothing to replace) — the last
    line of defence before anything hits disk."""
    return redacted_json(value, secrets)[0]


def redacted_json(value: _T, secrets: Iterable[str] = ()) -> tuple[_T, str]:
    """``redact(value, secrets)`` and its compact JSON text: encoded once when nothing
    needs replacing (the text the scan read is the answer)."""
    secret_list = _secret_list(secrets)
    text = dumps(value, indent=None)
    if not _needs_redaction(text, secret_list):
        return value, text
    # the same shape, the secrets replaced (a Mapping comes back a dict, a tuple a list)
    walked = cast(_T, _walk(value, secret_list))
    return walked, dumps(walked, indent=None)


def _walk(item: object, secret_list: list[str], key: str | None = None) -> object:
    if key is not None and key.lower() in _SECRET_HEADERS:
        return REDACTED
    if isinstance(item, Mapping):
        return {k: _walk(v, secret_list, str(k)) for k, v in item.items()}
    if isinstance(item, list | tuple):
        return [_walk(v, secret_list) for v in item]
    if isinstance(item, str):
        for secret in secret_list:
            if secret in item:
                item = item.replace(secret, REDACTED)
    return item


def _write_redacted(
    path: str, data: object, secret_list: list[str], *, make_parent: bool = False
) -> None:
    """Write ``data`` as JSON, redacted: encoded once, and again after the walk only when
    the text may hold a secret."""
    text = dumps(data)
    if _needs_redaction(text, secret_list):
        text = dumps(_walk(data, secret_list))
    write_text_atomic(path, text + "\n", make_parent=make_parent)


def write_rollout(task_dir: Path, rollout: Rollout, secrets: Iterable[str] = ()) -> None:
    """Write the rollout's trajectory and verifier files under ``task_dir`` atomically,
    redacting ``secrets``. ``result.json`` comes last (``write_result``): its presence
    means the task finished."""
    secret_list = _secret_list(secrets)
    base = os.fspath(task_dir)  # (paths as strings: this runs for every task)
    try:
        os.mkdir(base)
    except FileExistsError:
        if not os.path.isdir(base):  # a file in its place: said as such, not later
            raise
    except FileNotFoundError:
        os.makedirs(base, exist_ok=True)
    _write_redacted(
        f"{base}/trajectory.json",
        {"task": rollout.task_key, "model": rollout.model, "requests": rollout.trajectory},
        secret_list,
    )
    verdict = rollout.verdict
    if verdict is not None:
        reward: dict[str, object] = {
            "reward": verdict["reward"],
            "metrics": verdict.get("metrics") or {},
            "details": verdict.get("details") or {},
        }
        if verdict.get("error"):
            reward["error"] = verdict["error"]
        verifier = f"{base}/verifier"
        with contextlib.suppress(FileExistsError):  # a verifier may have made it
            os.mkdir(verifier)
        _write_redacted(f"{verifier}/reward.json", reward, secret_list)


def write_result(
    task_dir: Path,
    rollout: Rollout,
    record: Mapping[str, object],
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
    path = f"{os.fspath(task_dir)}/result.json"
    _write_redacted(path, result, _secret_list(secrets), make_parent=True)


def read_result(task_dir: Path) -> JsonObject | None:
    """A finished task's result.json, or None when it is missing or unreadable."""
    try:
        data: JsonValue = json.loads((task_dir / "result.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None
