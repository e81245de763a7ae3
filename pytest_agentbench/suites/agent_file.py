"""The run-wide agent under test: ``--agentbench-agent FILE`` (docs/agents-external.md).

FILE is a TOML file holding one agent table, exactly a suite's ``agent`` table
(``kind``, ``argv``, ``env``, ``timeout_s``, ``mounts``, …), checked against the same
schema when the run starts. Paths in it: ``{agent_dir}`` anywhere in a string is the
file's own folder (so ``argv = ["python3", "{agent_dir}/my_agent.py"]`` works from any
working directory); a relative ``mounts`` entry, a python agent's relative ``path``
entries and a relative ``python`` holding a ``/`` are resolved against that folder. The
other placeholders (``{prompt}``, ``{suite_dir}``, ``{task_id}``, …) keep their meaning:
``{suite_dir}`` is the folder of the task being run, not of this file.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

from pytest_agentbench.core.fastclass import dataclass
from pytest_agentbench.core.jsontypes import JsonObject, JsonValue
from pytest_agentbench.errors import SuiteError
from pytest_agentbench.suites.task import AgentConfig

#: The placeholder of the agent file's own folder, filled in when the file is read.
AGENT_DIR = "{agent_dir}"
#: Keys whose relative paths are resolved against the agent file's folder.
_PATH_LISTS = ("mounts", "path")


@dataclass(frozen=True)
class RunAgent:
    """The run-wide agent: the file it came from and its table as canonical JSON (a
    string: settings are hashed). It runs every agent-mode task naming no agent of its
    own; never a control."""

    file: str
    table: str

    def config(self) -> AgentConfig:
        """The agent as a task names one (suites/task.AgentConfig)."""
        table = self.as_json()
        kind = table.pop("kind")
        return AgentConfig(str(kind), table)

    def as_json(self) -> JsonObject:
        found: JsonObject = json.loads(self.table)
        return found

    def public(self) -> JsonObject:
        """As summary.json's settings record it: the table and its file."""
        return {**self.as_json(), "file": self.file}


def run_agent(value: object) -> RunAgent | None:
    """The run-wide agent ``--agentbench-agent`` (or the ``agentbench_agent`` ini key)
    names; None when neither is given. Raises SuiteError for a bad file."""
    if value is None or not str(value).strip():
        return None
    return load_agent_file(Path(str(value)))


def agent_record(agent: AgentConfig, run_agent: RunAgent | None) -> JsonObject:
    """What a task record says of the agent under test that ran: its table, and
    ``from``: ``task`` (the task or its suite names it) or ``run`` (``file``: the
    ``--agentbench-agent`` file)."""
    record: JsonObject = {"kind": agent.kind, **agent.options}
    if run_agent is not None and agent == run_agent.config():
        return {**record, "from": "run", "file": run_agent.file}
    return {**record, "from": "task"}


def same_agent(recorded: JsonValue, now: JsonObject | None) -> bool:
    """True when a resumed record's ``agent`` (None: the built-in loop) is the agent
    that would run now: where it was named (``from``, ``file``) does not matter."""

    def table(value: JsonValue) -> JsonValue:
        if not isinstance(value, dict):
            return None
        return {k: v for k, v in value.items() if k not in ("from", "file")}

    return table(recorded) == table(now)


def load_agent_file(path: Path, max_bytes: int = 1 << 20) -> RunAgent:
    """The agent table of ``path``, checked; SuiteError naming the file, each key at
    fault and what was expected."""
    from pytest_agentbench.suites.validate import agent_validator

    where = str(path)
    try:
        if path.stat().st_size > max_bytes:
            raise SuiteError(where, [f"is larger than {max_bytes} bytes: not an agent table"])
        document: JsonObject = tomllib.loads(path.read_bytes().decode("utf-8"))
    except OSError as exc:
        raise SuiteError(where, [f"cannot be read: {exc.strerror or exc}"]) from None
    except UnicodeDecodeError as exc:
        raise SuiteError(where, [f"is not UTF-8 text ({exc.reason})"]) from None
    except tomllib.TOMLDecodeError as exc:
        raise SuiteError(where, [f"is not valid TOML: {exc}"]) from None
    problems = []
    for error in sorted(agent_validator().iter_errors(document), key=lambda e: list(e.path)):
        at = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.path)
        problems.append(
            f"{at.lstrip('.') or 'the table'}: {error.message} (the file holds one agent "
            "table, as a suite's agent: kind, argv, env, timeout_s, mounts…; "
            "docs/agents-external.md)"
        )
    if problems:
        raise SuiteError(where, problems)
    folder = path.resolve().parent
    table = _with_folder(document, folder)
    return RunAgent(str(path), json.dumps(table, sort_keys=True))


def _with_folder(table: JsonObject, folder: Path) -> JsonObject:
    """``table`` with ``{agent_dir}`` filled in and its relative paths resolved."""

    def fill(value: JsonValue) -> JsonValue:
        if isinstance(value, str):
            return value.replace(AGENT_DIR, str(folder))
        if isinstance(value, list):
            return [fill(item) for item in value]
        if isinstance(value, dict):
            return {key: fill(item) for key, item in value.items()}
        return value

    filled: JsonObject = {key: fill(value) for key, value in table.items()}
    for key in _PATH_LISTS:
        entries = filled.get(key)
        if isinstance(entries, list):
            filled[key] = [
                str(folder / e) if isinstance(e, str) and not Path(e).is_absolute() else e
                for e in entries
            ]
    python = filled.get("python")
    if isinstance(python, str) and "/" in python and not Path(python).is_absolute():
        filled["python"] = str(folder / python)
    return filled
