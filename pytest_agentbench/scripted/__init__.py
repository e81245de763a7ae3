"""The scripted provider: a loopback HTTP server that plays scripted model replies."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_agentbench.scripted.script import (
    REPLY_KEYS,
    Reply,
    ReplyError,
    ScriptFile,
    load_script_file,
    parse_replies,
    parse_scripts,
)

if TYPE_CHECKING:
    from pytest_agentbench.scripted.server import ScriptedServer, is_loopback


def __getattr__(name: str) -> object:
    """The server on first use: a run against a real model reads scripted replies of its
    suites (``script``) but never starts the server (http.server and its imports)."""
    if name in ("ScriptedServer", "is_loopback"):
        from pytest_agentbench.scripted import server

        return getattr(server, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "REPLY_KEYS",
    "Reply",
    "ReplyError",
    "ScriptFile",
    "ScriptedServer",
    "is_loopback",
    "load_script_file",
    "parse_replies",
    "parse_scripts",
]
