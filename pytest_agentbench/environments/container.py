"""One container per rollout: started idle, commands executed in it, files in and out.

A container runs ``sleep infinity`` as PID 1 (the image's entrypoint is set aside) and
everything else through ``exec``. Stopping an engine's ``exec`` client leaves its
processes running inside the container, so every ``exec`` is marked (an environment
variable with an id of its own) and on its deadline every process carrying the mark is
killed *inside* the container; :meth:`Container.kill_processes` ends everything but PID 1.

Containers are removed by :meth:`Container.remove` (also on leaving a ``with`` block, so
on Ctrl-C too), by the process's exit for any still open, and otherwise by the reaper of
the next run (:func:`reap`, through the owner label).
"""

from __future__ import annotations

import atexit
import secrets
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath
from types import TracebackType

from pytest_agentbench.core.capture import OutputCapture
from pytest_agentbench.environments.container_files import ENGINE_TIMEOUT_S, ContainerFiles
from pytest_agentbench.environments.engine import Engine, last_lines
from pytest_agentbench.environments.execs import (
    DRAIN_STDIN,
    EXEC_MARK,
    KILL_MARKED,
    SAY_EXIT,
    ExecResult,
    LiveExec,
    RawExec,
    drain,
    feed,
    wait_for,
)
from pytest_agentbench.environments.limits import enforcement_notes, settle_script
from pytest_agentbench.environments.owners import (
    START_LABEL,
    labels_for,
    new_name,
    reap,
    remove_container,
)
from pytest_agentbench.environments.spec import ContainerSpec, Mount
from pytest_agentbench.errors import ContainerError

__all__ = [
    "Container",
    "ContainerSpec",
    "ExecResult",
    "LiveExec",
    "Mount",
    "new_name",
    "reap",
]


class Container(ContainerFiles):
    """A running container of one rollout. Build it with :meth:`start`; use it as a
    context manager (or call :meth:`remove`) so that it is removed."""

    def __init__(self, engine: Engine, spec: ContainerSpec, notes: tuple[str, ...] = ()) -> None:
        self.engine = engine
        self.spec = spec
        self.name = spec.name
        self.notes = notes
        self._removed = False
        self._start_token = secrets.token_hex(8)

    def __repr__(self) -> str:
        return f"Container({self.name!r}, engine={self.engine.name!r})"

    @classmethod
    def start(cls, engine: Engine, spec: ContainerSpec) -> Container:
        """Start ``spec``'s container idle (PID 1 ``sleep infinity``), labelled with the run
        and this process as owner. The workdir is made when the image lacks it (Podman
        refuses a missing one) and is every ``exec``'s default. What the engine could not
        enforce of the limits is in ``notes``. Raises ContainerError (leaving nothing)."""
        args = ["run", "-d", "--name", spec.name, "--entrypoint", "sleep"]
        container = cls(engine, spec)
        labels = {**labels_for(spec.run_id), START_LABEL: container._start_token}
        for key, value in labels.items():
            args += ["--label", f"{key}={value}"]
        args += ["--network", spec.network]
        if spec.cpus is not None:
            args += ["--cpus", f"{spec.cpus:g}"]
        if spec.memory_mb is not None:
            args += ["--memory", f"{spec.memory_mb}m"]
        for key, value in spec.env.items():
            args += ["--env", f"{key}={value}"]
        for mount in spec.mounts:
            if not PurePosixPath(mount.target).is_absolute():
                raise ContainerError(f"mount target {mount.target!r} is not an absolute path")
            option = f"{Path(mount.host).absolute()}:{mount.target}"
            if option.count(":") != 1:
                raise ContainerError(
                    f"cannot mount {mount.host} at {mount.target}: a ':' in a path"
                )
            args += ["--volume", option + (":ro" if mount.read_only else "")]
        args += [spec.image, "infinity"]
        _open.add(container)
        try:
            try:
                done = engine.run(args, timeout_s=ENGINE_TIMEOUT_S)
            except BaseException:
                # A name in use is another's container: remove only the one this start
                # made (a `run` can fail after creating it).
                if not container._ours():
                    container._removed = True
                    _open.discard(container)
                raise
            script = settle_script(spec)
            settled = b"", b""
            if script is not None:
                argv = ["exec", spec.name, "sh", "-c", script, "sh", spec.workdir or "/"]
                ran = engine.run(argv, timeout_s=ENGINE_TIMEOUT_S, check=False)
                if ran.returncode == 90:
                    raise ContainerError(
                        f"cannot make the workdir {spec.workdir} in container {spec.name}: "
                        f"{last_lines(ran.stderr)}"
                    )
                settled = ran.stdout, ran.stderr
            container.notes = enforcement_notes(engine, spec, done.stderr, *settled)
        except BaseException:
            container.remove()
            raise
        return container

    def _ours(self) -> bool:
        """Whether a container of this name exists and is the one this start made."""
        fmt = f'{{{{index .Config.Labels "{START_LABEL}"}}}}'
        try:
            shown = self.engine.run(
                ["inspect", "--format", fmt, self.name], check=False, timeout_s=ENGINE_TIMEOUT_S
            )
        except ContainerError:
            return False
        return shown.returncode == 0 and shown.stdout.decode().strip() == self._start_token

    def __enter__(self) -> Container:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.remove()

    def exec(
        self,
        argv: Sequence[str],
        *,
        timeout_s: float,
        user: str | None = None,
        env: Mapping[str, str] | None = None,
        workdir: str | None = None,
        stdin: bytes | None = None,
        output_cap: int = 1 << 20,
        stop: threading.Event | None = None,
    ) -> ExecResult:
        """Run ``argv`` in the container and wait for it, at most ``timeout_s``. On the
        deadline every process it started is killed inside the container (``exit_code``
        None, ``timed_out`` True); the same once ``stop`` is set (``stopped`` True: a loop
        kill). Raises ContainerError when the container is gone."""
        raw = self.exec_raw(
            argv,
            timeout_s=timeout_s,
            user=user,
            env=env,
            workdir=workdir,
            stdin=stdin,
            cap=output_cap,
            stop=stop,
        )
        return ExecResult(
            exit_code=raw.exit_code,
            stdout=raw.stdout.text(),
            stderr=raw.stderr.text(),
            timed_out=raw.timed_out,
            elapsed_s=raw.elapsed_s,
            truncated=raw.stdout.truncated or raw.stderr.truncated,
            stopped=raw.stopped,
        )

    def exec_raw(
        self,
        argv: Sequence[str],
        *,
        timeout_s: float,
        user: str | None = None,
        env: Mapping[str, str] | None = None,
        workdir: str | None = None,
        stdin: bytes | None = None,
        cap: int = 1 << 20,
        err_cap: int | None = None,
        stop: threading.Event | None = None,
    ) -> RawExec:
        """:meth:`exec` with the output as captured bytes: ``cap`` bytes of stdout,
        ``err_cap`` (default ``cap``) of stderr."""
        if not argv:
            raise ContainerError("exec needs a command")
        mark = secrets.token_hex(8)
        if stdin is not None:
            # Podman drops an exec's output when its command ends without reading all of
            # its stdin (a write that fails at once loses its error); so what is left of
            # stdin is read to its end after the command.
            argv = ["sh", "-c", DRAIN_STDIN, "sh", *argv]
        args = self._exec_args(argv, mark, stdin is not None, user, env, workdir)
        out, err = OutputCapture(cap), OutputCapture(err_cap or cap)
        started = time.monotonic()
        try:
            process = subprocess.Popen(
                args,
                stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
                env=self.engine.environ(),
            )
        except OSError as exc:
            raise ContainerError(f"cannot run {self.engine.argv[0]} exec: {exc}") from None
        threads = [
            threading.Thread(target=drain, args=(process.stdout, out), daemon=True),
            threading.Thread(target=drain, args=(process.stderr, err), daemon=True),
        ]
        if stdin is not None:
            threads.append(threading.Thread(target=feed, args=(process.stdin, stdin), daemon=True))
        for thread in threads:
            thread.start()
        timed_out = stopped = False
        try:
            code = wait_for(process, started + timeout_s, stop)
            if code is None:
                stopped = stop is not None and stop.is_set()
                timed_out = not stopped
                self.kill_marked(f"{EXEC_MARK}={mark}")
        except BaseException:
            self.kill_marked(f"{EXEC_MARK}={mark}")
            process.kill()
            raise
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
        for thread in threads:
            thread.join(timeout=10)
        elapsed = time.monotonic() - started
        if code is not None and code < 0:
            code = None
        if code in (125, 126, 127) and not timed_out:
            self._raise_if_gone(err)
        return RawExec(code, out, err, timed_out, elapsed, stopped)

    def _exec_args(
        self,
        argv: Sequence[str],
        mark: str,
        interactive: bool,
        user: str | None,
        env: Mapping[str, str] | None,
        workdir: str | None,
    ) -> list[str]:
        """The engine's command line of one marked ``exec`` of ``argv``."""
        args = [*self.engine.argv, "exec"]
        if interactive:
            args.append("-i")
        if user is not None:
            args += ["--user", user]
        workdir = workdir if workdir is not None else self.spec.workdir
        if workdir is not None:
            args += ["--workdir", workdir]
        for key, value in (env or {}).items():
            args += ["--env", f"{key}={value}"]
        return [*args, "--env", f"{EXEC_MARK}={mark}", self.name, *argv]

    def exec_live(
        self,
        argv: Sequence[str],
        *,
        timeout_s: float,
        env: Mapping[str, str] | None = None,
        workdir: str | None = None,
        user: str | None = None,
        err_cap: int = 1 << 16,
        runaway: int = 1 << 24,
    ) -> LiveExec:
        """Start ``argv`` in the container with open stdin and stdout (an ACP agent): it
        ends at ``timeout_s``, when its stderr passes ``runaway`` bytes, or when the caller
        ends it; either way every process it started is killed inside the container.
        Raises ContainerError when the engine's client cannot be started."""
        if not argv:
            raise ContainerError("exec needs a command")
        mark, token = secrets.token_hex(8), f"agentbench-exited-{secrets.token_hex(8)}"
        wrapped = ["sh", "-c", SAY_EXIT, "sh", token, *argv]
        args = self._exec_args(wrapped, mark, True, user, env, workdir)
        try:
            return LiveExec(
                args, environ=self.engine.environ(), mark=f"{EXEC_MARK}={mark}", token=token,
                kill_inside=self.kill_marked, timeout_s=timeout_s, err_cap=err_cap,
                runaway=runaway,
            )  # fmt: skip
        except OSError as exc:
            raise ContainerError(f"cannot run {self.engine.argv[0]} exec: {exc}") from None

    def _raise_if_gone(self, err: OutputCapture) -> None:
        state = self.engine.run(
            ["inspect", "--format", "{{.State.Running}}", self.name],
            check=False,
            timeout_s=ENGINE_TIMEOUT_S,
        )
        if state.returncode != 0 or state.stdout.strip() != b"true":
            raise ContainerError(
                f"container {self.name} is not running: {last_lines(err.text()) or 'gone'}"
            )

    def kill_marked(self, mark: str) -> None:
        """End every process carrying ``mark``, inside. When the mark cannot be hunted down
        (no ``sh`` in the image, a process forking without end), everything but PID 1 is
        ended; when even that fails, the container itself is killed (said in ``notes``):
        nothing may run on past its deadline."""
        try:
            done = self.engine.run(
                ["exec", self.name, "sh", "-c", KILL_MARKED, "sh", mark],
                timeout_s=ENGINE_TIMEOUT_S,
                check=False,
            )
            if done.returncode == 0:
                return
            self.kill_processes()
        except ContainerError as exc:
            self.notes = (
                *self.notes,
                f"a command past its deadline could not be ended alone ({exc}); "
                "the container was killed",
            )
            self.engine.run(["kill", self.name], check=False, timeout_s=ENGINE_TIMEOUT_S)

    def kill_processes(self) -> None:
        """Kill every process in the container but PID 1 (``kill -9 -1`` from inside spares
        only PID 1 and the caller). Raises ContainerError when the engine fails."""
        self._check(["sh", "-c", "kill -9 -1 2>/dev/null; exit 0"], "kill its processes")

    def remove(self) -> None:
        """Kill and remove the container; never raises for one already gone."""
        if self._removed:
            return
        remove_container(self.engine, self.name)
        self._removed = True
        _open.discard(self)


class _OpenContainers:
    """The containers this process started and has not removed: removed at its exit."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._containers: dict[int, Container] = {}
        atexit.register(self.remove_all)

    def add(self, container: Container) -> None:
        with self._lock:
            self._containers[id(container)] = container

    def discard(self, container: Container) -> None:
        with self._lock:
            self._containers.pop(id(container), None)

    def remove_all(self) -> None:
        with self._lock:
            left = list(self._containers.values())
        for container in left:
            try:
                container.remove()
            except ContainerError:
                continue


_open = _OpenContainers()
