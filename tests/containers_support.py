"""What the container tests share: the engine (or the reason to skip), the base image,
and the names and run ids that keep concurrent test runs apart.

The base image is made from Debian's packages by ``.ci/base-image`` (mmdebstrap, then
``podman import``); without it, or without an engine that answers, every container test
skips and says which.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator

import pytest

from pytest_agentbench.environments.engine import PODMAN_CONF_HINT, Engine, engine_or_reason
from pytest_agentbench.environments.images import image_exists

#: The image the container tests run: Debian bookworm minbase with python3.
BASE_IMAGE = os.environ.get("AGENTBENCH_TEST_BASE_IMAGE", "localhost/agentbench-base:bookworm")


def usable_engine(choice: str | None = None) -> Engine:
    """The engine, or a skip saying why there is none or why the base image is missing."""
    found = engine_or_reason(choice)
    if isinstance(found, str):
        pytest.skip(f"no container engine: {found}")
    if not image_exists(found, BASE_IMAGE):
        pytest.skip(
            f"the base image {BASE_IMAGE} is missing: build it with `bash .ci/base-image` "
            "(mmdebstrap from Debian's packages, then podman import)"
        )
    if not _runs(found):
        pytest.skip(
            f"{found.name} answers but cannot run {BASE_IMAGE}: {_run_failures[found]}"
            + (f"; {PODMAN_CONF_HINT}" if found.name == "podman" else "")
        )
    return found


_run_failures: dict[Engine, str] = {}


def _runs(engine: Engine) -> bool:
    """Whether ``engine`` runs a container of the base image (once per process)."""
    if engine not in _run_failures:
        done = engine.run(["run", "--rm", BASE_IMAGE, "true"], check=False, timeout_s=120)
        _run_failures[engine] = (
            done.stderr.decode(errors="replace").strip()[-500:] if done.returncode else ""
        )
    return not _run_failures[engine]


def fresh_run_id() -> str:
    """A run id of its own for one test: what it starts is told apart from the rest."""
    return f"t{secrets.token_hex(4)}"


def left_by(engine: Engine, run_id: str) -> list[str]:
    """The names of the containers still labelled with ``run_id``."""
    done = engine.run(
        ["ps", "-a", "--filter", f"label=agentbench.run_id={run_id}", "--format", "{{.Names}}"]
    )
    return done.stdout.decode().split()


def nothing_left(engine: Engine, run_id: str) -> Iterator[None]:
    """A fixture body: after the test, no container of ``run_id`` may be left (any that is
    is removed, and the test fails)."""
    yield
    left = left_by(engine, run_id)
    if left:
        engine.run(["rm", "-f", *left], check=False)
        pytest.fail(f"containers left behind: {left}")
