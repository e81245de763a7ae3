"""Where the tests find the real agents they put under test (none is a dependency).

For each agent, first found wins:

1. its own variable: ``AGENTBENCH_CLAUDE``, ``AGENTBENCH_CODEX``, ``AGENTBENCH_CLAUDE_ACP``,
   ``AGENTBENCH_CODEX_ACP`` (a path to the executable), ``AGENTBENCH_AGENTS_PYTHON`` (a
   Python that can ``import agents``, the OpenAI Agents SDK);
2. the prefix ``.ci/install-agents`` installs into: ``$AGENTBENCH_AGENTS_DIR`` (default
   ``~/.cache/pytest-agentbench-agents``), ``npm/node_modules/.bin/<name>`` and
   ``venv/bin/python``;
3. ``PATH`` (``claude``, ``codex``, ``claude-agent-acp``, ``codex-acp``).

A test that needs one that is not there skips, naming the variable and the script.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

#: Agent programs of our own (stand-ins, hostile ones, the Agents SDK program).
PROGRAMS = Path(__file__).parent / "agent_programs"

VARIABLES = {
    "claude": "AGENTBENCH_CLAUDE",
    "codex": "AGENTBENCH_CODEX",
    "claude-agent-acp": "AGENTBENCH_CLAUDE_ACP",
    "codex-acp": "AGENTBENCH_CODEX_ACP",
}


#: Read at import: pytester points HOME at a test's own folder while the test runs.
_DEFAULT_DIR = Path.home() / ".cache" / "pytest-agentbench-agents"
_OWN_DIR = os.environ.get("AGENTBENCH_AGENTS_DIR")


def agents_dir() -> Path:
    return Path(_OWN_DIR or _DEFAULT_DIR)


def _skip(what: str, variable: str) -> pytest.skip.Exception:
    return pytest.skip.Exception(
        f"{what} is not installed: run .ci/install-agents (installs into {agents_dir()}) "
        f"or set {variable}",
        _use_item_location=True,
    )


def find_tool(name: str) -> str | None:
    """The executable of a real agent, or None."""
    own = os.environ.get(VARIABLES[name])
    candidates = [own] if own else []
    candidates.append(str(agents_dir() / "npm" / "node_modules" / ".bin" / name))
    candidates.append(shutil.which(name) or "")
    for candidate in candidates:
        if candidate and os.access(candidate, os.X_OK) and Path(candidate).is_file():
            return str(Path(candidate).resolve()) if name in ("claude",) else candidate
    return None


def require_tool(name: str) -> str:
    found = find_tool(name)
    if found is None:
        raise _skip(name, VARIABLES[name])
    return found


def version(argv: list[str]) -> str:
    """The agent's own version line (for the report), or why it could not say."""
    try:
        done = subprocess.run(
            [*argv, "--version"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return f"unknown ({exc})"
    lines = (done.stdout or done.stderr).strip().splitlines()
    return lines[0] if lines else ""


def require_agents_python() -> str:
    """A Python with the OpenAI Agents SDK."""
    own = os.environ.get("AGENTBENCH_AGENTS_PYTHON")
    for candidate in ([own] if own else []) + [str(agents_dir() / "venv" / "bin" / "python")]:
        if candidate and os.access(candidate, os.X_OK):
            probe = subprocess.run(
                [candidate, "-c", "import agents, openai"],
                capture_output=True,
                timeout=60,
                check=False,
            )
            if probe.returncode == 0:
                return candidate
    raise _skip("the OpenAI Agents SDK (PyPI openai-agents)", "AGENTBENCH_AGENTS_PYTHON")


def copy_programs(folder: Path) -> None:
    """Copy our agent programs to ``folder/agents``, beside a test's suite: a suite's own
    folder is what the sandbox keeps visible (a checkout under /tmp is hidden by the
    sandbox's private /tmp), and argv names them as ``{suite_dir}/agents/<name>.py``."""
    target = folder / "agents"
    target.mkdir(exist_ok=True)
    for program in PROGRAMS.glob("*.py"):
        shutil.copy(program, target / program.name)


def processes_in(folder: Path) -> list[int]:
    """Processes of this machine whose working folder is inside ``folder``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cwd = os.readlink(entry / "cwd")
            except OSError:
                continue
            if cwd == str(folder) or cwd.startswith(f"{folder}/"):
                found.append(int(entry.name))
    return found


def shell_call(kind: str, command: str) -> str:
    """A scripted tool call (TOML inline table) to the agent's own shell tool."""
    if kind == "claude":
        arguments = {"command": command, "description": "run"}
        name = "Bash"
    elif kind == "codex":
        arguments, name = {"cmd": command}, "exec_command"
    else:
        arguments, name = {"command": command}, "run_shell"
    return f"{{ name = {json.dumps(name)}, arguments = {json.dumps(arguments)} }}".replace(
        '": ', '" = '
    ).replace('{"', '{ "')


def agent_tasks(kind: str) -> str:
    """The four tasks every real agent is put through (TOML): a tool call executed for
    real, a repair continuing its session, a loop in the model's stream killed live, and
    a deadline; ``kind`` picks the agent's own shell tool (shell_call)."""

    def reply(command: str, text: str) -> str:
        return f"{{ text = {json.dumps(text)}, tool_calls = [{shell_call(kind, command)}] }}"

    return f"""
[[task]]
id = "tool-call"
input = "Create out.txt holding hello."
scripted = [{reply("echo hello > out.txt", "Writing it.")}, "Done: out.txt holds hello."]

[[task]]
id = "repaired"
input = "Create out.txt holding hello."
repairs = 1
scripted = [
  {reply("echo wrong > out.txt", "Writing it.")}, "Done.",
  {reply("echo hello > out.txt", "Fixing it.")}, "Fixed.",
]

[[task]]
id = "loop"
input = "Explain the task."

[[task.scripted]]
text = "Let me think about this again. "
repeat = 4000
chunk_size = 31
chunk_delay_s = 0.0005

[[task]]
id = "deadline"
input = "Explain the task."
timeout_s = 12
scripted = [{{ hang = true }}]
"""
