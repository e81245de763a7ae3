"""One container per rollout, against the real engine: start, exec, deadlines that end
the processes inside, files in and out, limits, network, removal."""

from __future__ import annotations

import http.server
import os
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from containers_support import BASE_IMAGE, left_by

from pytest_agentbench.environments.container import (
    Container,
    ContainerSpec,
    Mount,
    new_name,
)
from pytest_agentbench.environments.engine import Engine
from pytest_agentbench.environments.images import ImageSource, ensure_image
from pytest_agentbench.errors import ContainerError


def _spec(run_id: str, **changes: object) -> ContainerSpec:
    base = ContainerSpec(image=BASE_IMAGE, name=new_name(run_id, "main", "task", 0), run_id=run_id)
    return ContainerSpec(**{**base.__dict__, **changes})  # type: ignore[arg-type]


@pytest.fixture
def box(engine: Engine, run_id: str) -> Iterator[Container]:
    with Container.start(engine, _spec(run_id, workdir="/work", env={"GREETING": "hello"})) as c:
        yield c


def test_exec_runs_in_the_workdir_with_the_env(box: Container) -> None:
    result = box.exec(["sh", "-c", 'echo "$GREETING $PWD"; echo oops >&2; exit 3'], timeout_s=60)
    assert (result.exit_code, result.stdout, result.stderr) == (3, "hello /work\n", "oops\n")
    assert not result.timed_out
    other = box.exec(
        ["sh", "-c", 'echo "$X $PWD $(id -u)"'],
        timeout_s=60,
        env={"X": "y"},
        workdir="/tmp",
        user="nobody",
    )
    assert other.stdout.split() == ["y", "/tmp", "65534"]
    fed = box.exec(["cat"], timeout_s=60, stdin=b"from stdin")
    assert fed.stdout == "from stdin"


def test_a_timed_out_exec_leaves_nothing_running_inside(box: Container) -> None:
    """The command and the child it started in the background both die at the deadline:
    the straggler never writes its file, and no sleep is left in the container."""
    script = "(sleep 4; echo late > /tmp/straggler) & sleep 60"
    result = box.exec(["sh", "-c", script], timeout_s=1.5)
    assert result.timed_out and result.exit_code is None
    assert 1.5 <= result.elapsed_s < 30
    time.sleep(5)
    assert box.exec(["test", "-e", "/tmp/straggler"], timeout_s=30).exit_code == 1
    listed = box.exec(["sh", "-c", "cat /proc/[0-9]*/cmdline | tr '\\0' ' '"], timeout_s=30)
    assert "sleep 60" not in listed.stdout and "sleep 4" not in listed.stdout


def test_a_timeout_spares_other_execs_and_kill_processes_ends_them(box: Container) -> None:
    box.exec(["sh", "-c", "nohup sleep 300 >/dev/null 2>&1 &"], timeout_s=30)
    box.exec(["sleep", "60"], timeout_s=1)

    def sleepers() -> str:
        return box.exec(
            ["sh", "-c", "cat /proc/[0-9]*/cmdline | tr '\\0' ' '"], timeout_s=30
        ).stdout

    assert "sleep 300" in sleepers() and "sleep 60" not in sleepers()
    box.kill_processes()
    assert "sleep 300" not in sleepers()
    assert box.exec(["true"], timeout_s=30).exit_code == 0  # PID 1 lives on


def test_output_is_capped_head_and_tail(box: Container) -> None:
    result = box.exec(["sh", "-c", "seq 1 100000"], timeout_s=60, output_cap=1000)
    assert result.stdout.startswith("1\n2\n") and result.stdout.rstrip().endswith("100000")
    assert "bytes of output cut" in result.stdout and len(result.stdout) < 1200


def test_files_in_and_out(box: Container, tmp_path: Path) -> None:
    box.write_file("/work/deep/a.txt", b"bytes\x00here")
    assert box.read_file("/work/deep/a.txt", 100) == b"bytes\x00here"
    assert box.read_file("/work/deep/a.txt", 3) == b"byt"
    with pytest.raises(ContainerError, match="/work/nope"):
        box.read_file("/work/nope", 10)
    with pytest.raises(ContainerError, match="directory"):
        box.read_file("/work/deep", 10)

    tree = tmp_path / "tree"
    (tree / "sub").mkdir(parents=True)
    (tree / "sub" / "f.txt").write_text("in a folder")
    box.copy_in(tree, "/data/tree")
    single = tmp_path / "one.txt"
    single.write_text("one")
    box.copy_in(single, "/data/files/one.txt")
    shown = box.exec(["sh", "-c", "cat /data/tree/sub/f.txt /data/files/one.txt"], timeout_s=30)
    assert shown.stdout == "in a foldercone".replace("c", "")

    box.exec(["ln", "-s", "/etc/hostname", "/data/tree/link"], timeout_s=30)
    out = tmp_path / "out"
    box.copy_out("/data/tree", out)
    assert (out / "sub" / "f.txt").read_text() == "in a folder"
    assert (out / "link").is_symlink() and str((out / "link").readlink()) == "/etc/hostname"
    with pytest.raises(ContainerError, match="exists already"):
        box.copy_out("/data/tree", out)


def test_remove_is_idempotent_and_a_with_block_removes_on_ctrl_c(
    engine: Engine, run_id: str
) -> None:
    with pytest.raises(KeyboardInterrupt), Container.start(engine, _spec(run_id)) as box:
        assert left_by(engine, run_id) == [box.name]
        raise KeyboardInterrupt
    assert left_by(engine, run_id) == []
    box.remove()
    with pytest.raises(ContainerError, match="not running"):
        box.exec(["true"], timeout_s=30)


def test_labels_name_the_run_and_the_owner(engine: Engine, run_id: str) -> None:
    with Container.start(engine, _spec(run_id)) as box:
        fmt = " ".join(
            f'{{{{index .Config.Labels "{key}"}}}}'
            for key in ("agentbench.run_id", "agentbench.owner")
        )
        shown = engine.run(["inspect", "--format", fmt, box.name]).stdout.decode().split()
    assert shown[0] == run_id
    host, pid, ticks = shown[1].rsplit(":", 2)
    assert (host, int(pid)) == (socket.gethostname(), os.getpid()) and ticks.isdigit()


def test_names_never_collide() -> None:
    names = {new_name("run1", "gw0", "some task/with spaces", 0) for _ in range(200)}
    assert len(names) == 200
    assert all(n.startswith("agentbench-run1-gw0-some-task-with-spaces-e0-") for n in names)


def test_limits_are_enforced_or_noted(engine: Engine, run_id: str) -> None:
    with Container.start(engine, _spec(run_id, cpus=0.5, memory_mb=64)) as box:
        script = (
            "cat /sys/fs/cgroup/memory/memory.limit_in_bytes 2>/dev/null"
            " || cat /sys/fs/cgroup/memory.max"
        )
        limit = box.exec(["sh", "-c", script], timeout_s=30).stdout.strip()
        if limit == str(64 * 1024 * 1024):
            assert box.notes == ()
        else:
            assert any("memory limit of 64 MB" in note for note in box.notes), box.notes


class _Hello(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"hello from the host")

    def log_message(self, format: str, *args: object) -> None:
        return


@pytest.fixture
def host_server() -> Iterator[int]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hello)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


FETCH = (
    "import sys, urllib.request\n"
    "try:\n"
    "    print(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode())\n"
    "except OSError as exc:\n"
    "    print('unreachable', exc)\n"
)


@pytest.mark.parametrize("network", ["host", "none"])
def test_network_host_reaches_the_host_and_none_does_not(
    engine: Engine, run_id: str, host_server: int, network: str
) -> None:
    with Container.start(engine, _spec(run_id, network=network)) as box:
        url = f"http://127.0.0.1:{host_server}/"
        result = box.exec(["python3", "-c", FETCH, url], timeout_s=60)
    if network == "host":
        assert result.stdout.strip() == "hello from the host"
    else:
        assert result.stdout.startswith("unreachable")


def test_a_read_only_mount_is_read_only(engine: Engine, run_id: str, tmp_path: Path) -> None:
    (tmp_path / "given.txt").write_text("given")
    spec = _spec(run_id, mounts=(Mount(tmp_path, "/given", read_only=True),))
    with Container.start(engine, spec) as box:
        assert box.read_file("/given/given.txt", 100) == b"given"
        with pytest.raises(ContainerError, match="Read-only"):
            box.write_file("/given/new.txt", b"x")


def test_an_image_without_a_shell_still_ends_what_ran_past_its_deadline(
    engine: Engine, run_id: str, tmp_path: Path
) -> None:
    """No ``sh`` to hunt the processes down inside: the container itself is killed, and
    the notes say so, rather than leave the command running."""
    context = tmp_path / "noshell"
    context.mkdir()
    (context / "Dockerfile").write_text(
        f"FROM {BASE_IMAGE}\n"
        'RUN ["rm", "-f", "/usr/bin/sh", "/usr/bin/dash", "/usr/bin/bash", "/bin/sh"]\n'
    )
    image = ensure_image(
        engine,
        ImageSource(context, None),
        image_map={},
        cache_dir=tmp_path / "cache",
        log_path=tmp_path / "build.log",
    )
    with Container.start(engine, _spec(run_id, image=image)) as box:
        result = box.exec(["sleep", "60"], timeout_s=1)
        assert result.timed_out
        assert any("the container was killed" in note for note in box.notes), box.notes
        state = engine.run(["inspect", "--format", "{{.State.Running}}", box.name])
        assert state.stdout.strip() == b"false"


def test_a_command_that_ignores_its_stdin_keeps_its_output(box: Container) -> None:
    """Podman drops the output of an exec whose command ends without reading its stdin
    (more often than not, measured); every one of these must still say why it failed."""
    for _ in range(10):
        result = box.exec(["sh", "-c", "echo why >&2; exit 3"], timeout_s=30, stdin=b"x" * 65536)
        assert (result.exit_code, result.stderr) == (3, "why\n")
        with pytest.raises(ContainerError, match=r"Read-only|No such file"):
            box.write_file("/proc/no-such/file", b"data")


def test_a_name_in_use_fails_and_leaves_the_other_container_alone(
    engine: Engine, run_id: str
) -> None:
    with Container.start(engine, _spec(run_id)) as first:
        with pytest.raises(ContainerError, match="already in use"):
            Container.start(engine, _spec(run_id, name=first.name))
        assert first.exec(["true"], timeout_s=30).exit_code == 0
    with pytest.raises(ContainerError, match="':' in a path"):
        Container.start(engine, _spec(run_id, mounts=(Mount(Path("/tmp/a:b"), "/x"),)))
    assert left_by(engine, run_id) == []
