"""A tool's arguments are checked against its JSON Schema by a validator built once per
tool, not on every call (the agent loop calls tools many times per task)."""

from __future__ import annotations

from pathlib import Path

from pytest_agentbench.models.base import ToolCall
from pytest_agentbench.runner.tools import BUILTIN_TOOLS, call_tool
from pytest_agentbench.sandbox import Workspace


def test_the_validator_is_built_once_and_still_checks_every_call(tmp_path: Path) -> None:
    tools = {tool.name: tool for tool in BUILTIN_TOOLS}
    workspace = Workspace(tmp_path)
    write = tools["write_file"]
    good = ToolCall("c1", "write_file", {"path": "a.txt", "content": "hi"})
    bad = ToolCall("c2", "write_file", {"path": "a.txt"})
    first = call_tool(tools, workspace, good, 1000)
    validator = write.validator
    second = call_tool(tools, workspace, bad, 1000)
    third = call_tool(
        tools, workspace, ToolCall("c3", "write_file", {"path": 7, "content": ""}), 1000
    )
    assert write.validator is validator  # the same object for every call
    assert not first.is_error and (tmp_path / "a.txt").read_text() == "hi"
    assert second.is_error and "'content' is a required property" in second.output
    assert third.is_error and "path: 7 is not of type 'string'" in third.output
