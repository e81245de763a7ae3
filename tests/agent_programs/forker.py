"""A hostile agent: it starts a child in a session of its own (setsid) that would outlive
it, writes the child's pid to child.pid in its workspace, makes one model call and
exits at once, leaving the child behind."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

child = subprocess.Popen(
    [sys.executable, "-c", "import time\nwhile True: time.sleep(1)"],
    start_new_session=True,
    stdin=subprocess.DEVNULL,
    stdout=subprocess.DEVNULL,
    stderr=subprocess.DEVNULL,
)
# the pid as the agent sees it (in a pid namespace not the host's): the test looks for
# survivors by their working folder, the workspace, which the child shares
Path("child.pid").write_text(str(child.pid))
body = json.dumps({"model": "any", "messages": [{"role": "user", "content": "hi"}]}).encode()
request = urllib.request.Request(
    os.environ["OPENAI_BASE_URL"].rstrip("/") + "/chat/completions",
    data=body,
    headers={
        "content-type": "application/json",
        "authorization": f"Bearer {os.environ.get('OPENAI_API_KEY', '')}",
    },
)
with urllib.request.urlopen(request, timeout=30) as response:
    print(json.loads(response.read())["choices"][0]["message"]["content"])
