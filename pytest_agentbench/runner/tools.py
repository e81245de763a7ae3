"""The tools an agent gets, and how one tool call is run against its workspace.

A tool is a ``ToolSpec`` (what the model is shown) and a function ``(workspace,
arguments) -> str`` (what happens). The four built-ins — ``bash``, ``read_file``,
``write_file``, ``list_files`` — are registered through the ``pytest_agentbench_tools``
hook like any plugin's. ``call_tool`` never raises for what the model asked: a bad tool
name, arguments that do not fit the tool's schema, a path out of the workspace or a
crashing tool all become an error result the model reads on its next turn.
"""

from __future__ import annotations

import contextlib
import functools
import json
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from typing import TYPE_CHECKING

from pytest_agentbench.core.fastclass import dataclass
from pytest_agentbench.core.jsontypes import JsonObject, JsonValue
from pytest_agentbench.errors import AgentbenchError, SandboxError
from pytest_agentbench.models.base import ToolCall, ToolSpec
from pytest_agentbench.sandbox import Limits, Workspace

if TYPE_CHECKING:
    from jsonschema.protocols import Validator

ToolFunction = Callable[[Workspace, Mapping[str, JsonValue]], str]

#: A ``bash`` call's wall clock when the agent loop sets none (``command_limits``).
BASH_TIMEOUT_S = 60.0
#: The share of capped output kept from the start; the rest comes from the end.
_HEAD_SHARE = 0.7

_limits: ContextVar[Limits] = ContextVar("agentbench_command_limits")


class ToolError(AgentbenchError):
    """A tool could not do what was asked; the message is shown to the model as is."""


@dataclass(frozen=True)
class Tool:
    """A tool: its spec (name, description, JSON Schema of its arguments) and the function
    that runs it. The function may raise ToolError or SandboxError to report a failure
    the model should see; the arguments it gets already fit the schema."""

    spec: ToolSpec
    function: ToolFunction

    @property
    def name(self) -> str:
        return self.spec.name

    @functools.cached_property
    def validator(self) -> Validator:
        """The JSON Schema validator of the tool's arguments, built once per tool (on its
        first call), not on every call."""
        from jsonschema import Draft202012Validator

        validator: Validator = Draft202012Validator(dict(self.spec.parameters))
        return validator


@dataclass(frozen=True)
class ToolResult:
    """What one call gave the model: ``output`` (capped), whether it is an error, whether
    the cap cut it (``output_chars`` is the length before the cap), and how long it took."""

    call_id: str
    name: str
    output: str
    is_error: bool
    truncated: bool
    output_chars: int
    elapsed_s: float

    def as_message(self) -> JsonObject:
        """The neutral ``tool`` turn answering the call."""
        return {
            "role": "tool",
            "tool_call_id": self.call_id,
            "name": self.name,
            "content": self.output,
            "is_error": self.is_error,
        }


@contextlib.contextmanager
def command_limits(limits: Limits) -> Iterator[None]:
    """Run the enclosed tool calls with ``limits`` for the commands they start (the agent
    loop narrows the wall clock to what is left of the task's timeout)."""
    token = _limits.set(limits)
    try:
        yield
    finally:
        _limits.reset(token)


def current_limits() -> Limits:
    """The limits a tool should give the commands it runs in the sandbox."""
    return _limits.get(Limits(timeout_s=BASH_TIMEOUT_S, cpu_s=BASH_TIMEOUT_S))


def cap_output(text: str, limit: int) -> tuple[str, bool]:
    """``text`` cut to ``limit`` characters (plus a one-line marker saying how much was
    left out), keeping its start and its end; and whether it was cut."""
    if len(text) <= limit:
        return text, False
    head = int(limit * _HEAD_SHARE)
    tail = limit - head
    omitted = len(text) - head - tail
    marker = (
        f"\n[… {omitted} characters truncated: tool output is capped at {limit} characters …]\n"
    )
    return text[:head] + marker + (text[-tail:] if tail else ""), True


def _bash(workspace: Workspace, arguments: Mapping[str, JsonValue]) -> str:
    result = workspace.run(str(arguments["command"]), limits=current_limits())
    parts = [result.stdout.rstrip("\n")] if result.stdout else []
    if result.stderr:
        parts.append("[stderr]\n" + result.stderr.rstrip("\n"))
    if result.killed_by is not None:
        parts.append(f"[stopped: {result.killed_by} after {result.elapsed_s:.1f}s]")
    else:
        parts.append(f"[exit code {result.exit_code}]")
    return "\n".join(parts)


def _read_file(workspace: Workspace, arguments: Mapping[str, JsonValue]) -> str:
    return workspace.read_file(str(arguments["path"]))


def _write_file(workspace: Workspace, arguments: Mapping[str, JsonValue]) -> str:
    path, content = str(arguments["path"]), str(arguments["content"])
    workspace.write_file(path, content)
    return f"wrote {len(content.encode('utf-8'))} bytes to {path}"


def _list_files(workspace: Workspace, arguments: Mapping[str, JsonValue]) -> str:
    path = str(arguments.get("path") or ".")
    found = workspace.list_files(path)
    return "\n".join(found) if found else f"(no files under {path})"


def _object(properties: Mapping[str, JsonValue], required: Sequence[str]) -> JsonObject:
    return {
        "type": "object",
        "properties": dict(properties),
        "required": list(required),
        "additionalProperties": False,
    }


_PATH: JsonObject = {"type": "string", "description": "A path relative to the workspace root."}

BUILTIN_TOOLS: tuple[Tool, ...] = (
    Tool(
        ToolSpec(
            "bash",
            "Run a shell command in the workspace (cwd is the workspace root) and return its "
            "output and exit code. No network; long-running commands are stopped.",
            _object({"command": {"type": "string", "minLength": 1}}, ["command"]),
        ),
        _bash,
    ),
    Tool(
        ToolSpec(
            "read_file",
            "Return the text of a file in the workspace.",
            _object({"path": _PATH}, ["path"]),
        ),
        _read_file,
    ),
    Tool(
        ToolSpec(
            "write_file",
            "Create or overwrite a file in the workspace with the given content "
            "(parent directories are created).",
            _object({"path": _PATH, "content": {"type": "string"}}, ["path", "content"]),
        ),
        _write_file,
    ),
    Tool(
        ToolSpec(
            "list_files",
            "List the files under a directory of the workspace (default: all of it).",
            _object({"path": _PATH}, []),
        ),
        _list_files,
    ),
)


def _schema_problem(tool: Tool, arguments: Mapping[str, JsonValue]) -> str | None:
    errors = sorted(tool.validator.iter_errors(dict(arguments)), key=lambda e: list(e.path))
    if not errors:
        return None
    error = errors[0]
    where = "/".join(str(p) for p in error.path)
    return f"{where}: {error.message}" if where else error.message


def call_tool(
    tools: Mapping[str, Tool], workspace: Workspace, call: ToolCall, max_output: int
) -> ToolResult:
    """Run ``call`` with the tool it names, its output capped at ``max_output`` characters.
    Never raises for the model's mistakes or a tool's failure: they are error results."""
    start = time.monotonic()
    output, is_error = _run(tools, workspace, call)
    capped, truncated = cap_output(output, max_output)
    return ToolResult(
        call_id=call.id,
        name=call.name,
        output=capped,
        is_error=is_error,
        truncated=truncated,
        output_chars=len(output),
        elapsed_s=round(time.monotonic() - start, 3),
    )


def _run(tools: Mapping[str, Tool], workspace: Workspace, call: ToolCall) -> tuple[str, bool]:
    tool = tools.get(call.name)
    if tool is None:
        known = ", ".join(tools) or "(none)"
        return f"error: unknown tool {call.name!r}; the tools are: {known}", True
    if call.arguments is None:
        shown = call.raw_arguments[:200]
        return f"error: the arguments of {call.name} are not a JSON object: {shown!r}", True
    problem = _schema_problem(tool, call.arguments)
    if problem is not None:
        return f"error: invalid arguments for {call.name}: {problem}", True
    try:
        return tool.function(workspace, call.arguments), False
    except (ToolError, SandboxError) as exc:
        return f"error: {exc}", True
    except Exception as exc:  # a plugin tool's bug: the model is told, the run goes on
        return f"error: tool {call.name} failed: {type(exc).__name__}: {exc}", True


def canonical_call(call: ToolCall) -> str:
    """The call as one comparable string: its name and its arguments as sorted JSON (the
    raw text when they were not a JSON object)."""
    if call.arguments is None:
        return f"{call.name} {call.raw_arguments}"
    arguments = json.dumps(call.arguments, sort_keys=True, ensure_ascii=False, default=str)
    return f"{call.name} {arguments}"
