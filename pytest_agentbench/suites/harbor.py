"""Harbor task folders as ordinary tasks (docs/environments.md, "Harbor tasks").

A Harbor task is a folder holding ``task.toml`` and ``instruction.md`` (plus
``environment/``, ``tests/test.sh``, ``solution/solve.sh``); a folder of them is a
dataset, run as a suite named after that folder. Each becomes one ``Task``: agent mode,
its input ``instruction.md`` as written, the ``harbor`` verifier (``tests/test.sh`` run
in the rollout's container) and the container described by ``task.environment``. So
every option, report and control works on it as on our own suites.

A layout we do not run is refused here, before anything is built, with the reason: the
older Terminal-Bench ``task.yaml`` + ``run-tests.sh`` folders, Harbor's multi-step
``steps/``, Compose environments, a separate verifier container, GPUs.

Scripted replies (the offline model's) have no place in Harbor's format: they are read
from ``[metadata.agentbench]`` in task.toml (``scripted``, also ``max_turns``,
``pass_threshold``, ``marks``), a table Harbor itself leaves alone.
"""

from __future__ import annotations

import tomllib
from collections.abc import Callable
from pathlib import Path

from pytest_agentbench.core.jsontypes import JsonObject, JsonValue
from pytest_agentbench.errors import SuiteError
from pytest_agentbench.suites.environment import TaskEnvironment
from pytest_agentbench.suites.harbor_layout import INSTRUCTION
from pytest_agentbench.suites.harbor_toml import HarborConfig, read_config
from pytest_agentbench.suites.task import HARBOR, AgentConfig, Task, VerifierConfig
from pytest_agentbench.suites.validate import (
    agent_validator,
    id_problem,
    mark_problem,
    show,
    type_name,
)

#: Turns of the built-in agent per task unless ``[metadata.agentbench] max_turns`` says.
DEFAULT_MAX_TURNS = 50
#: Time a rollout gets beyond the build, the agent and the verifier: starting and
#: removing its container, copying the tests in and the logs out.
SLACK_S = 60.0
#: The oracle: the reference solution run in the container by the built-in loop's bash
#: tool (a scripted reply, played like any control's), then an empty answer.
SOLUTION_DIR = "/solution"
_COMPOSE = ("docker-compose.yaml", "docker-compose.yml", "compose.yaml", "compose.yml")
_AGENTBENCH_KEYS = ("scripted", "max_turns", "pass_threshold", "marks", "agent")

#: Judges one scripted reply at a path (suites/validate.ReplyCheck).
ReplyCheck = Callable[[JsonValue, str], None]


def old_layout_problem() -> str:
    """Why an older Terminal-Bench task folder is not run, and what to do."""
    return (
        "an older Terminal-Bench task (task.yaml + run-tests.sh) is not run: convert it "
        "to a Harbor task folder (task.toml, instruction.md, environment/, tests/test.sh; "
        "Harbor's own `harbor tasks migrate` does this)"
    )


def oracle_replies() -> tuple[JsonValue, ...]:
    """The oracle's scripted replies: run ``solve.sh`` from the workdir, then stop."""
    command = f"bash {SOLUTION_DIR}/solve.sh"
    return ({"tool_calls": [{"name": "bash", "arguments": {"command": command}}]}, "")


def load_harbor_task(
    task_file: Path, *, reply_check: ReplyCheck | None = None, max_bytes: int = 1 << 20
) -> tuple[Task, list[str]]:
    """The task of the folder holding ``task_file``, and the warnings about it (unknown
    keys, keys read but not acted on). Raises SuiteError naming ``task_file`` with every
    problem found: a key of the wrong type or range, a missing part, a layout not run."""
    folder = task_file.parent
    problems: list[str] = []
    document = _read_toml(task_file, max_bytes, problems)
    instruction = _read_text(folder / INSTRUCTION, max_bytes, problems)
    config, found, warnings = read_config(document) if document is not None else (None, [], [])
    problems += found
    problems += _layout_problems(folder, config)
    own = _agentbench_table(config, problems, warnings, reply_check)
    if (why := id_problem(folder.name)) is not None:
        problems.append(f"the task folder's name {why}")
    if (why := id_problem(folder.parent.name)) is not None:
        problems.append(f"the dataset folder's name (the suite's) {why}")
    if problems or config is None or instruction is None:
        raise SuiteError(str(task_file), problems or ["cannot be read"])
    return _task(task_file, config, instruction, own), warnings


def _read_toml(path: Path, max_bytes: int, problems: list[str]) -> JsonObject | None:
    text = _read_text(path, max_bytes, problems)
    if text is None:
        return None
    try:
        document: JsonObject = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        problems.append(f"is not valid TOML: {exc}")
        return None
    return document


def _read_text(path: Path, max_bytes: int, problems: list[str]) -> str | None:
    try:
        size = path.stat().st_size
        if size > max_bytes:
            problems.append(f"{path.name} is {size} bytes; at most {max_bytes} are read")
            return None
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        problems.append(f"{path.name} is not UTF-8 text ({exc.reason} at byte {exc.start})")
    except OSError as exc:
        problems.append(f"{path.name} cannot be read: {exc.strerror or exc}")
    return None


def _layout_problems(folder: Path, config: HarborConfig | None) -> list[str]:
    """What of the folder we do not run, or what it lacks."""
    problems = []
    if (folder / "steps").is_dir():
        problems.append(
            "a multi-step task (steps/) is not run: only single-step Harbor tasks are "
            "(see docs/environments.md, Harbor tasks)"
        )
    environment = folder / "environment"
    compose = [name for name in _COMPOSE if (environment / name).is_file()]
    if compose:
        problems.append(
            f"environment/{compose[0]}: Compose environments (a main service and its "
            "sidecars) are not run; give environment/Dockerfile alone"
        )
    prebuilt = config is not None and config.docker_image is not None
    if not prebuilt and not (environment / "Dockerfile").is_file():
        problems.append(
            "environment/Dockerfile is missing, and [environment] docker_image names no "
            "prebuilt image: the task has no container to run in"
        )
    if not (folder / "tests" / "test.sh").is_file():
        problems.append("tests/test.sh is missing: the task cannot be verified")
    if config is not None and config.environment_mode == "separate":
        problems.append(
            'verifier.environment_mode = "separate" is not run: the verifier runs in the '
            'agent\'s container (give "shared" or leave it out)'
        )
    if config is not None and config.gpus > 0:
        problems.append(f"environment.gpus = {config.gpus}: containers get no GPUs here")
    return problems


def _agentbench_table(
    config: HarborConfig | None,
    problems: list[str],
    warnings: list[str],
    reply_check: ReplyCheck | None,
) -> JsonObject:
    """``[metadata.agentbench]``, checked; empty when absent."""
    if config is None:
        return {}
    own = config.metadata.get("agentbench", {})
    where = "metadata.agentbench"
    if not isinstance(own, dict):
        problems.append(f"{where} must be a table; got {type_name(own)} {show(own)}")
        return {}
    for key in own:
        if key not in _AGENTBENCH_KEYS:
            warnings.append(f"{where}.{key} is not a key agentbench reads; ignored")
    replies = own.get("scripted", [])
    if not isinstance(replies, list):
        problems.append(f"{where}.scripted must be an array of replies; got {type_name(replies)}")
    elif reply_check is not None:
        for index, reply in enumerate(replies):
            path = f"{where}.scripted[{index}]"
            try:
                reply_check(reply, path)
            except ValueError as exc:
                problems.append(f"{path} is not a valid scripted reply: {exc}")
    turns = own.get("max_turns", DEFAULT_MAX_TURNS)
    if isinstance(turns, bool) or not isinstance(turns, int) or turns < 1:
        problems.append(f"{where}.max_turns must be an integer of at least 1; got {show(turns)}")
    threshold = own.get("pass_threshold", 1.0)
    if isinstance(threshold, bool) or not isinstance(threshold, int | float):
        problems.append(f"{where}.pass_threshold must be a number; got {show(threshold)}")
    elif not 0 < threshold <= 1:
        problems.append(f"{where}.pass_threshold must be in (0, 1]; got {show(threshold)}")
    marks = own.get("marks", [])
    if not isinstance(marks, list):
        problems.append(f"{where}.marks must be an array of marker names; got {show(marks)}")
    else:
        for mark in marks:
            why = mark_problem(mark) if isinstance(mark, str) else "must be a string"
            if why is not None:
                problems.append(f"{where}.marks: {show(mark)} {why}")
    agent = own.get("agent")
    if agent is not None:
        for error in agent_validator().iter_errors(agent):
            at = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.path)
            problems.append(
                f"{where}.agent{at}: {error.message} (an agent under test, as a suite's "
                "agent table: docs/agents-external.md)"
            )
    return own


def _agent(own: JsonObject) -> AgentConfig | None:
    """The agent under test ``[metadata.agentbench.agent]`` names (checked by
    _agentbench_table), run in the task's container (agents/container_agent.py)."""
    agent = own.get("agent")
    if not isinstance(agent, dict) or not isinstance(agent.get("kind"), str):
        return None
    return AgentConfig(str(agent["kind"]), {k: v for k, v in agent.items() if k != "kind"})


def _task(task_file: Path, config: HarborConfig, instruction: str, own: JsonObject) -> Task:
    folder = task_file.parent
    context = None if config.docker_image is not None else folder / "environment"
    environment = TaskEnvironment(
        context=context,
        image=config.docker_image,
        build_timeout_s=config.build_timeout_s,
        cpus=config.cpus,
        memory_mb=config.memory_mb,
        storage_mb=config.storage_mb,
        allow_internet=config.allow_internet,
        env=dict(config.env),
        workdir=config.workdir,
        logs=True,
        agent_timeout_s=config.agent_timeout_s,
    )
    options: JsonObject = {
        "tests": str(folder / "tests"),
        "timeout_s": config.verifier_timeout_s,
        "env": dict(config.verifier_env),
    }
    if config.verifier_user is not None:
        options["user"] = config.verifier_user
    scripted = own.get("scripted", [])
    marks = own.get("marks", [])
    turns = own.get("max_turns", DEFAULT_MAX_TURNS)
    threshold = own.get("pass_threshold", 1.0)
    solve = folder / "solution" / "solve.sh"
    return Task(
        suite=folder.parent.name,
        id=folder.name,
        index=0,
        path=task_file,
        input=instruction,
        prompt=instruction,
        verifier=VerifierConfig(HARBOR, options),
        mode="agent",
        max_turns=turns if isinstance(turns, int) else DEFAULT_MAX_TURNS,
        pass_threshold=float(threshold) if isinstance(threshold, int | float) else 1.0,
        timeout_s=config.build_timeout_s
        + config.agent_timeout_s
        + config.verifier_timeout_s
        + SLACK_S,
        scripted=tuple(scripted) if isinstance(scripted, list) else (),
        marks=tuple(m for m in marks if isinstance(m, str)) if isinstance(marks, list) else (),
        oracle=oracle_replies() if solve.is_file() else (),
        environment=environment,
        agent=_agent(own),
    )
