"""A hostile agent: one model call, then 40 MB to stdout and 40 MB to stderr."""

from __future__ import annotations

import json
import os
import sys
import urllib.request

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
line = b"flood " * 170 + b"\n"
for _ in range(40_000):
    sys.stdout.buffer.write(line)
    sys.stderr.buffer.write(line)
sys.stdout.flush()
