"""What runs a task, read for ``TaskBuilder`` (suites/build.py) over the suite's defaults:
its agent under test (``agent``: None for the built-in loop) and its container
(``environment``, suites/environment.py), each problem recorded where the user wrote it
(the task's table, else the suite's). The two are read together because each limits
the other: an agent's ``install`` step needs an environment, and which agent and
verifier a task has decides whether its environment can serve it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_agentbench.core.jsontypes import JsonValue
from pytest_agentbench.suites.raw_task import RawTask, SuiteDefaults
from pytest_agentbench.suites.task import DEFAULT_VERIFIER, AgentConfig

if TYPE_CHECKING:  # a container's record: its module when a suite names one
    from pytest_agentbench.suites.environment import TaskEnvironment

#: Records a problem: the task's index (None: the suite's), where it is written, the text.
AddProblem = Callable[[int | None, str, str], None]


def read_agent(settings: dict[str, JsonValue], raw: RawTask, add: AddProblem) -> AgentConfig | None:
    """The task's agent under test (None: the built-in loop). A command agent with
    repair rounds needs ``resume_argv``: a repair round continues the agent's own
    session, and without a way to continue one, repairs are refused here; an
    ``install`` step needs an environment (it is a layer over the task's image)."""
    value, repairs = settings["agent"], settings["repairs"]
    if not isinstance(value, dict) or not isinstance(value.get("kind"), str):
        return None
    kind = str(value["kind"])
    options = {key: item for key, item in value.items() if key != "kind"}
    if "install" in options and settings["environment"] is None:
        where = raw.locate(("agent",)) if "agent" in raw.data else "$.suite.agent"
        add(
            raw.index,
            f"{where}.install",
            "needs an environment: an install step is a layer over the task's "
            "container image (leave out install, or give the task an environment)",
        )
    resumable = "resume_argv" in options
    if kind == "command" and isinstance(repairs, int) and repairs > 0 and not resumable:
        where = raw.locate(("repairs",)) if "repairs" in raw.data else "$.suite.repairs"
        add(
            raw.index,
            where,
            f"repairs = {repairs} needs the command agent's resume_argv (how the "
            "agent continues its own session with the verifier's feedback); "
            "without one a command agent cannot be repaired: set repairs = 0",
        )
    return AgentConfig(kind, options)


def read_task_environment(
    value: JsonValue,
    raw: RawTask,
    index: int,
    defaults: SuiteDefaults,
    suite_dir: Path,
    add: AddProblem,
) -> TaskEnvironment | None:
    """The task's container (suites/environment.py), its problems recorded where the
    table is written. None (and the environment's module not imported) when none is set."""
    if value is None:
        return None
    from pytest_agentbench.suites.environment import environment_problem, read_environment

    where = raw.locate(("environment",)) if "environment" in raw.data else "$.suite.environment"
    found, why = read_environment(value, suite_dir)
    if found is None:
        if why:
            add(index, where, why)
        return None
    data = raw.data
    mode = data.get("mode", defaults.settings.get("mode", "answer"))
    table = data.get("agent", defaults.settings.get("agent"))
    # a command or acp agent runs in the container (agents/container_agent.py); python not
    agent = table is not None and not (
        isinstance(table, dict) and table.get("kind") in ("command", "acp")
    )
    verifier = data.get("verifier") or defaults.verifier or {}
    kind = verifier.get("kind", DEFAULT_VERIFIER) if isinstance(verifier, dict) else ""
    why = environment_problem(found, str(mode), agent, str(kind))
    if why:
        add(index, where, why)
        return None
    return found
