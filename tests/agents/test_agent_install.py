"""Where an agent may live: an agent installed outside the project — ``npm install
--prefix "$(mktemp -d)"`` puts it under ``/tmp``, which the default sandbox replaces with
a private one — and named by its absolute path runs, its installation kept visible
read-only (agents/external.py ``installation``). The rule on made-up installations, and a
real run (pytester, a subprocess) of the stand-in agent installed npm-style under a temp
folder, in the default sandbox."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_agentbench.agents.external import installation
from pytest_agentbench.sandbox.isolation import containment

WRITE = '{ name = "write_file", arguments = { path = "greet.py", content = "print(1)#Hello" } }'
STANDIN = Path(__file__).resolve().parents[2] / "example_suites" / "agents" / "standin_agent.py"


def _npm_install(prefix: Path) -> Path:
    """The stand-in agent laid out as npm installs a package's command: the script in
    ``node_modules/<package>/``, linked from ``node_modules/.bin/``; the link's path."""
    package = prefix / "node_modules" / "standin" / "bin"
    package.mkdir(parents=True)
    script = package / "standin.py"
    script.write_text(f"#!{sys.executable}\n" + STANDIN.read_text())
    script.chmod(0o755)
    link = prefix / "node_modules" / ".bin" / "standin"
    link.parent.mkdir()
    link.symlink_to(os.path.relpath(script, link.parent))
    return link


@pytest.fixture
def outside() -> Iterator[Path]:
    """A folder of its own under /tmp (as mktemp -d makes), removed afterwards."""
    made = Path(tempfile.mkdtemp(prefix="agb-agent-install-"))
    try:
        yield made
    finally:
        shutil.rmtree(made, ignore_errors=True)


def test_an_executables_installation_is_its_npm_prefix_bin_prefix_or_folder(
    outside: Path,
) -> None:
    link = _npm_install(outside / "npm")
    assert installation(str(link)) == [outside / "npm"]  # named and resolved: one prefix
    venv = outside / "venv" / "bin"
    venv.mkdir(parents=True)
    (venv / "python").symlink_to(sys.executable)
    found = installation(str(venv / "python"))
    assert found[0] == outside / "venv"  # the virtualenv, then where its python leads
    loose = outside / "tools" / "agent"
    loose.parent.mkdir()
    loose.write_text("")
    assert installation(str(loose)) == [outside / "tools"]
    alone = outside / "agent"
    alone.write_text("")
    assert installation(str(alone)) == [outside]
    assert installation("no-such-agent-anywhere") == []


def test_installation_never_widens_to_tmp_itself() -> None:
    with tempfile.NamedTemporaryFile(dir="/tmp", prefix="agb-agent-") as handle:
        assert installation(handle.name) == [Path(handle.name)]


@pytest.mark.slow
def test_an_agent_installed_under_a_temp_folder_runs_in_the_default_sandbox(
    pytester: pytest.Pytester, outside: Path
) -> None:
    """The stand-in installed npm-style under its own /tmp folder, named by the absolute
    path of its node_modules/.bin link: under bubblewrap's private /tmp it was hidden
    (``bwrap: execvp …: No such file or directory``); its prefix is now bound read-only,
    and it writes greet.py in its workspace and passes."""
    if containment("auto")["level"] != "strong":
        pytest.skip("the private /tmp is bubblewrap's: " + str(containment("auto")["detail"]))
    link = _npm_install(outside)
    pytester.makefile(
        ".toml",
        bench_installed=f"""
[suite]
name = "installed"
timeout_s = 60

[[task]]
id = "greets"
input = "Write greet.py."
agent = {{ kind = "command", argv = ["{link}", "{{prompt}}"] }}
verifier = {{ kind = "command", run = "grep -q Hello greet.py" }}
scripted = [
  {{ text = "Writing.", tool_calls = [{WRITE}] }},
  "Done.",
]
""",
    )
    result = pytester.runpytest_subprocess("--agentbench", "-p", "no:cacheprovider", timeout=300)
    out = result.stdout.str()
    assert "1 passed" in out, out
    assert "No such file or directory" not in out
