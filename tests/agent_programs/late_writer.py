"""A hostile agent: it leaves a straggler that sheds everything it inherited (a session
of its own, an empty environment, so no mark of the command that started it) and writes
``late.txt`` in the working folder SECONDS later; then it asks its model (streamed) and
sleeps, never exiting on its own.

    python3 late_writer.py SECONDS
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request

seconds = sys.argv[1] if len(sys.argv) > 1 else "3"
subprocess.Popen(
    ["setsid", "env", "-i", "sh", "-c", f"sleep {seconds}; echo late > late.txt"],
    stdin=subprocess.DEVNULL,
    stdout=subprocess.DEVNULL,
    stderr=subprocess.DEVNULL,
    start_new_session=True,
)
body = json.dumps(
    {"model": "any", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
).encode()
request = urllib.request.Request(
    os.environ["OPENAI_BASE_URL"].rstrip("/") + "/chat/completions",
    data=body,
    headers={
        "content-type": "application/json",
        "authorization": f"Bearer {os.environ.get('OPENAI_API_KEY', '')}",
    },
)
try:
    with urllib.request.urlopen(request, timeout=120) as response:
        while response.read(4096):
            pass
except OSError:
    pass
while True:
    time.sleep(1)
