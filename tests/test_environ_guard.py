"""hide_secrets: /proc/<pid>/environ shows stars, while the process and the children it
starts keep the real values (a real child interpreter started with a planted key)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from pytest_agentbench.sandbox.environ_guard import secret_like

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
