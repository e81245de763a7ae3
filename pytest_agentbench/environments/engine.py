"""The container engine: Podman or Docker, driven through its own command-line client.

The CLI is the one interface both engines share, local or remote: ``podman --remote``
reaches the service named by ``CONTAINER_HOST``, ``docker`` the daemon named by
``DOCKER_HOST``, so moving the containers to a bigger machine is an environment variable.
:func:`find_engine` picks the engine (the one asked for, else Podman when usable, else
Docker), checks that it answers (``info``) once per process, and otherwise raises
:class:`EngineUnavailable` with what to install or set.

Every engine command runs in a session of its own, so a Ctrl-C at the terminal reaches
pytest (which then removes its containers), never a half-done ``run`` or ``rm``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
from collections.abc import Sequence
from typing import Literal

from pytest_agentbench.core.fastclass import dataclass
from pytest_agentbench.errors import ContainerError, EngineUnavailable

#: How long ``info`` may take before the engine counts as not answering.
INFO_TIMEOUT_S = 60.0
#: Lines of an engine's stderr quoted in an error.
STDERR_LINES = 8

EngineName = Literal["podman", "docker"]

#: What to do when Podman refuses to run on a cgroup v1 host or without CAP_SYS_RESOURCE.
PODMAN_CONF_HINT = (
    "on a cgroup v1 host or in a container without CAP_SYS_RESOURCE, give Podman a "
    "containers.conf (/etc/containers/containers.conf, or CONTAINERS_CONF=FILE) holding "
    '[containers] default_ulimits = ["nofile=1024:1024", "nproc=1024:1024"] and '
    '[engine] runtime = "runc", cgroup_manager = "cgroupfs" (docs/environments.md)'
)


def last_lines(data: bytes | str, count: int = STDERR_LINES) -> str:
    """The last ``count`` non-empty lines of ``data``, decoded, joined by newlines."""
    text = data.decode("utf-8", errors="replace") if isinstance(data, bytes) else data
    lines = [line for line in text.splitlines() if line.strip()]
    return "\n".join(lines[-count:])


@dataclass(frozen=True)
class Engine:
    """One usable container engine. ``argv`` is the CLI prefix every command starts with
    (``("podman",)``, ``("podman", "--remote")``, ``("docker",)``); ``remote`` the
    ``CONTAINER_HOST`` / ``DOCKER_HOST`` address it talks to, or None when local."""

    name: EngineName
    argv: tuple[str, ...]
    remote: str | None

    def run(
        self,
        args: Sequence[str],
        *,
        timeout_s: float | None = None,
        input: bytes | None = None,
        check: bool = True,
    ) -> subprocess.CompletedProcess[bytes]:
        """Run one engine command to its end and return it (stdout and stderr as bytes).
        Raises ContainerError naming the command and the last lines of its stderr when
        ``check`` and it exits non-zero, when it runs past ``timeout_s`` (it is killed), or
        when the client cannot be started at all."""
        command = [*self.argv, *args]
        shown = " ".join(command[:8]) + (" …" if len(command) > 8 else "")
        try:
            done = subprocess.run(
                command,
                input=input,
                stdin=None if input is not None else subprocess.DEVNULL,
                capture_output=True,
                timeout=timeout_s,
                start_new_session=True,
                env=self.environ(),
            )
        except subprocess.TimeoutExpired as exc:
            raise ContainerError(
                f"`{shown}` did not finish within {timeout_s:g} s (killed); "
                f"its last words: {last_lines(exc.stderr or b'') or '(none)'}"
            ) from None
        except OSError as exc:
            raise ContainerError(f"cannot run `{shown}`: {exc.strerror or exc}") from None
        if check and done.returncode != 0:
            raise ContainerError(
                f"`{shown}` failed (exit {done.returncode}): "
                f"{last_lines(done.stderr) or last_lines(done.stdout) or '(no output)'}"
            )
        return done

    def environ(self) -> dict[str, str]:
        """The environment engine commands run with: ours, with the remote address this
        engine was found with (so a later change of the variable cannot move it)."""
        env = dict(os.environ)
        if self.remote is not None:
            env["CONTAINER_HOST" if self.name == "podman" else "DOCKER_HOST"] = self.remote
        return env


_found: dict[tuple[str | None, str | None, str | None], Engine | str] = {}
_found_lock = threading.Lock()


def find_engine(choice: str | None = None) -> Engine:
    """The engine to use: ``choice`` (``"podman"`` or ``"docker"``), or with None Podman
    when it answers, else Docker. ``CONTAINER_HOST`` makes Podman remote (``podman
    --remote``), ``DOCKER_HOST`` Docker. The answer (or the failure) is cached per
    process and per those variables. Raises EngineUnavailable with a reason a user can act
    on."""
    found = engine_or_reason(choice)
    if isinstance(found, str):
        raise EngineUnavailable(found)
    return found


def engine_or_reason(choice: str | None = None) -> Engine | str:
    """:func:`find_engine`'s engine, or the reason there is none (for a test's skip)."""
    if choice not in (None, "podman", "docker"):
        return f"unknown container engine {choice!r}: expected podman or docker"
    key = (choice, os.environ.get("CONTAINER_HOST"), os.environ.get("DOCKER_HOST"))
    with _found_lock:
        if key not in _found:
            _found[key] = _probe(choice, key[1], key[2])
        return _found[key]


def _probe(choice: str | None, container_host: str | None, docker_host: str | None) -> Engine | str:
    candidates: list[Engine] = []
    if choice in (None, "podman"):
        remote = container_host or None
        argv = ("podman", "--remote") if remote else ("podman",)
        candidates.append(Engine("podman", argv, remote))
    if choice in (None, "docker"):
        candidates.append(Engine("docker", ("docker",), docker_host or None))
    reasons: list[str] = []
    for engine in candidates:
        reason = _answers(engine)
        if reason is None:
            return engine
        reasons.append(reason)
    return "no usable container engine: " + "; ".join(reasons)


def _answers(engine: Engine) -> str | None:
    """None when ``engine`` answers ``info``, else why not and what to do."""
    if shutil.which(engine.argv[0]) is None:
        package = "podman (with runc)" if engine.name == "podman" else "docker"
        first = package.split()[0]
        return f"{engine.argv[0]} is not installed (install {package}: apt-get install {first})"
    where = f" at {engine.remote}" if engine.remote else ""
    try:
        engine.run(["info"], timeout_s=INFO_TIMEOUT_S)
    except ContainerError as exc:
        words = str(exc)
        hint = ""
        if engine.name == "podman" and ("cgroup" in words or "crun" in words or "ulimit" in words):
            hint = f"; {PODMAN_CONF_HINT}"
        elif engine.name == "podman" and engine.remote:
            hint = (
                "; start the service (podman system service --time=0 unix://PATH) "
                "or unset CONTAINER_HOST"
            )
        elif engine.name == "docker":
            hint = "; start the Docker daemon, or point DOCKER_HOST at one"
        return f"{engine.name}{where} does not answer `info`: {words}{hint}"
    return None
