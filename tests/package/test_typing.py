"""``mypy --strict`` on the package and bench/, configured in pyproject.toml (``[tool.mypy]``).

CI runs the test suite (``.ci/run``), so this test is how the type check runs in CI. mypy
is a dev dependency: a user's plain install has none, and the test skips saying so.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import pytest_agentbench

ROOT = Path(pytest_agentbench.__file__).parent.parent
PYPROJECT = ROOT / "pyproject.toml"


@pytest.mark.slow
def test_package_is_mypy_strict_clean() -> None:
    if importlib.util.find_spec("mypy") is None:
        pytest.skip("mypy is not installed; pip install -e '.[dev]' brings it")
    # ``--strict`` is given here too, so loosening the config cannot pass silently; the
    # files checked come from ``[tool.mypy] files``.
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(PYPROJECT), "--strict"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,  # a hang guard only
    )
    assert proc.returncode == 0, f"mypy --strict found problems:\n{proc.stdout}{proc.stderr}"


def test_mypy_config_checks_the_package() -> None:
    """The package stays in ``[tool.mypy] files``: without it the check above would pass
    while checking something else."""
    config = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["tool"]["mypy"]
    assert config["strict"] is True
    files = config["files"]
    assert "pytest_agentbench" in ([files] if isinstance(files, str) else files)
