"""The built-in agent loop's tools in a container: each tool call goes through the same
``call_tool`` the loop uses, against a ContainerWorkspace, and really runs in the
container (the host's files are never touched); paths stay confined, inside."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from containers_support import BASE_IMAGE

from pytest_agentbench.environments.container import Container, ContainerSpec, new_name
from pytest_agentbench.environments.engine import Engine
from pytest_agentbench.models.base import ToolCall
from pytest_agentbench.runner.tools import BUILTIN_TOOLS, call_tool, command_limits
from pytest_agentbench.sandbox import Limits, SandboxError
from pytest_agentbench.sandbox.container_workspace import ContainerWorkspace

TOOLS = {tool.name: tool for tool in BUILTIN_TOOLS}


@pytest.fixture
def box(engine: Engine, run_id: str) -> Iterator[Container]:
    spec = ContainerSpec(
        image=BASE_IMAGE, name=new_name(run_id, "main", "ws", 0), run_id=run_id, workdir="/app"
    )
    with Container.start(engine, spec) as container:
        yield container


def _call(workspace: ContainerWorkspace, name: str, **arguments: object) -> tuple[str, bool]:
    result = call_tool(TOOLS, workspace, ToolCall("c1", name, arguments), 100_000)  # type: ignore[arg-type]
    return result.output, result.is_error


def test_the_tools_run_in_the_container(box: Container, tmp_path: Path) -> None:
    seed = tmp_path / "seed"
    (seed / "pkg").mkdir(parents=True)
    (seed / "pkg" / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    workspace = ContainerWorkspace.seeded(box, files={"notes.txt": "seeded"}, files_dir=seed)
    assert workspace.containment()["level"] == "container"

    output, error = _call(
        workspace, "bash", command="pwd; grep -c CODENAME=bookworm /etc/os-release; cat notes.txt"
    )
    assert not error and output.splitlines() == ["/app", "1", "seeded", "[exit code 0]"]

    code = "def add(a, b):\n    return a + b\n"
    output, error = _call(workspace, "write_file", path="pkg/calc.py", content=code)
    assert not error and output == f"wrote {len(code)} bytes to pkg/calc.py"
    assert _call(workspace, "read_file", path="pkg/calc.py") == (code, False)
    output, error = _call(
        workspace, "bash", command="cd pkg && python3 -B -c 'import calc; print(calc.add(2, 3))'"
    )
    assert output.splitlines()[0] == "5"
    _call(workspace, "bash", command="mkdir -p deep && echo made > deep/x.txt")
    assert _call(workspace, "list_files") == ("deep/x.txt\nnotes.txt\npkg/calc.py", False)
    assert _call(workspace, "list_files", path="pkg") == ("pkg/calc.py", False)
    assert not (seed / "deep").exists() and "a - b" in (seed / "pkg" / "calc.py").read_text()

    output, error = _call(workspace, "bash", command="echo out; echo err >&2; exit 4")
    assert output == "out\n[stderr]\nerr\n[exit code 4]"


def test_paths_stay_in_the_workspace_inside_the_container(box: Container) -> None:
    workspace = ContainerWorkspace(box)
    _call(workspace, "bash", command="ln -s /etc escape; ln -s /etc/hostname host; mkdir d")
    for name, arguments in [
        ("read_file", {"path": "../etc/passwd"}),
        ("read_file", {"path": "/etc/passwd"}),
        ("read_file", {"path": "escape/passwd"}),
        ("read_file", {"path": "host"}),
        ("write_file", {"path": "escape/planted", "content": "x"}),
        ("write_file", {"path": "host", "content": "x"}),
        ("list_files", {"path": "escape"}),
        ("read_file", {"path": "d"}),
        ("read_file", {"path": "missing.txt"}),
    ]:
        output, error = _call(workspace, name, **arguments)
        assert error and output.startswith("error: "), (name, arguments, output)
    assert box.exec(["test", "-e", "/etc/planted"], timeout_s=30).exit_code == 1
    with pytest.raises(SandboxError, match="absolute"):
        workspace.resolve("/x")


def test_a_long_file_is_cut_with_its_size_said(box: Container) -> None:
    workspace = ContainerWorkspace(box)
    workspace.write_file("big.txt", "x" * 5000)
    text = workspace.read_file("big.txt", limit=100)
    assert text.startswith("x" * 100) and "the file has 5000 bytes, showing the first 100" in text


def test_bash_deadline_and_stop_end_the_command_inside(box: Container) -> None:
    workspace = ContainerWorkspace(box)
    with command_limits(Limits(timeout_s=1, cpu_s=1)):
        output, _ = _call(workspace, "bash", command="(sleep 3; touch late) & sleep 30")
    assert "[stopped: timeout after" in output
    stop = threading.Event()
    threading.Timer(1.0, stop.set).start()
    started = time.monotonic()
    result = workspace.run("sleep 30", stop=stop)
    assert result.killed_by == "stopped" and time.monotonic() - started < 20
    time.sleep(3)
    assert workspace.list_files() == []
