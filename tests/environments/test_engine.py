"""Finding the engine: the one installed, the one asked for, and a reason a user can act
on when there is none."""

from __future__ import annotations

import json
import shutil
import tomllib
from pathlib import Path

import pytest

from pytest_agentbench.environments.engine import engine_or_reason, find_engine
from pytest_agentbench.errors import ContainerError, EngineUnavailable


def test_auto_finds_podman_and_runs_its_commands() -> None:
    if shutil.which("podman") is None:
        pytest.skip("podman is not installed")
    engine = find_engine()
    assert (engine.name, engine.argv, engine.remote) == ("podman", ("podman",), None)
    assert find_engine() is engine  # asked once per process
    assert engine.run(["version", "--format", "{{.Client.Version}}"]).stdout.strip()
    with pytest.raises(ContainerError, match=r"`podman image inspect no-such-image:1` failed"):
        engine.run(["image", "inspect", "no-such-image:1"])
    assert engine.run(["image", "inspect", "no-such-image:1"], check=False).returncode != 0


def test_an_unknown_choice_is_refused() -> None:
    with pytest.raises(EngineUnavailable, match="expected podman or docker"):
        find_engine("lxc")


def test_a_remote_that_does_not_answer_says_what_to_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if shutil.which("podman") is None:
        pytest.skip("podman is not installed")
    monkeypatch.setenv("CONTAINER_HOST", f"unix://{tmp_path}/nobody-listens.sock")
    reason = engine_or_reason("podman")
    assert isinstance(reason, str)
    assert "nobody-listens.sock" in reason and "podman system service" in reason


def test_docker_without_a_daemon_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if shutil.which("docker") is None:
        pytest.skip("the docker CLI is not installed")
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-daemon.sock")
    reason = engine_or_reason("docker")
    assert isinstance(reason, str)
    assert "docker" in reason and "daemon" in reason


def test_nothing_installed_names_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setenv("CONTAINER_HOST", "unix:///no-path-cache-key")
    reason = engine_or_reason()
    assert isinstance(reason, str)
    assert "podman is not installed" in reason and "docker is not installed" in reason


def test_the_documented_containers_conf_is_the_one_ci_installs() -> None:
    """docs/environments.md says every setting of .ci/containers.conf, under its table."""
    root = Path(__file__).resolve().parents[2]
    page = " ".join((root / "docs" / "environments.md").read_text(encoding="utf-8").split())
    shipped = tomllib.loads((root / ".ci" / "containers.conf").read_text(encoding="utf-8"))
    for table, settings in shipped.items():
        assert isinstance(settings, dict)
        for key, value in settings.items():
            shown = json.dumps(value, separators=(", ", ":")).replace('":"', '": "')
            assert f"under `[{table}]`" in page and f"{key} = {shown}" in page, (table, key)
