"""Runs a ``python`` agent under test in the sandbox: ``python_entry.py MODULE:FUNCTION
[PATH …]``, the attempt as JSON on stdin. Standard library only, nothing of ours (it is
run by file path in the agent's own interpreter, which need not have the plugin).

It puts each PATH first on ``sys.path`` (the suite's folder), imports MODULE, and calls
``FUNCTION(task, workspace, base_url, key)``: ``task`` an :class:`AgentTask`,
``workspace`` the task's workspace (a ``Path``, also the cwd), ``base_url`` the gateway's
root for this task (OpenAI clients add ``/v1``; Anthropic clients take it as it is) and
``key`` the task's stand-in key. What the function prints goes to stderr; what it returns
(a string, or None) is the attempt's final message, written to stdout. An exception is
printed to stderr and ends the attempt with exit status 1.
"""

from __future__ import annotations

import contextlib
import json
import os
import pkgutil
import sys
import traceback
from pathlib import Path

from pytest_agentbench.core.fastclass import dataclass


@dataclass(frozen=True)
class AgentTask:
    """What a Python agent is told of its task. ``prompt`` is the task's rendered prompt
    (system text not included: ``system``); ``attempt`` counts from 0; ``feedback`` is the
    verifier's feedback for a repair round (None on the first attempt)."""

    id: str
    suite: str
    prompt: str
    system: str | None
    attempt: int
    feedback: str | None


def _task(data: object) -> AgentTask:
    if not isinstance(data, dict):
        raise SystemExit("python agent: the attempt on stdin is not a JSON object")

    def text(name: str) -> str | None:
        value = data.get(name)
        return value if isinstance(value, str) else None

    attempt = data.get("attempt")
    return AgentTask(
        id=text("id") or "",
        suite=text("suite") or "",
        prompt=text("prompt") or "",
        system=text("system"),
        attempt=attempt if isinstance(attempt, int) else 0,
        feedback=text("feedback"),
    )


def main(argv: list[str]) -> int:
    if not argv or ":" not in argv[0]:
        sys.stderr.write("python agent: expected MODULE:FUNCTION as the first argument\n")
        return 2
    module_name, _, function_name = argv[0].partition(":")
    for path in reversed(argv[1:]):
        sys.path.insert(0, path)
    task = _task(json.loads(sys.stdin.read() or "{}"))
    base_url = os.environ.get("AGENTBENCH_BASE_URL", "")
    key = os.environ.get("AGENTBENCH_API_KEY", "")
    out = sys.stdout
    try:
        with contextlib.redirect_stdout(sys.stderr):
            function = pkgutil.resolve_name(argv[0])
            if not callable(function):
                sys.stderr.write(f"python agent: {module_name} has no function {function_name!r}\n")
                return 2
            answer = function(task, Path.cwd(), base_url, key)
    except BaseException:  # the agent's own failure, whatever it is: its traceback is its record
        traceback.print_exc(file=sys.stderr)
        return 1
    if answer is not None:
        out.write(str(answer))
        out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
