"""The scripted reply format, and loading script files for the standalone tool.

A reply is what the scripted model does for one request: a plain string is its answer
text; a table says more (thinking, declared usage, an error, slowness, a loop, a broken
or hung stream). The suite loader validates ``scripted = [...]`` with the same ``Reply``.
How a reply looks on the wire is each protocol's business (``wire_*.py``).
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import field
from pathlib import Path
from typing import TypeGuard

from pytest_agentbench.core.fastclass import dataclass
from pytest_agentbench.core.jsontypes import JsonObject, JsonValue

#: Every key a reply table may have; anything else is a mistake worth reporting.
REPLY_KEYS = (
    "text",
    "thinking",
    "redacted_thinking",
    "usage",
    "error",
    "delay_s",
    "chunk_delay_s",
    "chunk_size",
    "repeat",
    "truncate",
    "hang",
    "empty_stream",
    "finish_reason",
    "tool_calls",
    "batch_expired",
)
ERROR_KEYS = ("status", "message", "retry_after", "type", "times")
DEFAULT_CHUNK_SIZE = 8
#: The largest wait a reply may ask for (``delay_s``, ``chunk_delay_s``, ``retry_after``):
#: a day; far beyond it the clock arithmetic of the server and the clients overflows.
MAX_SECONDS = 86400.0
#: The largest count a reply may ask for (``repeat``, ``chunk_size``, ``times``): a
#: reply repeated more often would not fit in memory.
MAX_COUNT = 1_000_000


@dataclass(frozen=True)
class ReplyError:
    """An HTTP error the scripted model answers with instead of a generation. An empty
    ``type`` is the status's own type in the protocol that serves it (``wire_*.py``)."""

    status: int = 500
    message: str = "scripted error"
    retry_after: float | None = None
    type: str = ""
    times: int | None = None


@dataclass(frozen=True)
class ScriptedToolCall:
    """A tool call the scripted model makes. ``arguments`` is the JSON text sent on the
    wire (a table in the script is serialised; a string is sent as written, so a script
    can send malformed arguments on purpose). ``id`` defaults to ``call_<index>``."""

    name: str
    arguments: str = "{}"
    id: str = ""


TOOL_CALL_KEYS = ("name", "arguments", "id")


def _parse_tool_call(obj: object, where: str, index: int) -> ScriptedToolCall:
    here = f"{where}: tool_calls[{index}]"
    if not isinstance(obj, Mapping):
        raise ValueError(f"{here} must be a table with name and arguments")
    unknown = sorted(str(k) for k in obj if k not in TOOL_CALL_KEYS)
    if unknown:
        raise ValueError(
            f"{here}: unknown key(s) {', '.join(map(repr, unknown))}; "
            f"expected some of: {', '.join(TOOL_CALL_KEYS)}"
        )
    name = obj.get("name")
    if not isinstance(name, str) or not name:
        raise ValueError(f"{here}: 'name' must be a non-empty string")
    arguments = obj.get("arguments", {})
    if isinstance(arguments, Mapping):
        arguments = json.dumps(arguments, ensure_ascii=False)
    elif not isinstance(arguments, str):
        raise ValueError(f"{here}: 'arguments' must be a table or a JSON string")
    call_id = obj.get("id", f"call_{index}")
    if not isinstance(call_id, str) or not call_id:
        raise ValueError(f"{here}: 'id' must be a non-empty string")
    return ScriptedToolCall(name=name, arguments=arguments, id=call_id)


@dataclass(frozen=True)
class Reply:
    """One scripted reply; see docs/scripted.md for what each field does on the wire."""

    text: str = ""
    thinking: str = ""
    redacted_thinking: str = ""
    usage: Mapping[str, JsonValue] | None = None
    delay_s: float = 0.0
    chunk_delay_s: float = 0.0
    chunk_size: int = DEFAULT_CHUNK_SIZE
    repeat: int = 1
    truncate: bool = False
    hang: bool = False
    #: a streamed request gets a 200 stream that ends without one event (what
    #: llama-cpp-python sends when the prompt exceeds its context window); a non-streamed
    #: request gets the reply as usual, its error included
    empty_stream: bool = False
    finish_reason: str = "stop"
    tool_calls: tuple[ScriptedToolCall, ...] = field(default=())
    errors: tuple[ReplyError, ...] = field(default=())
    #: in a provider batch (``batches.py``) this turn's entry expires unanswered; a live
    #: request is answered as usual
    batch_expired: bool = False

    @property
    def error(self) -> ReplyError | None:
        """The turn's first error; None when it has none."""
        return self.errors[0] if self.errors else None

    def error_at(self, attempt: int) -> ReplyError | None:
        """The error answering attempt ``attempt`` (0-based) of this turn: the errors in
        order, each for its ``times`` attempts (None: every attempt from then on); None
        once they are spent, when the reply itself is served."""
        for error in self.errors:
            if error.times is None or attempt < error.times:
                return error
            attempt -= error.times
        return None

    @property
    def full_text(self) -> str:
        """The answer text as sent: ``text`` repeated ``repeat`` times."""
        return self.text * self.repeat

    @classmethod
    def parse(cls, obj: object, where: str) -> Reply:
        """Build a Reply from a string or a table; raises ValueError naming ``where``."""
        if isinstance(obj, Reply):
            return obj
        if isinstance(obj, str):
            return cls(text=obj)
        if not isinstance(obj, Mapping):
            raise ValueError(
                f"{where}: a reply must be a string or a table, got {type(obj).__name__}"
            )
        unknown = sorted(str(k) for k in obj if k not in REPLY_KEYS)
        if unknown:
            raise ValueError(
                f"{where}: unknown reply key(s) {', '.join(map(repr, unknown))}; "
                f"expected some of: {', '.join(REPLY_KEYS)}"
            )
        usage = obj.get("usage")
        if usage is not None:
            usage = dict(usage) if isinstance(usage, Mapping) else None
            if not _json_object(usage):
                raise ValueError(f"{where}: 'usage' must be a table of provider usage fields")
        tool_calls = obj.get("tool_calls", ())
        if not isinstance(tool_calls, Sequence) or isinstance(tool_calls, str):
            raise ValueError(f"{where}: 'tool_calls' must be a list")
        finish_reason = _string(obj, "finish_reason", where, "stop")
        if not finish_reason:
            raise ValueError(f"{where}: 'finish_reason' must not be empty")
        return cls(
            text=_string(obj, "text", where, ""),
            thinking=_string(obj, "thinking", where, ""),
            redacted_thinking=_string(obj, "redacted_thinking", where, ""),
            usage=usage,
            errors=_parse_errors(obj.get("error"), where),
            delay_s=_seconds(obj, "delay_s", where),
            chunk_delay_s=_seconds(obj, "chunk_delay_s", where),
            chunk_size=_count(obj, "chunk_size", where, DEFAULT_CHUNK_SIZE),
            repeat=_count(obj, "repeat", where, 1),
            truncate=_flag(obj, "truncate", where),
            hang=_flag(obj, "hang", where),
            empty_stream=_flag(obj, "empty_stream", where),
            batch_expired=_flag(obj, "batch_expired", where),
            finish_reason=finish_reason,
            tool_calls=tuple(_parse_tool_call(c, where, i) for i, c in enumerate(tool_calls)),
        )


def _json_object(value: object) -> TypeGuard[JsonObject]:
    """Whether ``value`` is a JSON object (string keys, JSON values all the way down): what
    a reply's declared usage is served as."""
    return isinstance(value, dict) and all(
        isinstance(key, str) and _json_value(item) for key, item in value.items()
    )


def _json_value(value: object) -> bool:
    if value is None or isinstance(value, str | int | float):
        return True
    if isinstance(value, list):
        return all(_json_value(item) for item in value)
    return _json_object(value)


def _string(obj: Mapping[str, object], key: str, where: str, default: str) -> str:
    value = obj.get(key, default)
    if not isinstance(value, str):
        raise ValueError(f"{where}: {key!r} must be a string, got {type(value).__name__}")
    return value


def _seconds(obj: Mapping[str, object], key: str, where: str) -> float:
    value = obj.get(key, 0.0)
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise ValueError(f"{where}: {key!r} must be a number of seconds >= 0, got {value!r}")
    if not value <= MAX_SECONDS:  # NaN too
        raise ValueError(f"{where}: {key!r} must be at most {MAX_SECONDS:g} seconds, got {value!r}")
    return float(value)


def _count(obj: Mapping[str, object], key: str, where: str, default: int) -> int:
    value = obj.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{where}: {key!r} must be an integer >= 1, got {value!r}")
    return _at_most(value, key, where)


def _at_most(value: int, key: str, where: str) -> int:
    if value > MAX_COUNT:
        raise ValueError(f"{where}: {key!r} must be at most {MAX_COUNT}, got {value!r}")
    return value


def _flag(obj: Mapping[str, object], key: str, where: str) -> bool:
    value = obj.get(key, False)
    if not isinstance(value, bool):
        raise ValueError(f"{where}: {key!r} must be true or false, got {value!r}")
    return value


def _parse_errors(obj: object, where: str) -> tuple[ReplyError, ...]:
    """``error``: one table (answering every attempt of the turn, or its ``times``
    first), or a list of tables answering the turn's attempts in order (each for its
    ``times`` attempts, default 1) before the reply itself."""
    if obj is None:
        return ()
    if isinstance(obj, Sequence) and not isinstance(obj, str):
        if not obj:
            raise ValueError(f"{where}: 'error' must not be an empty list")
        return tuple(
            _parse_error(item, f"{where}: 'error'[{index}]", default_times=1)
            for index, item in enumerate(obj)
        )
    return (_parse_error(obj, f"{where}: 'error'", default_times=None),)


def _parse_error(obj: object, where: str, default_times: int | None) -> ReplyError:
    if not isinstance(obj, Mapping):
        raise ValueError(f"{where} must be a table with keys {', '.join(ERROR_KEYS)}")
    unknown = sorted(str(k) for k in obj if k not in ERROR_KEYS)
    if unknown:
        raise ValueError(
            f"{where}: unknown key(s) {', '.join(map(repr, unknown))}; "
            f"expected some of: {', '.join(ERROR_KEYS)}"
        )
    status = obj.get("status", 500)
    if isinstance(status, bool) or not isinstance(status, int) or not 400 <= status <= 599:
        raise ValueError(f"{where}: 'status' must be an HTTP error status 400-599, got {status!r}")
    retry_after = obj.get("retry_after")
    if retry_after is not None:
        retry_after = _seconds(obj, "retry_after", where)
    times = obj.get("times", default_times)
    if times is not None and (isinstance(times, bool) or not isinstance(times, int) or times < 1):
        raise ValueError(f"{where}: 'times' must be an integer >= 1, got {times!r}")
    if times is not None:
        _at_most(times, "times", where)
    return ReplyError(
        status=status,
        message=_string(obj, "message", where, "scripted error"),
        retry_after=retry_after,
        type=_string(obj, "type", where, ""),
        times=times,
    )


def parse_replies(obj: object, where: str) -> tuple[Reply, ...]:
    """A script: a non-empty list of replies. Raises ValueError naming ``where[index]``."""
    if isinstance(obj, str | Mapping) or not isinstance(obj, Sequence):
        raise ValueError(f"{where}: expected a list of replies, got {type(obj).__name__}")
    if not obj:
        raise ValueError(f"{where}: expected at least one reply, got an empty list")
    return tuple(Reply.parse(item, f"{where}[{index}]") for index, item in enumerate(obj))


def parse_scripts(obj: object, where: str) -> dict[str, tuple[Reply, ...]]:
    """A table of script key → list of replies. Raises ValueError naming the key."""
    if not isinstance(obj, Mapping):
        raise ValueError(f"{where}: expected a table of script key -> list of replies")
    return {str(key): parse_replies(value, f"{where}.{key}") for key, value in obj.items()}


@dataclass(frozen=True)
class ScriptFile:
    """A loaded script file: named scripts, and the script for requests naming none."""

    scripts: Mapping[str, tuple[Reply, ...]]
    default: tuple[Reply, ...] | None = None


def load_script_file(path: str | Path) -> ScriptFile:
    """Load a TOML or JSON script file (``[scripts]`` key → replies, optional ``default``).

    Raises ValueError with a one-line message naming the file, the key and the index.
    """
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ValueError(f"{path}: cannot read the script file ({exc.strerror})") from None
    try:
        if path.suffix.lower() == ".json":
            document = json.loads(raw)
        else:
            document = tomllib.loads(raw.decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        kind = "JSON" if path.suffix.lower() == ".json" else "TOML"
        detail = " ".join(str(exc).split())
        raise ValueError(f"{path}: not valid {kind}: {detail}") from None
    if not isinstance(document, Mapping):
        raise ValueError(f"{path}: expected a table with 'scripts' and/or 'default'")
    unknown = sorted(k for k in document if k not in ("scripts", "default"))
    if unknown:
        raise ValueError(
            f"{path}: unknown top-level key(s) {', '.join(map(repr, unknown))}; "
            "expected 'scripts' and/or 'default'"
        )
    if "scripts" not in document and "default" not in document:
        raise ValueError(f"{path}: no replies: add a [scripts] table or a default = [...] list")
    scripts = parse_scripts(document.get("scripts", {}), f"{path}: scripts")
    default = document.get("default")
    return ScriptFile(
        scripts=scripts,
        default=parse_replies(default, f"{path}: default") if default is not None else None,
    )
