"""Images: built once per content hash of their context, reused, or taken prebuilt.

An environment is either a folder holding a Dockerfile (its build context) or the name
of a prebuilt image. A context's image is tagged ``localhost/agentbench-env:<key>``, the
key hashing every file of the context (names, modes, bytes) and the image map entries
its ``FROM`` lines use, so the same folder is built once and reused by every later
rollout, run and xdist worker: a file lock under the cache folder makes concurrent
callers wait for one builder, then find its image.

The image map (``FROM`` name → local image) rewrites the base images a Dockerfile names,
and a prebuilt image's name, so an air-gapped machine builds every task from images it
has. The Dockerfile itself is never edited: the rewritten copy is handed to the build
with ``-f``.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import secrets
import signal
import stat
import subprocess
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

from pytest_agentbench.core.fastclass import dataclass
from pytest_agentbench.environments.engine import Engine, last_lines
from pytest_agentbench.errors import ContainerError, ImageBuildError

#: The repository every context's image is tagged in.
IMAGE_REPOSITORY = "localhost/agentbench-env"
#: The Dockerfile names looked for in a context, in order.
DOCKERFILES = ("Dockerfile", "Containerfile")
#: Lines of a build log quoted in an error.
LOG_TAIL_LINES = 20
#: How long a build's client may take to clean up after its step was killed.
STOP_GRACE_S = 15.0
#: How long a pull may take.
PULL_TIMEOUT_S = 600.0

_FROM = re.compile(r"^(\s*FROM\s+)((?:--\S+\s+)*)(\S+)(.*)$", re.IGNORECASE)
#: Words in a build log that say a base image could not be fetched.
_PULL_WORDS = (
    "error pulling image",
    "pull access denied",
    "failed to resolve",
    "initializing source",
    "manifest unknown",
    "repository does not exist",
    "failed to do request",
    "pinging container registry",
    "did not resolve to an alias",
)


@dataclass(frozen=True)
class ImageSource:
    """Where a rollout's image comes from: ``context`` a folder holding a Dockerfile, or
    ``image`` a prebuilt image's name (used when ``context`` is None)."""

    context: Path | None
    image: str | None
    build_timeout_s: float = 600.0


def content_hash(context: Path) -> str:
    """A stable digest of every entry under ``context``: each one's relative path, its
    type and permission bits, and its bytes (a symlink: its target, never followed). Walk
    order, timestamps and owners do not matter."""
    digest = hashlib.sha256()
    root = Path(context)
    entries: list[str] = []
    for directory, subdirs, names in os.walk(root):
        subdirs.sort()
        for name in sorted(names + [d for d in subdirs if (Path(directory) / d).is_symlink()]):
            entries.append(os.path.relpath(os.path.join(directory, name), root))
        for name in subdirs:
            if not (Path(directory) / name).is_symlink():
                entries.append(os.path.relpath(os.path.join(directory, name), root) + "/")
    for relative in sorted(entries):
        path = root / relative
        info = path.lstat()
        digest.update(
            f"{relative}\0{stat.S_IFMT(info.st_mode):o}\0{stat.S_IMODE(info.st_mode):o}\0".encode()
        )
        if stat.S_ISLNK(info.st_mode):
            digest.update(os.readlink(path).encode("utf-8", errors="surrogateescape"))
        elif stat.S_ISREG(info.st_mode):
            with open(path, "rb") as file:
                while chunk := file.read(1 << 20):
                    digest.update(chunk)
        digest.update(b"\0\0")
    return digest.hexdigest()


def dockerfile_of(context: Path) -> Path:
    """The Dockerfile of ``context``; ImageBuildError (step ``build``) when it has none."""
    for name in DOCKERFILES:
        if (context / name).is_file():
            return context / name
    raise ImageBuildError(
        f"{context}: no Dockerfile (looked for {', '.join(DOCKERFILES)})", step="build"
    )


def map_from_lines(dockerfile: str, image_map: Mapping[str, str]) -> tuple[str, dict[str, str]]:
    """``dockerfile`` with every ``FROM`` image named in ``image_map`` rewritten, and the
    entries used. A ``FROM`` naming an earlier stage (``AS name``) is left alone."""
    stages: set[str] = set()
    used: dict[str, str] = {}
    lines: list[str] = []
    for line in dockerfile.splitlines(keepends=True):
        match = _FROM.match(line.rstrip("\r\n"))
        if match is not None:
            head, flags, image, rest = match.groups()
            alias = re.search(r"\bAS\s+(\S+)", rest, re.IGNORECASE)
            if image not in stages and image in image_map:
                used[image] = image_map[image]
                ending = line[len(line.rstrip("\r\n")) :]
                line = f"{head}{flags}{image_map[image]}{rest}{ending}"
            if alias is not None:
                stages.add(alias.group(1))
        lines.append(line)
    return "".join(lines), used


def image_tag(context: Path, image_map: Mapping[str, str]) -> str:
    """The tag ``context``'s image gets: its content hash and the map entries it uses."""
    text = dockerfile_of(context).read_text(encoding="utf-8", errors="replace")
    _, used = map_from_lines(text, image_map)
    digest = hashlib.sha256(content_hash(context).encode())
    for name in sorted(used):
        digest.update(f"\0{name}\0{used[name]}".encode())
    return f"{IMAGE_REPOSITORY}:{digest.hexdigest()[:32]}"


def image_exists(engine: Engine, image: str) -> bool:
    """Whether ``engine`` has ``image`` locally."""
    return engine.run(["image", "inspect", image], check=False, timeout_s=120).returncode == 0


def ensure_image(
    engine: Engine,
    source: ImageSource,
    *,
    image_map: Mapping[str, str],
    cache_dir: Path,
    log_path: Path,
) -> str:
    """The local image reference to run for ``source``: a context built once per tag
    (:func:`image_tag`), else the prebuilt image (mapped, pulled when absent). The build or
    pull log is written to ``log_path``. Raises ImageBuildError with the step, the log and
    its last lines; an image that cannot be pulled says how to map it to a local one."""
    log_path = Path(log_path)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    if source.context is None:
        if not source.image:
            raise ImageBuildError(
                "no environment: neither a build context nor an image", step="build"
            )
        return _prebuilt(engine, image_map.get(source.image, source.image), source.image, log_path)
    context = Path(source.context)
    if not context.is_dir():
        raise ImageBuildError(f"{context}: the environment folder does not exist", step="build")
    tag = image_tag(context, image_map)
    if image_exists(engine, tag):
        log_path.write_text(f"reused {tag} (built before from {context})\n", encoding="utf-8")
        return tag
    cache_dir = Path(cache_dir)
    cache_dir.mkdir(parents=True, exist_ok=True)
    with _BuildLock(cache_dir / f"build-{tag.rsplit(':', 1)[1]}.lock"):
        if image_exists(engine, tag):
            log_path.write_text(
                f"reused {tag} (built meanwhile from {context})\n", encoding="utf-8"
            )
            return tag
        _build(engine, context, tag, image_map, source.build_timeout_s, cache_dir, log_path)
    return tag


class _BuildLock:
    """An exclusive ``flock`` on a file: one builder per tag across processes and threads
    (each holder opens the file itself, so threads of one process exclude each other too)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd = -1

    def __enter__(self) -> _BuildLock:
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc: object) -> None:
        fcntl.flock(self.fd, fcntl.LOCK_UN)
        os.close(self.fd)


def _build(
    engine: Engine,
    context: Path,
    tag: str,
    image_map: Mapping[str, str],
    timeout_s: float,
    cache_dir: Path,
    log_path: Path,
) -> None:
    dockerfile = dockerfile_of(context)
    text, used = map_from_lines(dockerfile.read_text(encoding="utf-8", errors="replace"), image_map)
    with tempfile.NamedTemporaryFile(
        "w", dir=cache_dir, prefix="Dockerfile.", delete=False, encoding="utf-8"
    ) as mapped:
        mapped.write(text)
    cgroup = f"agentbench-build-{secrets.token_hex(6)}"
    argv = [*engine.argv, "build", "-t", tag, "-f", mapped.name, "--label", "agentbench.env=1"]
    argv += ["--cgroup-parent", cgroup, str(context)]
    started = time.monotonic()
    try:
        with open(log_path, "wb") as log:
            log.write(f"$ {' '.join(argv)}\n".encode())
            for name, local in used.items():
                log.write(f"image map: FROM {name} -> {local}\n".encode())
            log.flush()
            process = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env=engine.environ(),
            )
            try:
                code = process.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                _stop_build(engine, process, cgroup)
                code = None
            except BaseException:
                _stop_build(engine, process, cgroup)
                raise
    except OSError as exc:
        raise ImageBuildError(
            f"{context}: cannot run the build: {exc}", step="build", log_path=log_path
        ) from None
    finally:
        os.unlink(mapped.name)
    tail = last_lines(log_path.read_bytes(), LOG_TAIL_LINES)
    if code is None:
        raise ImageBuildError(
            f"{context}: the image build ran past its {timeout_s:g} s build timeout (stopped); "
            f"log {log_path}, its last lines:\n{tail}",
            step="build timeout",
            log_path=log_path,
            log_tail=tail,
        )
    if code != 0:
        lowered = tail.lower()
        if any(word in lowered for word in _PULL_WORDS):
            bases = _from_images(text)
            raise ImageBuildError(
                f"{context}: a base image could not be pulled ({', '.join(bases) or 'FROM'}); "
                "on a machine without a registry, map each FROM name to a local image with "
                "the image map (NAME=LOCAL_IMAGE); "
                f"log {log_path}, its last lines:\n{tail}",
                step="pull",
                log_path=log_path,
                log_tail=tail,
            )
        raise ImageBuildError(
            f"{context}: the image build failed (exit {code}) after "
            f"{time.monotonic() - started:.1f} s; log {log_path}, its last lines:\n{tail}",
            step="build",
            log_path=log_path,
            log_tail=tail,
        )


def _stop_build(engine: Engine, process: subprocess.Popen[bytes], cgroup: str) -> None:
    """End a build past its deadline. Killing the engine's client leaves the step it runs
    (a ``RUN`` is a container of its own) and its working container behind; so the step's
    processes are killed first (found by the build's own cgroup parent, when the engine
    runs on this host), the client then fails the step and cleans up, and is killed only
    if it does not end by itself."""
    if engine.remote is None:
        for _ in range(10):
            if not _kill_cgroup(cgroup):
                break
            time.sleep(0.2)
        try:
            process.wait(timeout=STOP_GRACE_S)
            return
        except subprocess.TimeoutExpired:
            pass
    process.kill()
    process.wait()


def _kill_cgroup(marker: str) -> int:
    """Kill every process of this host whose cgroup path holds ``marker``; how many."""
    killed = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            groups = (entry / "cgroup").read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        if marker in groups:
            with contextlib.suppress(OSError):
                os.kill(int(entry.name), signal.SIGKILL)
                killed += 1
    return killed


def _from_images(dockerfile: str) -> list[str]:
    found: list[str] = []
    for line in dockerfile.splitlines():
        match = _FROM.match(line)
        if match is not None and match.group(3) not in found:
            found.append(match.group(3))
    return found


def _prebuilt(engine: Engine, image: str, asked: str, log_path: Path) -> str:
    if image_exists(engine, image):
        log_path.write_text(f"using the local image {image}\n", encoding="utf-8")
        return image
    try:
        done = engine.run(["pull", image], timeout_s=PULL_TIMEOUT_S, check=False)
        output = done.stdout + done.stderr
        code: int | None = done.returncode
    except ContainerError as exc:
        output, code = str(exc).encode(), None
    log_path.write_bytes(f"$ {engine.argv[0]} pull {image}\n".encode() + output)
    if code == 0:
        return image
    tail = last_lines(output, LOG_TAIL_LINES)
    mapped = "" if image == asked else f" (mapped from {asked})"
    raise ImageBuildError(
        f"the image {image}{mapped} is not on this machine and could not be pulled; build or "
        f"import it locally, or map {asked} to a local image with the image map "
        f"({asked}=LOCAL_IMAGE); log {log_path}, its last lines:\n{tail}",
        step="pull",
        log_path=log_path,
        log_tail=tail,
    )
