"""A hostile ACP agent (standard library only): it opens its session like any other, and
on its prompt it leaves a straggler that sheds everything it inherited (a session of its
own, an empty environment: no mark of the exec that started it) and appends a line to
``late.txt`` in its working folder every 0.2 s, then keeps appending to ``writes.txt``
itself: it never answers the prompt, ignores ``session/cancel`` and the end of its input.

    python3 acp_hostile.py
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time


def send(message: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def keep_writing() -> None:
    while True:
        with open("writes.txt", "a") as out:
            out.write(f"{time.time()}\n")
        time.sleep(0.2)


def main() -> None:
    for line in sys.stdin:
        message = json.loads(line) if line.strip() else {}
        method, ident = message.get("method"), message.get("id")
        if method == "initialize":
            info = {"name": "hostile-acp-agent", "version": "1.0"}
            send(
                {"jsonrpc": "2.0", "id": ident, "result": {"protocolVersion": 1, "agentInfo": info}}
            )
        elif method == "session/new":
            send({"jsonrpc": "2.0", "id": ident, "result": {"sessionId": "s-1"}})
        elif method == "session/prompt":
            subprocess.Popen(
                [
                    "setsid",
                    "env",
                    "-i",
                    "sh",
                    "-c",
                    "while :; do date >> late.txt; sleep 0.2; done",
                ],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
            threading.Thread(target=keep_writing, daemon=True).start()
    while True:  # its input ended: it writes on regardless
        time.sleep(1)


if __name__ == "__main__":
    main()
