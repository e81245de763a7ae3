"""The sandbox: confined paths, every limit hit and reported, a scrubbed environment, and
the containment report — through real subprocesses, in every isolation mode this machine
offers (``basic`` always; ``auto`` is bubblewrap or unshare when they work here)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pytest_agentbench.errors import SandboxError
from pytest_agentbench.sandbox import Limits, Workspace, containment
from pytest_agentbench.sandbox.isolation import Plan
from pytest_agentbench.sandbox.process import run_command, sandbox_env

STRONG = containment()["level"] == "strong"
needs_strong = pytest.mark.skipif(
    not STRONG,
    reason=f"strong isolation unavailable here: {containment()['detail']} "
    "(install the Debian package bubblewrap)",
)
MODES = ["basic", "auto"]
PY = sys.executable


@pytest.fixture(params=MODES)
def ws(request: pytest.FixtureRequest, tmp_path: Path) -> Workspace:
    return Workspace.create(tmp_path / "ws", {"hello.txt": "hi\n"}, isolation=request.param)


def py(code: str) -> list[str]:
    return [PY, "-c", code]


# --- containment ---------------------------------------------------------------------


def test_containment_reports_what_commands_get() -> None:
    report = containment()
    assert set(report) >= {"level", "tool", "network", "readonly_host", "detail", "processes"}
    assert report["level"] in ("strong", "basic")
    assert report["tool"] in ("bwrap", "unshare", None)
    if report["level"] == "strong":
        assert report["tool"] == "bwrap"
        assert report["network"] is False and report["readonly_host"] is True
    basic = containment("basic")
    assert basic["level"] == "basic" and basic["tool"] is None and basic["network"] is True
    assert "isolation=basic" in basic["detail"]


def test_unknown_isolation_and_strict_without_bwrap_are_refused(tmp_path: Path) -> None:
    with pytest.raises(SandboxError, match="unknown sandbox isolation 'tight'"):
        Workspace.create(tmp_path / "a", isolation="tight")
    if STRONG:
        strict = Workspace.create(tmp_path / "b", isolation="strict")
        assert strict.containment()["level"] == "strong"
    else:
        with pytest.raises(SandboxError, match="strict sandbox"):
            Workspace.create(tmp_path / "b", isolation="strict")


# --- workspace and paths -------------------------------------------------------------


def test_create_seeds_from_a_directory_then_the_table(tmp_path: Path) -> None:
    source = tmp_path / "fixture"
    (source / "pkg").mkdir(parents=True)
    (source / "pkg" / "mod.py").write_text("X = 1\n")
    (source / "notes.txt").write_text("from dir\n")
    ws = Workspace.create(tmp_path / "ws", {"notes.txt": "from table\n", "a/b.txt": "b"}, source)
    assert ws.read_file("pkg/mod.py") == "X = 1\n"
    assert ws.read_file("notes.txt") == "from table\n"
    assert ws.list_files() == ["a/b.txt", "notes.txt", "pkg/mod.py"]
    with pytest.raises(SandboxError, match="not empty"):
        Workspace.create(tmp_path / "ws")


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("../outside.txt", "contains '..'"),
        ("a/../../outside.txt", "contains '..'"),
        ("/etc/passwd", "is absolute"),
        ("", "is empty"),
        ("a\x00b", "NUL"),
        ("link_out/secret.txt", "through a symlink"),
        ("dangling_out", "through a symlink"),
    ],
)
def test_path_escapes_are_refused(tmp_path: Path, path: str, reason: str) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret")
    ws = Workspace.create(tmp_path / "ws")
    (ws.path / "link_out").symlink_to(outside)
    (ws.path / "dangling_out").symlink_to(tmp_path / "not-yet")
    for action in (ws.resolve, ws.read_file, lambda p: ws.write_file(p, "x")):
        with pytest.raises(SandboxError, match=reason):
            action(path)
    assert (outside / "secret.txt").read_text() == "secret"
    assert not (tmp_path / "not-yet").exists()


def test_symlinks_inside_the_workspace_are_fine_and_listing_does_not_follow(
    tmp_path: Path,
) -> None:
    ws = Workspace.create(tmp_path / "ws", {"real/data.txt": "data"})
    (ws.path / "alias").symlink_to(ws.path / "real")
    assert ws.read_file("alias/data.txt") == "data"
    ws.write_file("alias/new.txt", "new")
    assert (ws.path / "real" / "new.txt").read_text() == "new"
    assert ws.list_files() == ["alias", "real/data.txt", "real/new.txt"]


def test_read_file_caps_and_refuses_what_is_not_a_file(tmp_path: Path) -> None:
    ws = Workspace.create(tmp_path / "ws", {"big.txt": "x" * 5000})
    text = ws.read_file("big.txt", limit=100)
    assert text.startswith("x" * 100) and "truncated: the file has 5000 bytes" in text
    os.mkfifo(ws.path / "pipe")  # reading a FIFO would block the harness forever
    with pytest.raises(SandboxError, match="not a regular file"):
        ws.read_file("pipe")
    with pytest.raises(SandboxError, match="No such file"):
        ws.read_file("missing.txt")


# --- commands and limits -------------------------------------------------------------


def test_command_runs_in_the_workspace_with_stdin(ws: Workspace) -> None:
    result = ws.run("cat hello.txt; pwd; cat; echo oops >&2", stdin="from stdin")
    assert result.exit_code == 0 and result.killed_by is None and not result.timed_out
    assert result.stdout == f"hi\n{ws.path}\nfrom stdin"
    assert result.stderr == "oops\n"
    assert ws.run("exit 3").exit_code == 3


def test_timeout_kills_the_whole_group(ws: Workspace) -> None:
    marker = f"agentbench-test-{os.getpid()}-{time.monotonic_ns()}"
    command = f"{PY} -c 'import time; time.sleep(60)' {marker} & sleep 60"
    result = ws.run(command, limits=Limits(timeout_s=0.5))
    assert result.timed_out and result.killed_by == "timeout" and result.exit_code is None
    assert result.elapsed_s < 10
    assert not _processes_with(marker)


def test_timeout_kills_the_group_without_cgroup_or_namespace(tmp_path: Path) -> None:
    """Where neither a pids cgroup nor a pid namespace catches stragglers, the process
    group kill must: drive that path directly."""
    ws = Workspace.create(tmp_path / "ws")
    marker = f"agentbench-test-{os.getpid()}-{time.monotonic_ns()}"
    command = f"{PY} -c 'import time; time.sleep(60)' {marker} & sleep 60"
    result = run_command(
        ["/bin/sh", "-c", command],
        cwd=ws.path,
        env=sandbox_env(ws.path),
        limits=Limits(timeout_s=0.5),
        plan=Plan("basic", None, True, False, "watch", "test: no cgroup, no namespace"),
    )
    assert result.killed_by == "timeout"
    assert not _processes_with(marker)


def test_leftover_background_processes_die_with_the_command(ws: Workspace) -> None:
    marker = f"agentbench-test-{os.getpid()}-{time.monotonic_ns()}"
    result = ws.run(f"{PY} -c 'import time; time.sleep(60)' {marker} > /dev/null 2>&1 & echo ok")
    assert result.stdout == "ok\n" and result.exit_code == 0
    assert not _processes_with(marker)


def _processes_with(marker: str, wait_s: float = 5.0) -> list[int]:
    """Live processes whose command line holds ``marker`` (zombies have none), after
    giving SIGKILL a bounded moment to land."""
    deadline = time.monotonic() + wait_s
    while True:
        found = []
        for entry in os.scandir("/proc"):
            if entry.name.isdigit():
                try:
                    cmdline = Path(entry.path, "cmdline").read_bytes()
                except OSError:
                    continue
                if marker.encode() in cmdline:
                    found.append(int(entry.name))
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


def test_memory_limit(ws: Workspace) -> None:
    result = ws.run(py("x = bytearray(400 * 1024 * 1024)"), limits=Limits(memory_mb=200))
    assert result.killed_by == "memory" and "MemoryError" in result.stderr
    fits = ws.run(py("x = bytearray(50 * 1024 * 1024)"), limits=Limits(memory_mb=400))
    assert fits.exit_code == 0 and fits.killed_by is None


def test_cpu_limit(ws: Workspace) -> None:
    result = ws.run(py("while True: pass"), limits=Limits(cpu_s=1, timeout_s=20))
    assert result.killed_by == "cpu" and result.exit_code is None and not result.timed_out


def test_equal_cpu_and_wall_budgets_leave_the_first_word_to_the_wall_clock() -> None:
    """A one-thread spin spends CPU as fast as the wall clock runs: with equal budgets the
    CPU limit would race the timer (CI once saw a hung check reported "cpu"). The CPU
    limit then sits a second past the wall limit; a lower CPU budget is kept exact."""
    import resource

    from pytest_agentbench.sandbox.process import _rlimits

    def cpu_limit(limits: Limits) -> tuple[int, int]:
        return dict(_rlimits(limits, None))[resource.RLIMIT_CPU]

    assert cpu_limit(Limits(timeout_s=2, cpu_s=2)) == (3, 4)
    assert cpu_limit(Limits(timeout_s=2.5, cpu_s=2.5)) == (4, 5)
    assert cpu_limit(Limits(timeout_s=20, cpu_s=1)) == (1, 2)


FORK_BOMB = """
import os, time
while True:
    try:
        os.fork()
    except OSError:
        time.sleep(0.01)
"""


def test_fork_bomb_is_stopped_and_reported(ws: Workspace) -> None:
    result = ws.run(py(FORK_BOMB), limits=Limits(processes=20, timeout_s=20))
    assert result.killed_by == "processes" and not result.timed_out
    assert result.exit_code is None


def test_fork_bomb_watcher_without_cgroup_or_rlimit(tmp_path: Path) -> None:
    """Root without a usable pids cgroup gets only the watcher; drive that path directly."""
    ws = Workspace.create(tmp_path / "ws")
    plan = Plan("basic", None, True, False, "watch", "test: watcher only")
    result = run_command(
        py(FORK_BOMB),
        cwd=ws.path,
        env=sandbox_env(ws.path),
        limits=Limits(processes=20, timeout_s=20),
        plan=plan,
    )
    assert result.killed_by == "processes" and not result.timed_out


def test_huge_output_is_capped_and_runaway_output_killed(ws: Workspace) -> None:
    limits = Limits(output_bytes=10_000)
    finite = ws.run(py("print('a' * 30_000 + 'END')"), limits=limits)
    assert finite.truncated and finite.exit_code == 0 and finite.killed_by is None
    assert finite.stdout.startswith("a" * 100) and finite.stdout.endswith("END\n")
    assert "bytes of output cut" in finite.stdout and len(finite.stdout) < 10_100
    endless = ws.run(py("import sys\nwhile True: sys.stdout.write('y' * 4096)"), limits=limits)
    assert endless.killed_by == "output" and endless.truncated and len(endless.stdout) < 10_100


def test_disk_fill_stops_at_the_file_size_limit(ws: Workspace) -> None:
    limits = Limits(file_size_mb=1)
    result = ws.run("head -c 5000000 /dev/zero > big.bin", limits=limits)
    assert result.killed_by == "file_size"
    assert (ws.path / "big.bin").stat().st_size <= 1024 * 1024
    result = ws.run(py("open('big2.bin', 'wb').write(b'x' * 5_000_000)"), limits=limits)
    assert result.killed_by == "file_size" and "File too large" in result.stderr
    assert (ws.path / "big2.bin").stat().st_size <= 1024 * 1024


def test_killing_the_parent_never_reaches_the_harness(ws: Workspace) -> None:
    result = ws.run("kill -9 $PPID; echo still-here")
    assert result.exit_code in (0, None)  # the shim died, or bwrap's init ignored it
    assert ws.run("echo fine").stdout == "fine\n"


# --- environment ---------------------------------------------------------------------


def test_no_secret_reaches_the_command(ws: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-secret-value-123")
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.invalid:3128")
    monkeypatch.setenv("GITHUB_TOKEN", "ghp-test-secret-value")
    result = ws.run("env")
    env = dict(line.split("=", 1) for line in result.stdout.splitlines() if "=" in line)
    assert "sk-test-secret" not in result.stdout and "ghp-test" not in result.stdout
    assert "OPENAI_API_KEY" not in env and "HTTPS_PROXY" not in env
    assert env["HOME"] == str(ws.path / ".home") and env["PYTHONDONTWRITEBYTECODE"] == "1"
    assert env["PATH"].split(os.pathsep)[0] == os.path.dirname(PY)
    with pytest.raises(SandboxError, match="refusing to pass ANTHROPIC_API_KEY") as info:
        ws.run("true", env={"ANTHROPIC_API_KEY": "sk-ant-hidden"})
    assert "sk-ant-hidden" not in str(info.value)
    assert ws.run("echo $GREETING", env={"GREETING": "hello"}).stdout == "hello\n"


@needs_strong
def test_strong_isolation_hides_host_processes_network_and_files(tmp_path: Path) -> None:
    ws = Workspace.create(tmp_path / "ws", isolation="strict")
    basic = Workspace.create(tmp_path / "basic", isolation="basic")
    # a host process started with a key in its environment, as the harness is
    env = {**os.environ, "OPENAI_API_KEY": "sk-test-secret-value-456"}
    holder = subprocess.Popen([PY, "-c", "import time; time.sleep(60)"], env=env)
    try:
        read_all = "cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n'; echo done"
        result = ws.run(read_all)
        assert "sk-test-secret" not in result.stdout and result.stdout.endswith("done\n")
        # the same probe finds it where host processes are visible (the basic-mode gap)
        assert "sk-test-secret" in basic.run(read_all).stdout
    finally:
        holder.kill()
        holder.wait()
    # a server on 127.0.0.1 in the harness cannot be reached: the sandbox has its own network
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        probe = f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=2)"
        assert ws.run(py(probe)).exit_code != 0
        assert basic.run(py(probe)).exit_code == 0  # the same probe works without isolation
    # the host outside /tmp is read-only (a checkout under /tmp is hidden behind the tmpfs)
    host_file = Path("/var/tmp") / f".sandbox-probe-{os.getpid()}"
    result = ws.run(f"echo x > {host_file}")
    assert result.exit_code != 0 and "Read-only file system" in result.stderr
    assert not host_file.exists()
    in_tmp = tmp_path / "outside.txt"  # /tmp is a private tmpfs: writable, never the host's
    assert ws.run(f"echo x > {in_tmp}").exit_code == 0 and not in_tmp.exists()
    assert ws.run("echo x > inside.txt").exit_code == 0 and ws.read_file("inside.txt") == "x\n"


def test_size_and_prune(tmp_path: Path) -> None:
    ws = Workspace.create(tmp_path / "ws", {"small.txt": "x" * 10, "big.txt": "y" * 5000})
    assert ws.size_bytes() == 5010
    assert ws.prune(1000) == ["big.txt"]
    assert ws.size_bytes() == 10 and ws.prune(1000) == []


def test_limits_must_be_positive() -> None:
    with pytest.raises(ValueError, match="timeout_s must be a positive number"):
        Limits(timeout_s=0)
