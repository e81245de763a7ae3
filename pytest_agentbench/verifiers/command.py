"""The ``command`` verifier: a shell command judges the workspace after the model is done.

The command (``options.run``, else a string target) runs in the sandbox, in the agent's
workspace (in the task's container, when it has an environment) or else in a fresh one
seeded from the task's files with the answer in ``answer.txt``. It reports by writing
``reward.json`` (flat ``{"reward": r, "name": …, "<metric>": n}`` or nested
``{"reward": r, "metrics": {…}, "details": {…}}``) or ``reward.txt`` (one number) in the
workspace; without either, its exit status decides
(0 → 1.0, else 0.0). Reward files from before the command ran are removed first, so only
this run's count. A reward that is not a finite number in [0, 1] is an error verdict,
never a silent 0.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import TypeGuard

from pytest_agentbench.core.jsontypes import JsonObject, JsonValue
from pytest_agentbench.errors import SandboxError, VerifierError
from pytest_agentbench.sandbox import CommandResult, Workspace
from pytest_agentbench.suites.task import Task
from pytest_agentbench.verifiers.base import Check, ConfigProblem, FunctionVerifier, Verdict
from pytest_agentbench.verifiers.sandboxed import (
    SANDBOX_OPTIONS,
    check_workspace,
    clear_artifacts,
    discard_foreign_files,
    limits_from,
    run_sandboxed,
    write_artifact,
)
from pytest_agentbench.verifiers.text import cannot_judge, excerpt, unusable

REWARD_FILES = ("reward.json", "reward.txt")
REWARD_FILE_LIMIT = 1_000_000
ANSWER_FILE = "answer.txt"
_TAIL = 2000


def _finite(value: object) -> TypeGuard[float]:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _reward(value: object, source: str) -> float:
    if not _finite(value):
        raise VerifierError(f"command verifier: {source} must hold a finite number; got {value!r}")
    if not 0 <= value <= 1:
        raise VerifierError(f"command verifier: {source} must be between 0 and 1; got {value!r}")
    return float(value)


def parse_reward_json(text: str) -> tuple[float, dict[str, float], JsonObject]:
    """(reward, metrics, details) from a ``reward.json``; raises VerifierError."""
    try:
        data: JsonValue = json.loads(text)
    except ValueError as exc:
        raise VerifierError(f"command verifier: reward.json is not JSON ({exc})") from None
    if not isinstance(data, dict) or "reward" not in data:
        raise VerifierError('command verifier: reward.json must be an object with a "reward" key')
    reward = _reward(data["reward"], 'reward.json "reward"')
    metrics: dict[str, float] = {}
    details: JsonObject = {}
    nested = data.get("metrics")
    if isinstance(nested, Mapping):
        for name, value in nested.items():
            if not _finite(value):
                raise VerifierError(
                    f"command verifier: reward.json metric {name!r} must be a finite number; "
                    f"got {value!r}"
                )
            metrics[str(name)] = float(value)
    found = data.get("details")
    if isinstance(found, Mapping):
        details.update(found)
    for name, value in data.items():
        if name in ("reward", "metrics", "details"):
            continue
        if _finite(value):
            metrics[name] = float(value)
        else:
            details[name] = value
    return reward, metrics, details


def parse_reward_txt(text: str) -> float:
    """The one number of a ``reward.txt``; raises VerifierError."""
    try:
        value = float(text.strip())
    except ValueError:
        shown = excerpt(text.strip(), 80)
        message = f"command verifier: reward.txt must hold one number; got {shown!r}"
        raise VerifierError(message) from None
    return _reward(value, "reward.txt")


def _present(workspace: Workspace) -> list[str]:
    """The reward files in the workspace (a link counts: reading it is refused)."""
    if workspace.containment().get("level") == "container":  # looked for in there
        script = 'for f in "$@"; do if [ -L "$f" ] || [ -e "$f" ]; then echo "$f"; fi; done'
        found = workspace.run(["sh", "-c", script, "sh", *REWARD_FILES])
        return [name for name in REWARD_FILES if name in found.stdout.split()]
    return [
        name
        for name in REWARD_FILES
        if (workspace.path / name).is_symlink() or (workspace.path / name).exists()
    ]


def _clear_stale(workspace: Workspace) -> None:
    """Remove reward files from before the check ran (a link itself, never its target)."""
    if workspace.containment().get("level") == "container":
        workspace.run(["rm", "-f", "--", *REWARD_FILES])
        return
    for name in REWARD_FILES:
        stale = workspace.resolve(name)
        if stale.is_symlink() or stale.is_file():
            stale.unlink()


def _judge(
    workspace: Workspace, result: CommandResult
) -> tuple[float, dict[str, float], JsonObject, str]:
    """(reward, metrics, details, where the reward came from)."""
    present = _present(workspace)
    for name in REWARD_FILES:
        if name not in present:
            continue
        text = workspace.read_file(name, limit=REWARD_FILE_LIMIT)
        if name == "reward.json":
            return (*parse_reward_json(text), name)
        return parse_reward_txt(text), {}, {}, name
    return (1.0 if result.exit_code == 0 else 0.0), {}, {}, "exit status"


def _last_line(result: CommandResult) -> str:
    """``: <the last non-empty line of output>`` (stderr first), or nothing."""
    for text in (result.stderr, result.stdout):
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        if lines:
            return f": {excerpt(lines[-1], 200)}"
    return ""


def check_report(run: str, why: str, result: CommandResult) -> JsonObject:
    """A one-test CTRF report of a check that failed without a reward file (its exit
    status, or a limit, decided): the failure line then says why, not a count."""
    duration = max(0, int(result.elapsed_s * 1000))
    test: JsonObject = {
        "name": "check",
        "status": "failed",
        "duration": duration,
        "rawStatus": "failed",
        "message": why,
        "trace": f"$ {run}\n{(result.stdout + result.stderr)[-_TAIL:]}",
    }
    summary = {"tests": 1, "passed": 0, "failed": 1, "skipped": 0, "pending": 0, "other": 0}
    return {
        "reportFormat": "CTRF",
        "specVersion": "0.0.0",
        "generatedBy": "pytest-agentbench command",
        "results": {
            "tool": {"name": "command"},
            "summary": {**summary, "start": 0, "stop": duration},
            "tests": [test],
        },
    }


def check_command(task: Task) -> list[ConfigProblem]:
    """There must be a command: options.run, else a string target."""
    run = task.verifier.options.get("run", task.target)
    if isinstance(run, str) and run.strip():
        return []
    at = ("options", "run") if "run" in task.verifier.options else ("target",)
    error = VerifierError(
        "command verifier: set options.run (or the target) to the command that checks; "
        f"got {type(run).__name__}"
    )
    return [unusable(at, error)]


def verify_command(check: Check) -> Verdict:
    """Run ``options.run`` (default: a string target); the reward is its reward file's,
    or its exit status's."""
    run = check.options.get("run", check.task.target)
    got = excerpt(check.answer)
    if not isinstance(run, str) or not run.strip():
        error = VerifierError(
            "command verifier: set options.run (or the target) to the command that checks; "
            f"got {type(run).__name__}"
        )
        return cannot_judge(error, got=got, extraction="whole answer")
    clear_artifacts(check, "test-stdout.txt", "test-stderr.txt", "ctrf.json")
    answer_file = None if check.workspace is not None else (ANSWER_FILE, check.answer)
    try:
        with check_workspace(check, answer_file) as workspace:
            _clear_stale(workspace)
            result = run_sandboxed(workspace, run, limits=limits_from(check.options))
            discard_foreign_files(check)
            write_artifact(check, "test-stdout.txt", result.stdout)
            if result.stderr:
                write_artifact(check, "test-stderr.txt", result.stderr)
            details: JsonObject = {
                "got": got,
                "extraction": "whole answer",
                "run": run,
                "exit_code": result.exit_code,
                "killed_by": result.killed_by,
                "elapsed_s": round(result.elapsed_s, 3),
                "output_tail": (result.stdout + result.stderr)[-_TAIL:],
                "containment": workspace.containment(),
            }
            if result.killed_by is not None:
                details["source"] = "none"
                why = f"the check did not finish: stopped by {result.killed_by}"
                write_artifact(check, "ctrf.json", check_report(run, why, result))
                return Verdict(reward=0.0, details=details, feedback=f"{why[0].upper()}{why[1:]}.")
            reward, metrics, found, source = _judge(workspace, result)
            if reward < 1 and source == "exit status":
                why = f"exit status {result.exit_code}" + _last_line(result)
                write_artifact(check, "ctrf.json", check_report(run, why, result))
    except VerifierError as exc:
        return cannot_judge(exc, got=got, extraction="whole answer")
    except SandboxError as exc:
        return cannot_judge(VerifierError(f"command verifier: {exc}"), got=got)
    details["source"] = source
    details.update({key: value for key, value in found.items() if key not in details})
    feedback = ""
    if reward < 1:
        feedback = f"The check scored {reward:g} (from {source}; exit status {result.exit_code})."
    return Verdict(reward=reward, metrics=metrics, details=details, feedback=feedback)


COMMAND = FunctionVerifier(
    kind="command",
    function=verify_command,
    task_check=check_command,
    options_schema={
        "type": "object",
        "properties": {
            "run": {
                "type": "string",
                "minLength": 1,
                "description": "Shell command run in the workspace (default: the task's "
                "target); it writes reward.json or reward.txt, or its exit status decides.",
            },
            **SANDBOX_OPTIONS,
        },
        "additionalProperties": False,
    },
)
