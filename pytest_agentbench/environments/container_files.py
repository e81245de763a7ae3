"""Files in and out of a rollout's container: copies through the engine's ``cp`` (links
copied as links, never followed on the host) and reads and writes through ``exec``.

A mixin of :class:`~pytest_agentbench.environments.container.Container`, which provides
the engine, the name and the ``exec``.
"""

from __future__ import annotations

import tempfile
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath

from pytest_agentbench.environments.engine import Engine, last_lines
from pytest_agentbench.environments.execs import RawExec
from pytest_agentbench.errors import ContainerError

#: How long the engine may take for a housekeeping command (start, copy, kill, remove).
ENGINE_TIMEOUT_S = 120.0
#: How long file reads and writes through ``exec`` may take.
FILE_TIMEOUT_S = 120.0


class ContainerFiles:
    """Copies and file reads and writes of one container (named ``name`` on ``engine``)."""

    engine: Engine
    name: str

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
        """Run ``argv`` in the container (Container.exec_raw)."""
        raise NotImplementedError

    def copy_in(self, host: Path, target: str) -> None:
        """Copy the host file or folder ``host`` to ``target`` (absolute) in the container:
        afterwards ``target`` is that file, or holds that folder's contents."""
        host = Path(host)
        if not host.exists():
            raise ContainerError(f"cannot copy {host} into {self.name}: it does not exist")
        if host.is_dir():
            self._check(["mkdir", "-p", target], f"make {target}")
            source = f"{host.absolute()}/."
        else:
            self._check(
                ["mkdir", "-p", str(PurePosixPath(target).parent)], f"make {target}'s folder"
            )
            source = str(host.absolute())
        self.engine.run(["cp", source, f"{self.name}:{target}"], timeout_s=ENGINE_TIMEOUT_S)

    def copy_out(self, source: str, host: Path) -> None:
        """Copy ``source`` (a file or folder in the container) to ``host``, which must not
        exist yet (its parent is made). Symlinks are copied as links, never followed: the
        copy lands in a fresh folder first, then is moved into place."""
        host = Path(host)
        if host.exists() or host.is_symlink():
            raise ContainerError(f"cannot copy {source} out of {self.name}: {host} exists already")
        host.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=host.parent, prefix=".copy-") as landing:
            landed = Path(landing) / "copy"
            self.engine.run(
                ["cp", f"{self.name}:{source}", str(landed)], timeout_s=ENGINE_TIMEOUT_S
            )
            if not landed.exists() and not landed.is_symlink():
                raise ContainerError(f"copying {source} out of {self.name} produced nothing")
            landed.rename(host)

    def write_file(self, target: str, data: bytes) -> None:
        """Write ``data`` to ``target`` in the container, making its folders."""
        script = 'mkdir -p -- "$(dirname -- "$1")" && cat > "$1"'
        raw = self.exec_raw(
            ["sh", "-c", script, "sh", target], timeout_s=FILE_TIMEOUT_S, stdin=data
        )
        if raw.exit_code != 0:
            raise ContainerError(
                f"cannot write {target} in {self.name}: {last_lines(raw.stderr.text())}"
            )

    def read_file(self, source: str, limit: int) -> bytes:
        """The first ``limit`` bytes (at most) of the file ``source`` in the container."""
        script = (
            'if [ -d "$1" ]; then echo "$1: is a directory" >&2; exit 1; fi; head -c "$2" -- "$1"'
        )
        raw = self.exec_raw(
            ["sh", "-c", script, "sh", source, str(limit)],
            timeout_s=FILE_TIMEOUT_S,
            cap=limit + 1,
            err_cap=1 << 16,
        )
        if raw.exit_code != 0:
            raise ContainerError(
                f"cannot read {source} in {self.name}: {last_lines(raw.stderr.text())}"
            )
        return bytes(raw.stdout.head + raw.stdout.tail)[:limit]

    def _check(self, argv: Sequence[str], what: str) -> None:
        done = self.engine.run(["exec", self.name, *argv], timeout_s=ENGINE_TIMEOUT_S, check=False)
        if done.returncode != 0:
            raise ContainerError(
                f"cannot {what} in container {self.name}: "
                f"{last_lines(done.stderr) or f'exit {done.returncode}'}"
            )
