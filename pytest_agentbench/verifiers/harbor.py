"""The ``harbor`` verifier: a Harbor task's ``tests/test.sh``, run as Harbor runs it, in
the rollout's container after the agent ended.

In order: every process the agent left is ended; a symlink in a log folder (planted by
the agent: nothing of ours makes one) refuses the verification; what the agent left in
``/logs/verifier`` (a forged reward, a stale one) is removed; ``tests/`` is copied to
``/tests`` (anything the agent put there is removed first); ``test.sh`` runs from the
workdir with the task's ``[verifier]`` timeout, env and user; every process it left is
ended; ``/logs/verifier`` is copied out to the rollout's ``verifier/`` folder (links as
links) and read there, never through a link.

``reward.txt`` (one number) decides, else ``reward.json`` (named rewards, each a
metric): its ``reward`` key, else its only key (Harbor's mean needs exactly one). No
reward file, one that is not a finite number, a verifier past its timeout: an error
verdict that keeps what was there — never a silent 0, never a pass. Harbor's own
``reward.json`` is kept as ``harbor-reward.json`` (ours is written over ``reward.json``).
"""

from __future__ import annotations

import json
import math
import os
import shutil
import stat
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_agentbench.core.jsontypes import JsonObject, JsonValue
from pytest_agentbench.errors import ContainerError
from pytest_agentbench.suites.task import HARBOR, Task
from pytest_agentbench.verifiers.base import Check, ConfigProblem, FunctionVerifier, Verdict
from pytest_agentbench.verifiers.sandboxed import write_artifact

if TYPE_CHECKING:
    from pytest_agentbench.environments.container import Container

LOG_DIRS = ("/logs/agent", "/logs/verifier", "/logs/artifacts")
TESTS_DIR = "/tests"
#: The most of a reward file read (a number or a small table).
REWARD_LIMIT = 65_536
#: Harbor's own reward.json, kept beside ours under this name.
KEPT_REWARD_JSON = "harbor-reward.json"
_STDOUT_CAP = 1 << 20
_HOUSEKEEPING_S = 60.0


def _options_schema() -> JsonObject:
    return {
        "type": "object",
        "properties": {
            "tests": {
                "type": "string",
                "minLength": 1,
                "description": "The task's tests/ folder, copied to /tests (test.sh runs).",
            },
            "timeout_s": {
                "type": "number",
                "exclusiveMinimum": 0,
                "default": 600,
                "description": "Seconds test.sh may run ([verifier] timeout_sec).",
            },
            "env": {
                "type": "object",
                "additionalProperties": {"type": "string"},
                "description": "test.sh's environment variables ([verifier] env).",
            },
            "user": {
                "type": "string",
                "minLength": 1,
                "description": "The user test.sh runs as ([verifier] user).",
            },
        },
        "additionalProperties": False,
    }


def check_task(task: Task) -> Iterable[ConfigProblem]:
    """A harbor verifier needs the task's container and its tests folder."""
    if task.environment is None:
        yield ConfigProblem((), "needs an environment (a Harbor task folder has one)")
    tests = task.verifier.options.get("tests")
    if not isinstance(tests, str):
        yield ConfigProblem(("options", "tests"), "must name the task's tests/ folder")
    elif not (Path(tests) / "test.sh").is_file():
        yield ConfigProblem(("options", "tests"), f"holds no test.sh: {tests}")


def verify(check: Check) -> Verdict:
    container = check.container
    if container is None or check.verifier_dir is None:
        return Verdict(0.0, error="harbor verifier: the rollout has no container to verify in")
    options = check.options
    timeout = options.get("timeout_s", 600)
    timeout_s = float(timeout) if isinstance(timeout, int | float) else 600.0
    env = options.get("env")
    user = options.get("user")
    tests = Path(str(options.get("tests")))
    workdir = check.task.environment.workdir if check.task.environment else None
    try:
        container.kill_processes()  # nothing of the agent's runs on into the verification
        planted = _links(container)
        if planted:
            _copy_logs(container, check.verifier_dir)
            shown = ", ".join(planted[:5])
            return Verdict(
                0.0,
                details={"planted_links": list(planted)},
                error=f"harbor verifier: symlinks in the log folders, not made by the harness "
                f"(the agent planted them); not verified: {shown}",
            )
        _reset(container, tests)
        run = container.exec(
            ["bash", f"{TESTS_DIR}/test.sh"],
            timeout_s=timeout_s,
            user=str(user) if isinstance(user, str) else None,
            env=_strings(env),
            workdir=workdir,
            output_cap=_STDOUT_CAP,
        )
        container.kill_processes()  # a straggler test.sh left cannot write a reward later
        output = run.stdout + (f"\n[stderr]\n{run.stderr}" if run.stderr else "")
        _copy_logs(container, check.verifier_dir)
    except ContainerError as exc:
        return Verdict(0.0, error=f"harbor verifier: the container failed: {exc}")
    write_artifact(check, "test-stdout.txt", output)
    # nested, so the failure line is not made of these numbers (report/evidence.py)
    details: JsonObject = {
        "test_sh": {"exit_code": run.exit_code, "elapsed_s": round(run.elapsed_s, 3)}
    }
    if run.timed_out:
        return Verdict(
            0.0,
            details=details,
            error=f"harbor verifier: tests/test.sh did not finish within {timeout_s:g}s "
            "(verifier timeout_sec); its processes were ended and any reward it wrote is "
            "not used",
        )
    return _reward_verdict(check.verifier_dir, details, output)


def _strings(value: JsonValue) -> dict[str, str]:
    return {k: v for k, v in value.items() if isinstance(v, str)} if isinstance(value, dict) else {}


def _links(container: Container) -> list[str]:
    """The symlinks under the log folders (none of ours makes one)."""
    script = 'for d in "$@"; do [ -e "$d" ] && find "$d" -type l; done; true'
    found = container.exec(["sh", "-c", script, "sh", *LOG_DIRS], timeout_s=_HOUSEKEEPING_S)
    return sorted(line for line in found.stdout.splitlines() if line.strip())


def _reset(container: Container, tests: Path) -> None:
    """Empty ``/logs/verifier`` (stale rewards, forgeries), replace ``/tests`` with the
    task's own, and let any user write the verifier's log folder."""
    script = "rm -rf /logs/verifier /tests && mkdir -p /logs/verifier && chmod 777 /logs/verifier"
    done = container.exec(["sh", "-c", script], timeout_s=_HOUSEKEEPING_S)
    if done.exit_code != 0:
        raise ContainerError(f"cannot reset /logs/verifier and /tests: {done.stderr.strip()}")
    container.copy_in(tests, TESTS_DIR)


def _copy_logs(container: Container, verifier_dir: Path) -> None:
    """``/logs/verifier``'s files into ``verifier_dir`` (links copied as links); Harbor's
    ``reward.json`` lands as ``harbor-reward.json``."""
    landing = verifier_dir / ".logs"
    if landing.is_symlink() or landing.is_file():
        landing.unlink()
    elif landing.exists():
        shutil.rmtree(landing)  # an earlier attempt's: never follows a link
    container.copy_out("/logs/verifier", landing)
    for entry in sorted(landing.iterdir()):
        name = KEPT_REWARD_JSON if entry.name == "reward.json" else entry.name
        target = verifier_dir / name
        if target.exists() or target.is_symlink():
            continue  # ours wins: nothing of the container's replaces a harness file
        entry.rename(target)
    shutil.rmtree(landing)  # never follows a link


def _read_plain(path: Path) -> str | None:
    """A regular file's text (never through a link); None when absent. Raises ValueError
    for a link, a non-regular file or text that is not UTF-8."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(info.st_mode):
        raise ValueError(f"{path.name} is not a regular file")
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(fd, "rb") as file:
        data = file.read(REWARD_LIMIT + 1)
    if len(data) > REWARD_LIMIT:
        raise ValueError(f"{path.name} is over {REWARD_LIMIT} bytes")
    return data.decode("utf-8")


def _finite(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def named_rewards(text: str) -> dict[str, float]:
    """reward.json's named rewards; raises ValueError unless it is a flat table of
    finite numbers."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"reward.json is not JSON ({exc})") from None
    if not isinstance(data, dict) or not data:
        raise ValueError("reward.json must be a table of named rewards (name → number)")
    rewards: dict[str, float] = {}
    for name, value in data.items():
        number = _finite(value)
        if number is None:
            raise ValueError(f"reward.json: {name} must be a finite number; got {value!r}")
        rewards[name] = number
    return rewards


def _reward_verdict(verifier_dir: Path, details: JsonObject, output: str) -> Verdict:
    try:
        text = _read_plain(verifier_dir / "reward.txt")
        table = _read_plain(verifier_dir / KEPT_REWARD_JSON)
        rewards = named_rewards(table) if table is not None else {}
        if text is not None:
            reward = _finite(_number(text.strip()))
            if reward is None:
                raise ValueError(
                    f"reward.txt must hold one finite number; got {text.strip()!r:.60}"
                )
            source = "reward.txt"
        elif rewards:
            reward, source = _main_reward(rewards), "reward.json"
        else:
            raise ValueError(
                "tests/test.sh wrote no reward: neither /logs/verifier/reward.txt nor "
                "/logs/verifier/reward.json"
            )
    except (ValueError, OSError) as exc:
        return Verdict(0.0, details=details, error=f"harbor verifier: {exc}")
    found: JsonObject = {"file": source, "raw": reward}
    if rewards:
        found["named"] = dict(rewards)
    details = {**details, "reward": found}
    metrics = {name: value for name, value in rewards.items() if name != "reward"}
    return Verdict(
        min(1.0, max(0.0, reward)), metrics=metrics, details=details, feedback=output[-2000:]
    )


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def _main_reward(rewards: Mapping[str, float]) -> float:
    """The reward of named rewards: the ``reward`` key, else the only one."""
    if "reward" in rewards:
        return rewards["reward"]
    if len(rewards) == 1:
        return next(iter(rewards.values()))
    names = ", ".join(sorted(rewards))
    raise ValueError(
        f"reward.json names {len(rewards)} rewards ({names}) and no `reward`: Harbor's mean "
        "needs exactly one; add a reward key"
    )


HARBOR_VERIFIER = FunctionVerifier(HARBOR, verify, _options_schema(), check_task)
