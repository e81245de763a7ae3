"""The scripted provider: a loopback HTTP server that plays scripted model replies."""

from __future__ import annotations

from pytest_agentbench.scripted.script import (
    REPLY_KEYS,
    Reply,
    ReplyError,
    ScriptFile,
    load_script_file,
    parse_replies,
    parse_scripts,
)
from pytest_agentbench.scripted.server import ScriptedServer, is_loopback

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
