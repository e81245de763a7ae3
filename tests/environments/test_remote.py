"""The remote path, for real: ``podman system service`` listening on a Unix socket under a
temporary folder stands in for a remote host. Reached only through ``CONTAINER_HOST``
(``podman --remote``), and through ``DOCKER_HOST`` by the Docker CLI (Podman's API speaks
Docker's too), the same operations run: a build, a container with its settings, an exec
past its deadline, files both ways, removal and the reaper."""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from containers_support import BASE_IMAGE, fresh_run_id, left_by, usable_engine

from pytest_agentbench.environments.container import Container, ContainerSpec, new_name, reap
from pytest_agentbench.environments.engine import Engine, find_engine
from pytest_agentbench.environments.images import ImageSource, ensure_image, image_tag


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A Podman API service on a socket of its own; stopped (and waited for) afterwards."""
    local = usable_engine("podman")
    assert local.remote is None
    folder = tmp_path_factory.mktemp("podman-service")
    address = f"unix://{folder}/podman.sock"
    log = open(folder / "service.log", "wb")  # noqa: SIM115 - closed below
    process = subprocess.Popen(
        ["podman", "system", "service", "--time=0", address],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 30
        while not (folder / "podman.sock").exists():
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(
                    f"podman system service did not start: {(folder / 'service.log').read_text()}"
                )
            time.sleep(0.1)
        yield address
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


@pytest.fixture(params=["podman-remote", "docker-cli"])
def remote(request: pytest.FixtureRequest, service: str, monkeypatch: pytest.MonkeyPatch) -> Engine:
    if request.param == "podman-remote":
        monkeypatch.setenv("CONTAINER_HOST", service)
        engine = find_engine("podman")
        assert engine.argv == ("podman", "--remote") and engine.remote == service
    else:
        if shutil.which("docker") is None:
            pytest.skip("the docker CLI is not installed")
        monkeypatch.setenv("DOCKER_HOST", service)
        engine = find_engine("docker")
        assert engine.argv == ("docker",) and engine.remote == service
    return engine


def test_the_same_operations_through_a_remote_engine(remote: Engine, tmp_path: Path) -> None:
    run_id = fresh_run_id()
    token = secrets.token_hex(6)
    context = tmp_path / "env"
    context.mkdir()
    (context / "Dockerfile").write_text("FROM debian:bookworm\nCOPY token.txt /token.txt\n")
    (context / "token.txt").write_text(token)
    image_map = {"debian:bookworm": BASE_IMAGE}
    tag = image_tag(context, image_map)
    try:
        image = ensure_image(
            remote,
            ImageSource(context, None),
            image_map=image_map,
            cache_dir=tmp_path / "cache",
            log_path=tmp_path / "build.log",
        )
        assert image == tag and "COPY token.txt" in (tmp_path / "build.log").read_text()
        spec = ContainerSpec(
            image=image,
            name=new_name(run_id, "main", "remote", 0),
            run_id=run_id,
            network="none",
            env={"WHERE": "remote"},
            workdir="/work",
            memory_mb=128,
        )
        with Container.start(remote, spec) as box:
            shown = box.exec(["sh", "-c", 'echo "$WHERE $PWD $(cat /token.txt)"'], timeout_s=60)
            assert shown.stdout == f"remote /work {token}\n"
            late = box.exec(["sh", "-c", "(sleep 3; touch /tmp/late) & sleep 60"], timeout_s=1)
            assert late.timed_out and late.exit_code is None
            time.sleep(4)
            assert box.exec(["test", "-e", "/tmp/late"], timeout_s=30).exit_code == 1
            box.write_file("/work/a/b.txt", b"written")
            assert box.read_file("/work/a/b.txt", 100) == b"written"
            (tmp_path / "in").mkdir()
            (tmp_path / "in" / "c.txt").write_text("copied")
            box.copy_in(tmp_path / "in", "/work/in")
            box.copy_out("/work", tmp_path / "out")
            assert (tmp_path / "out" / "a" / "b.txt").read_text() == "written"
            assert (tmp_path / "out" / "in" / "c.txt").read_text() == "copied"
            assert not any("memory" in note for note in box.notes), box.notes
            assert box.name not in reap(remote)  # its owner lives
            assert left_by(remote, run_id) == [box.name]
        assert left_by(remote, run_id) == []
    finally:
        remote.run(["rmi", "-f", tag], check=False)


def test_the_remote_engine_is_the_one_the_variable_names(service: str) -> None:
    """``podman --remote`` reaches the service, and only through ``CONTAINER_HOST``: the
    local store is the same here, so the service's own process must be what answers."""
    env = {**os.environ, "CONTAINER_HOST": service}
    done = subprocess.run(
        ["podman", "--remote", "info", "--format", "{{.Host.ServiceIsRemote}}"],
        capture_output=True,
        env=env,
        check=False,
    )
    assert done.stdout.strip() == b"true", done.stderr
