"""The only way out of a strict sandbox: a TCP port on the sandbox's own loopback that
leads to the gateway's Unix socket, and nowhere else.

Run inside the sandbox (standard library only, started by file path, so nothing of the
package is imported there):

    python netbridge.py SOCKET PORT -- AGENT ARGV…

It listens on 127.0.0.1:PORT of the sandbox's network namespace (which has no other
interface), relays every connection to the Unix socket SOCKET (the gateway's, bound into
the sandbox), starts the agent, and exits with the agent's exit status (128 + N when a
signal N ended it). The agent's environment already points at 127.0.0.1:PORT.
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import threading

_CHUNK = 65536


def _pump(source: socket.socket, target: socket.socket) -> None:
    try:
        while data := source.recv(_CHUNK):
            target.sendall(data)
    except OSError:
        return
    finally:
        for end in (target, source):
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)


def _serve(listener: socket.socket, path: str) -> None:
    while True:
        try:
            client, _ = listener.accept()
        except OSError:
            return
        upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            upstream.connect(path)
        except OSError:
            client.close()
            upstream.close()
            continue
        client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for a, b in ((client, upstream), (upstream, client)):
            threading.Thread(target=_pump, args=(a, b), daemon=True).start()


def main(argv: list[str]) -> int:
    if len(argv) < 4 or argv[2] != "--":
        print("usage: netbridge.py SOCKET PORT -- AGENT ARGV…", file=sys.stderr)
        return 2
    path, port, command = argv[0], int(argv[1]), argv[3:]
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(256)
    threading.Thread(target=_serve, args=(listener, path), daemon=True).start()
    try:
        agent = subprocess.Popen(command)
    except OSError as exc:
        print(f"agentbench: cannot start the agent {command[0]!r}: {exc}", file=sys.stderr)
        return 127
    code = agent.wait()
    return 128 - code if code < 0 else code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
