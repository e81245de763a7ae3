"""Keep the harness's secrets out of ``/proc/<harness pid>/environ``.

``/proc/<pid>/environ`` shows the environment block the process was *started* with (the
bytes between the kernel's ``env_start`` and ``env_end``), not ``os.environ``: deleting a
variable in Python does not hide it. Any process of the same user may read that file, so
code under test in the ``basic`` sandbox (no pid namespace) could read the API key there.

:func:`hide_secrets` overwrites, in place, the value of every credential-like variable
(:func:`secret_like`) in that start-up block with ``*``,
after re-setting each such variable with ``setenv``, which moves the live C environment's
entry to a fresh copy. So the harness, ``os.environ`` and every child the harness starts
with an inherited environment still see the real value; ``/proc/<pid>/environ`` shows
stars. :func:`guard_harness` also marks the process non-dumpable, so a process without
``CAP_SYS_PTRACE`` cannot read its ``environ`` or ``mem`` at all. Only this process is
covered: its ancestors (the shell that exported the key) are out of our reach, which is
why docs/sandbox.md states the guarantee per mode.
"""

from __future__ import annotations

import ctypes
import functools
import os
import re
from collections.abc import Iterable, Mapping

#: ``env_start`` and ``env_end`` are fields 50 and 51 of ``/proc/<pid>/stat`` (1-based);
#: counted here from field 3, the first after the parenthesised command name.
_ENV_START_FIELD = 50 - 3
_PR_SET_DUMPABLE = 4
_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH|COOKIE", re.I)
_PROXY_NAME = re.compile(r"(^|_)PROXY$", re.I)
_URL_USERINFO = re.compile(rb"[A-Za-z][A-Za-z0-9+.-]*://([^/@\s]+)@")


def secret_like(name: str) -> bool:
    """True for environment variable names that may carry credentials or proxy settings."""
    return bool(_SECRET_NAME.search(name) or _PROXY_NAME.search(name))


def _environ_span() -> tuple[int, int] | None:
    try:
        with open("/proc/self/stat", "rb") as stat:
            fields = stat.read().rpartition(b")")[2].split()
        start, end = int(fields[_ENV_START_FIELD]), int(fields[_ENV_START_FIELD + 1])
    except (OSError, IndexError, ValueError):
        return None
    return (start, end) if 0 < start < end else None


def _secret_span(name: str, value: bytes) -> tuple[int, int] | None:
    """The part of ``value`` to star out: all of it for a credential-like name, the
    ``user:password`` of a URL with credentials in any other variable (a base URL such
    as ``https://user:token@host/v1``); None when nothing (more) is to hide."""
    if secret_like(name):
        return (0, len(value)) if value.strip(b"*") else None
    match = _URL_USERINFO.search(value)
    if match is None or not match.group(1).strip(b"*:"):
        return None
    return match.span(1)


def hide_secrets() -> list[str]:
    """Star out credential-like values (and the credentials of URLs in any variable) in
    this process's start-up environment block (the one ``/proc/<pid>/environ`` shows)
    while keeping them set for the process and its children; returns the names hidden.
    Never raises: on a system without ``/proc`` or where the block cannot be written,
    nothing changes and the list is empty."""
    span = _environ_span()
    if span is None:
        return []
    start, end = span
    try:
        fd = os.open("/proc/self/mem", os.O_RDWR)
    except OSError:
        return []
    hidden: list[str] = []
    try:
        block = os.pread(fd, end - start, start)
        offset = 0
        for entry in block.split(b"\0"):
            name, sep, value = entry.partition(b"=")
            text_name = name.decode("utf-8", errors="replace")
            span_hidden = _secret_span(text_name, value) if sep else None
            if span_hidden is not None:
                live = os.environ.get(text_name)
                if live is not None:
                    os.putenv(text_name, live)  # the C environ now points at a heap copy
                first, last = span_hidden
                where = start + offset + len(name) + 1 + first
                os.pwrite(fd, b"*" * (last - first), where)
                hidden.append(text_name)
            offset += len(entry) + 1
    except OSError:
        return hidden
    finally:
        os.close(fd)
    return hidden


def _set_non_dumpable() -> bool:
    try:
        # the process's own symbols hold libc's on Linux: no ``ctypes.util.find_library``
        # (importing it and asking ldconfig cost ~13 ms of every run's start-up)
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def secret_items(environ: Mapping[str, str]) -> dict[str, str]:
    """The variables of ``environ`` that :func:`hide_secrets` would star out: credential-like
    names, and any variable holding a URL with credentials."""
    return {
        name: value
        for name, value in environ.items()
        if _secret_span(name, value.encode("utf-8", "surrogateescape")) is not None
    }


def withhold_from_children(names: Iterable[str]) -> None:
    """Drop ``names`` from the C environment only: ``os.environ`` (what this process's
    Python code reads) keeps them, but a child started without an explicit environment
    (``subprocess`` with ``env=None``, which execs with the C environment) is born without
    them, so they are never in its ``/proc/<pid>/environ``."""
    for name in names:
        os.unsetenv(name)


def give_back_to_children(names: Iterable[str]) -> None:
    """Undo :func:`withhold_from_children` for the names ``os.environ`` still holds."""
    for name in names:
        value = os.environ.get(name)
        if value is not None:
            os.putenv(name, value)


@functools.cache
def guard_harness() -> tuple[str, ...]:
    """Once per process, before the first sandboxed command: hide the secrets of the
    environment block and mark the process non-dumpable. Returns the names hidden."""
    hidden = tuple(hide_secrets())
    _set_non_dumpable()
    return hidden
