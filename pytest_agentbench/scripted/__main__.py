"""``python -m pytest_agentbench.scripted --script replies.toml``: serve a script file.

Test any OpenAI-compatible client or agent against scripted replies, offline. Runs until
Ctrl-C or SIGTERM; listens on loopback only.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Sequence
from types import FrameType

from pytest_agentbench.scripted.script import load_script_file
from pytest_agentbench.scripted.server import ScriptedServer, is_loopback


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m pytest_agentbench.scripted",
        description="Serve scripted model replies over the OpenAI (Chat Completions, Responses) "
        "and Anthropic Messages APIs, their batch APIs included.",
    )
    parser.add_argument(
        "--script",
        required=True,
        help="TOML or JSON file: a [scripts] table (key -> list of replies) and/or default = [...]",
    )
    parser.add_argument(
        "--port", type=int, default=0, help="port to listen on (default: 0, a free port)"
    )
    parser.add_argument(
        "--host",
        default="127.0.0.1",
        help="loopback address to listen on: 127.0.0.0/8, ::1 or localhost (default: 127.0.0.1)",
    )
    parser.add_argument(
        "--serial",
        action="store_true",
        help="serve one generation at a time, the others queued (as llama-cpp-python does)",
    )
    parser.add_argument(
        "--batch-polls",
        type=int,
        default=1,
        metavar="N",
        help="a provider batch ends at the N-th read of its status (default: 1)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if not is_loopback(args.host):
        print(
            f"error: --host {args.host!r} is not a loopback address; the scripted provider "
            "only listens on 127.0.0.0/8, ::1 or localhost",
            file=sys.stderr,
        )
        return 2
    if not 0 <= args.port <= 65535:
        print(f"error: --port {args.port} is not a port number (0-65535)", file=sys.stderr)
        return 2
    if args.batch_polls < 1:
        print(f"error: --batch-polls {args.batch_polls} must be at least 1", file=sys.stderr)
        return 2
    try:
        script = load_script_file(args.script)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    server = ScriptedServer(
        script.scripts,
        script.default,
        host=args.host,
        port=args.port,
        serial=args.serial,
        batch_polls=args.batch_polls,
    )
    try:
        url = server.start()
    except OSError as exc:
        print(f"error: cannot listen on {args.host}:{args.port}: {exc.strerror}", file=sys.stderr)
        return 1
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    print(f"scripted provider listening on {url}", flush=True)
    try:
        while not stop.wait(0.5):
            pass
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
