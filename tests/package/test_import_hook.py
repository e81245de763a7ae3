"""An installed copy of the package is loaded by Python's own import, not by pytest's
assertion-rewriting hook (plugin.py, ``_import_without_rewriting``): pytest marks every
module of a plugin's distribution and loads each through its hook, which cost a one-task
run a quarter of pytest's start-up. A clone's editable install is never marked, so the
package is copied first on PYTHONPATH here, where pytest finds it as it finds an installed
one. A real pytest subprocess against the real scripted server."""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import pytest

import pytest_agentbench

CONFTEST = """
import sys


def pytest_unconfigure(config):
    loaders = {}
    for name in ("pytest_agentbench.plugin", "pytest_agentbench.session.run",
                 "pytest_agentbench.runner.rollout", "pytest_agentbench.core.records"):
        module = sys.modules.get(name)
        loaders[name] = type(module.__spec__.loader).__name__ if module else None
    with open("loaders.txt", "w") as out:
        out.write(repr(loaders))
"""

SUITE = """
[suite]
name = "hook"
verifier = { kind = "exact" }
[[task]]
id = "one"
input = "q"
target = "a"
scripted = ["a"]
"""


def test_an_installed_copy_is_not_loaded_through_the_assertion_rewriting_hook(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    copy = tmp_path / "installed"
    shutil.copytree(
        Path(pytest_agentbench.__file__).parent,
        copy / "pytest_agentbench",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    pytester.makeconftest(CONFTEST)
    pytester.makefile(".toml", bench_hook=SUITE)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PYTHONPATH", str(copy))
        result = pytester.runpytest_subprocess("--agentbench", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    loaders = ast.literal_eval((pytester.path / "loaders.txt").read_text())
    # the entry point itself is imported before it can say so: through the hook
    assert loaders.pop("pytest_agentbench.plugin") == "AssertionRewritingHook"
    assert loaders == dict.fromkeys(loaders, "SourceFileLoader"), loaders
