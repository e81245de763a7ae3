"""Images against the real engine: the content hash, one build per hash (also with
concurrent callers), the image map, and the failures a harness must name."""

from __future__ import annotations

import secrets
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from containers_support import BASE_IMAGE

from pytest_agentbench.environments.engine import Engine
from pytest_agentbench.environments.images import (
    IMAGE_REPOSITORY,
    ImageSource,
    content_hash,
    ensure_image,
    image_exists,
    image_tag,
    map_from_lines,
)
from pytest_agentbench.errors import ImageBuildError

MAP = {"debian:bookworm": BASE_IMAGE}


def _context(root: Path, dockerfile: str, **files: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "Dockerfile").write_text(dockerfile)
    for name, text in files.items():
        (root / name).write_text(text)
    return root


def test_content_hash_sees_names_modes_bytes_and_links(tmp_path: Path) -> None:
    first = _context(tmp_path / "a", "FROM x\n", **{"f.txt": "one"})
    base = content_hash(first)
    assert content_hash(first) == base
    assert content_hash(_context(tmp_path / "b", "FROM x\n", **{"f.txt": "one"})) == base
    (first / "f.txt").write_text("two")
    assert content_hash(first) != base
    (first / "f.txt").write_text("one")
    assert content_hash(first) == base
    (first / "f.txt").chmod(0o755)
    assert content_hash(first) != base
    (first / "f.txt").chmod(0o644)
    (first / "f.txt").rename(first / "g.txt")
    assert content_hash(first) != base
    (first / "g.txt").rename(first / "f.txt")
    (first / "link").symlink_to("/etc/passwd")
    linked = content_hash(first)
    assert linked != base
    (first / "link").unlink()
    (first / "link").symlink_to("/etc/hosts")
    assert content_hash(first) != linked
    (first / "link").unlink()
    (first / "empty").mkdir()
    assert content_hash(first) != base


def test_the_image_map_rewrites_from_lines_but_not_stages() -> None:
    text = (
        "FROM --platform=linux/amd64 debian:bookworm AS build\n"
        "RUN x\nFROM build\nFROM debian:bookworm\n"
    )
    mapped, used = map_from_lines(text, {**MAP, "build": "never"})
    assert mapped.splitlines() == [
        f"FROM --platform=linux/amd64 {BASE_IMAGE} AS build",
        "RUN x",
        "FROM build",
        f"FROM {BASE_IMAGE}",
    ]
    assert used == MAP


@pytest.fixture
def fresh_tag_cleanup(engine: Engine) -> Iterator[list[str]]:
    made: list[str] = []
    yield made
    for tag in made:
        engine.run(["rmi", "-f", tag], check=False)


def test_built_once_per_hash_even_with_concurrent_callers(
    engine: Engine, tmp_path: Path, fresh_tag_cleanup: list[str]
) -> None:
    """Three threads ask for the same new context at once: one builds (its log has the
    build's steps), the others wait for it and reuse the image; a later call reuses it."""
    token = secrets.token_hex(6)
    context = _context(
        tmp_path / "env",
        "FROM debian:bookworm\nCOPY token.txt /token.txt\n",
        **{"token.txt": token},
    )
    tag = image_tag(context, MAP)
    fresh_tag_cleanup.append(tag)
    assert tag.startswith(f"{IMAGE_REPOSITORY}:") and not image_exists(engine, tag)
    source = ImageSource(context=context, image=None)
    got: list[str] = []

    def build(index: int) -> None:
        got.append(
            ensure_image(
                engine,
                source,
                image_map=MAP,
                cache_dir=tmp_path / "cache",
                log_path=tmp_path / f"log{index}.txt",
            )
        )

    threads = [threading.Thread(target=build, args=(i,)) for i in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert got == [tag] * 3
    logs = [(tmp_path / f"log{i}.txt").read_text() for i in range(3)]
    assert sum("COPY token.txt" in log for log in logs) == 1, logs
    assert sum(log.startswith("reused") for log in logs) == 2
    assert f"FROM debian:bookworm -> {BASE_IMAGE}" in "".join(logs)
    out = engine.run(["run", "--rm", tag, "cat", "/token.txt"]).stdout.decode()
    assert out == token
    ensure_image(
        engine, source, image_map=MAP, cache_dir=tmp_path / "cache", log_path=tmp_path / "again.txt"
    )
    assert (tmp_path / "again.txt").read_text().startswith("reused")


def test_a_failing_build_names_the_step_and_the_log(engine: Engine, tmp_path: Path) -> None:
    context = _context(
        tmp_path / "env", "FROM debian:bookworm\nRUN echo broken-on-purpose && exit 7\n"
    )
    log = tmp_path / "build.log"
    with pytest.raises(ImageBuildError) as caught:
        ensure_image(
            engine, ImageSource(context, None), image_map=MAP, cache_dir=tmp_path, log_path=log
        )
    error = caught.value
    assert error.step == "build" and error.log_path == log
    assert "broken-on-purpose" in error.log_tail and "broken-on-purpose" in log.read_text()
    assert str(context) in str(error)


def test_an_unmapped_base_says_how_to_map_it(engine: Engine, tmp_path: Path) -> None:
    context = _context(tmp_path / "env", "FROM nosuchregistry.invalid/nothing:1\nRUN true\n")
    with pytest.raises(ImageBuildError) as caught:
        ensure_image(
            engine,
            ImageSource(context, None),
            image_map={},
            cache_dir=tmp_path,
            log_path=tmp_path / "log",
        )
    assert caught.value.step == "pull"
    assert "image map" in str(caught.value) and "nosuchregistry.invalid/nothing:1" in str(
        caught.value
    )


def test_a_build_past_its_timeout_is_killed_and_said(
    engine: Engine, tmp_path: Path, fresh_tag_cleanup: list[str]
) -> None:
    """The build is stopped at its deadline, and its step's processes and its working
    container go with it (the base gets a name of its own here, which the working
    container is named after, so a concurrent build cannot be mistaken for this one)."""
    token = secrets.token_hex(4)
    base = f"localhost/agentbench-timeout-{token}:1"
    engine.run(["tag", BASE_IMAGE, base])
    fresh_tag_cleanup.append(base)
    context = _context(tmp_path / "env", f"FROM {base}\nRUN echo {token} && sleep 60\n")
    fresh_tag_cleanup.append(image_tag(context, {}))
    source = ImageSource(context, None, build_timeout_s=3)
    with pytest.raises(ImageBuildError) as caught:
        ensure_image(engine, source, image_map={}, cache_dir=tmp_path, log_path=tmp_path / "log")
    assert caught.value.step == "build timeout" and "3 s" in str(caught.value)
    working = engine.run(["ps", "-a", "--external", "--format", "{{.Names}}"]).stdout.decode()
    assert f"agentbench-timeout-{token}" not in working
    assert f"echo {token} && sleep 60" not in _host_commands()


def _host_commands() -> str:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                found.append((entry / "cmdline").read_bytes().replace(b"\0", b" ").decode())
            except OSError:
                continue
    return "\n".join(found)


def test_a_prebuilt_image_is_mapped_or_its_pull_failure_said(
    engine: Engine, tmp_path: Path
) -> None:
    mapped = ensure_image(
        engine,
        ImageSource(None, "example/task-image:1"),
        image_map={"example/task-image:1": BASE_IMAGE},
        cache_dir=tmp_path,
        log_path=tmp_path / "a",
    )
    assert mapped == BASE_IMAGE
    with pytest.raises(ImageBuildError) as caught:
        ensure_image(
            engine,
            ImageSource(None, "nosuchregistry.invalid/x:1"),
            image_map={},
            cache_dir=tmp_path,
            log_path=tmp_path / "b",
        )
    assert caught.value.step == "pull" and "nosuchregistry.invalid/x:1=LOCAL_IMAGE" in str(
        caught.value
    )
    assert (tmp_path / "b").read_text().startswith("$ ")


def test_a_context_without_dockerfile_is_refused(engine: Engine, tmp_path: Path) -> None:
    (tmp_path / "env").mkdir()
    with pytest.raises(ImageBuildError, match="no Dockerfile"):
        ensure_image(
            engine,
            ImageSource(tmp_path / "env", None),
            image_map={},
            cache_dir=tmp_path,
            log_path=tmp_path / "log",
        )
