"""A hostile agent: one model call, then it never exits (and ignores SIGTERM)."""

from __future__ import annotations

import json
import os
import signal
import time
import urllib.request

signal.signal(signal.SIGTERM, signal.SIG_IGN)
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
    response.read()
with open("started.txt", "w") as mark:
    mark.write(str(os.getpid()))
while True:
    time.sleep(1)
