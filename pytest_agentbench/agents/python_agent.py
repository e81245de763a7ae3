"""The ``python`` agent: a ``module:function`` of the suite's author, run in the task's
sandbox like a command agent (its own process and process group, the same limits, the
gateway endpoint in its environment), by ``agents/python_entry.py``.

The function is called as ``function(task, workspace, base_url, key)`` (see
python_entry.AgentTask); what it returns is the attempt's final message. A repair round
calls it again in the same workspace with ``task.feedback`` set and ``task.attempt``
counting on: the function continues its own session however it keeps one (a file in
``$HOME``, which lives in the workspace, is the simple way).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from pytest_agentbench.agents.command import CommandOptions, CommandSession
from pytest_agentbench.agents.gateway import Gateway
from pytest_agentbench.agents.route import ClientFor
from pytest_agentbench.core.jsontypes import JsonValue
from pytest_agentbench.errors import AgentbenchError
from pytest_agentbench.runner.loopguard import KillPolicy
from pytest_agentbench.suites.task import Task

ENTRY = Path(__file__).with_name("python_entry.py")


def _target(options: Mapping[str, JsonValue], task: Task) -> str:
    target = options.get("function")
    module, _, name = target.partition(":") if isinstance(target, str) else ("", "", "")
    if not module or not name:
        raise AgentbenchError(
            f"task {task.id!r}: a python agent needs function = 'module:function'; got {target!r}"
        )
    return str(target)


def python_options(options: Mapping[str, JsonValue], task: Task) -> CommandOptions:
    """The command options that run ``options['function']`` through the entry script:
    the interpreter (``python``, default this one), ``-I`` (no cwd or PYTHON* variables on
    its path), the suite's folder and any ``path`` entries first on ``sys.path``."""
    target = _target(options, task)
    python = options.get("python")
    suite_dir = str(Path(task.path).parent)
    extra = options.get("path")
    paths = [suite_dir] + ([str(p) for p in extra] if isinstance(extra, list) else [])
    argv = [python if isinstance(python, str) else sys.executable, "-I", str(ENTRY), target]
    common = {k: v for k, v in options.items() if k not in ("function", "python", "path")}
    parsed = CommandOptions.parse({**common, "argv": [*argv, *paths], "prompt": "stdin"})
    return replace(parsed, resume_argv=parsed.argv, final_message="stdout")


class PythonSession(CommandSession):
    """A command session whose stdin is the attempt as JSON (the entry script's input)."""

    def _stdin(self, index: int, prompt: str) -> str | None:
        task = self.task
        return json.dumps(
            {
                "id": task.id,
                "suite": task.suite,
                "prompt": task.prompt,
                "system": task.system,
                "attempt": index,
                "feedback": prompt if index else None,
            }
        )


def open_python_session(
    task: Task,
    root: Path,
    gateway: Gateway,
    clients: ClientFor,
    model_label: str,
    *,
    isolation: str,
    kill_policy: KillPolicy,
) -> PythonSession:
    """A python agent's session for ``task`` (see open_command_session)."""
    from pytest_agentbench.agents.external import open_workspace

    if task.agent is None or task.agent.kind != "python":
        raise AgentbenchError(f"task {task.id!r} has no python agent")
    options = python_options(task.agent.options, task)
    workspace = open_workspace(task, root, isolation)
    route = gateway.open_route(task.key, model_label, clients, kill_policy=kill_policy)
    strict = isolation == "strict"
    return PythonSession(task, options, workspace, gateway, route, strict_network=strict)
