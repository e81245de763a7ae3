"""hide_secrets: /proc/<pid>/environ shows stars, while the process and the children it
starts keep the real values (a real child interpreter started with a planted key); the
processes the harness itself starts (xdist workers, tool probes) never hold a key in
their start-up block."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys

import pytest

from pytest_agentbench.sandbox.environ_guard import secret_like
from pytest_agentbench.sandbox.isolation import _probe

PROGRAM = """
import json, os, subprocess, sys
from pytest_agentbench.sandbox.environ_guard import guard_harness
hidden = guard_harness()
with open('/proc/self/environ', 'rb') as f:
    shown = dict(e.split(b'=', 1) for e in f.read().split(b'\\0') if b'=' in e)
child = subprocess.run(
    [sys.executable, '-c', 'import os; print(os.environ["OPENAI_API_KEY"])'],
    capture_output=True, text=True, check=True,
).stdout.strip()
print(json.dumps({
    'hidden': sorted(hidden),
    'shown_key': shown[b'OPENAI_API_KEY'].decode(),
    'shown_plain': shown[b'PLAIN_SETTING'].decode(),
    'shown_url': shown[b'OPENAI_BASE_URL'].decode(),
    'live_url': os.environ['OPENAI_BASE_URL'],
    'live': os.environ['OPENAI_API_KEY'],
    'c_getenv': os.getenv('OPENAI_API_KEY'),
    'child': child,
}))
"""


def test_the_start_up_block_shows_stars_and_the_live_environment_keeps_the_key() -> None:
    key = "sk-test-PLANTED-0123456789abcdef"
    url = "https://bench:s3cret-pw@llm.example/v1"
    env = {**os.environ, "OPENAI_API_KEY": key, "PLAIN_SETTING": "visible", "OPENAI_BASE_URL": url}
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert "OPENAI_API_KEY" in found["hidden"] and "PLAIN_SETTING" not in found["hidden"]
    assert found["shown_key"] == "*" * len(key)
    assert found["shown_plain"] == "visible"
    assert found["live"] == found["c_getenv"] == found["child"] == key
    assert found["shown_url"] == "https://" + "*" * len("bench:s3cret-pw") + "@llm.example/v1"
    assert found["live_url"] == url


def test_secret_like_names() -> None:
    assert all(map(secret_like, ["OPENAI_API_KEY", "GH_TOKEN", "HTTPS_PROXY", "DB_PASSWORD"]))
    assert not any(map(secret_like, ["PATH", "HOME", "LANG", "PYTHONPATH"]))


WORKER_TEST = """
import os, subprocess, sys

def test_this_worker_was_born_without_the_key():
    assert os.environ.get("PYTEST_XDIST_WORKER"), "not an xdist worker"
    with open("/proc/self/environ", "rb") as f:
        names = {entry.partition(b"=")[0] for entry in f.read().split(b"\\0")}
    assert b"AGENTBENCH_TEST_TOKEN" not in names, "the key was in the start-up block"
    assert b"PLAIN_SETTING" in names
    child = subprocess.run(
        [sys.executable, "-c", "import os; print(os.environ['AGENTBENCH_TEST_TOKEN'])"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()
    assert os.environ["AGENTBENCH_TEST_TOKEN"] == os.getenv("AGENTBENCH_TEST_TOKEN") == child
    assert child == KEY
"""


CRASH_FIRST = """
import os

def test_0_crash_the_first_worker():
    if not os.path.exists(MARK):
        open(MARK, "w").close()
        os._exit(1)
"""


@pytest.mark.slow
@pytest.mark.parametrize("restart", [False, True], ids=["workers", "restarted-worker"])
def test_xdist_workers_get_the_keys_without_holding_them_in_their_start_up_block(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, restart: bool
) -> None:
    """A worker's start-up block is readable through /proc/<pid>/environ until its own
    guard runs (seconds under load; a crashed worker's replacement starts while tasks
    run). Workers are started without the keys and get them over the execnet channel."""
    key = f"sk-test-PLANTED-{secrets.token_hex(12)}"
    monkeypatch.setenv("AGENTBENCH_TEST_TOKEN", key)
    monkeypatch.setenv("PLAIN_SETTING", "visible")
    head = f"KEY = {key!r}\nMARK = {str(pytester.path / 'crashed-once')!r}\n"
    pytester.makepyfile(test_worker_env=head + (CRASH_FIRST if restart else "") + WORKER_TEST)
    result = pytester.runpytest_subprocess(
        "--agentbench", "-p", "no:cacheprovider", "-n", "1" if restart else "2", timeout=300
    )
    if restart:  # the key check runs on the worker that replaced the crashed one
        result.stdout.fnmatch_lines(["*replacing crashed worker*"])
    result.assert_outcomes(passed=1, failed=1 if restart else 0)


def test_the_tool_probes_start_without_the_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    """A probe (bwrap, unshare, timeout) is a process of ours that another process could
    read while it runs: it gets the tool path and the locale, no key."""
    monkeypatch.setenv("AGENTBENCH_TEST_TOKEN", "sk-test-PLANTED-probe")
    assert _probe(["/bin/sh", "-c", 'test -z "$AGENTBENCH_TEST_TOKEN"']) is None
    assert _probe(["/bin/sh", "-c", 'test -n "$PATH"']) is None


NON_DUMPABLE = """
import ctypes
from pytest_agentbench.sandbox.environ_guard import _set_non_dumpable
print(_set_non_dumpable(), ctypes.CDLL(None).prctl(3, 0, 0, 0, 0))  # 3: PR_GET_DUMPABLE
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl is Linux's")
def test_the_harness_makes_itself_non_dumpable() -> None:
    """Non-dumpable, another process of the same user cannot read the harness's
    /proc/<pid>/environ or mem: the call must reach libc's prctl."""
    proc = subprocess.run(
        [sys.executable, "-c", NON_DUMPABLE], capture_output=True, text=True, timeout=60
    )
    assert proc.stdout.split() == ["True", "0"], proc.stdout + proc.stderr
