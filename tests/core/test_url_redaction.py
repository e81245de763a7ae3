"""Credentials in a base URL (``user:password@``) are secrets like API keys: no artifact of
the run and no line of the terminal shows them, on success or on error."""

from __future__ import annotations

import base64
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_agentbench.core.urls import public_url, url_secrets
from pytest_agentbench.scripted import ScriptedServer

SUITE = """
[suite]
name = "cred"
verifier = { kind = "number" }
repairs = 1

[[task]]
id = "ok"
input = "2 + 2?"
target = 4
scripted = ["4"]

[[task]]
id = "repaired"
input = "3 + 4?"
target = 7
scripted = ["8", "7"]

[[task]]
id = "broken"
input = "1 + 1?"
target = 2
scripted = [{ error = { status = 400, message = "bad request" } }]
"""

SECRETS = (
    "s3cret-pw",
    "tok3n-user",
    # as a Basic Authorization header would carry them
    base64.b64encode(b"tok3n-user:s3cret-pw").decode(),
    base64.b64encode(b"user:s3cret-pw").decode(),
    base64.b64encode(b"tok3n-user:").decode(),
)


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as running:
        yield running


def _leaks(root: Path, text: str) -> list[str]:
    found = [f"terminal: {s}" for s in SECRETS if s in text]
    for path in sorted(root.rglob("*")):
        if path.is_file():
            data = path.read_bytes()
            found += [f"{path.relative_to(root)}: {s}" for s in SECRETS if s.encode() in data]
    return found


@pytest.mark.parametrize(
    "userinfo", ["tok3n-user:s3cret-pw", "tok3n-user", "user:s3cret-pw"], ids=str
)
@pytest.mark.parametrize("model", ["scripted", "openai-compat/unknown-script"])
def test_url_credentials_are_written_nowhere(
    pytester: pytest.Pytester, server: ScriptedServer, model: str, userinfo: str
) -> None:
    port = server.url.split("//", 1)[1].split("/", 1)[0]
    url = f"http://{userinfo}@{port}/v1"
    pytester.makefile(".toml", bench_cred=SUITE)
    result = pytester.runpytest(
        "--agentbench",
        "--agentbench-model",
        model,
        "--agentbench-base-url",
        url,
        "--agentbench-markdown",
        "summary.md",
        "-p",
        "no:cacheprovider",
        "-v",
    )
    text = result.stdout.str() + result.stderr.str()
    assert "agentbench" in text
    assert (pytester.path / "agentbench-results").is_dir()
    assert _leaks(pytester.path, text) == []


def test_url_credentials_are_kept_out_of_connection_errors(pytester: pytest.Pytester) -> None:
    """Nothing listens: the connection errors name the endpoint without its credentials."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    pytester.makefile(".toml", bench_cred=SUITE)
    result = pytester.runpytest(
        "--agentbench",
        "--agentbench-model",
        "openai-compat/m",
        "--agentbench-base-url",
        f"http://tok3n-user:s3cret-pw@127.0.0.1:{port}/v1",
        "--agentbench-max-retries",
        "0",
        "-p",
        "no:cacheprovider",
    )
    text = result.stdout.str() + result.stderr.str()
    assert f"127.0.0.1:{port}" in text, "the endpoint is still named"
    assert _leaks(pytester.path, text) == []


@pytest.mark.parametrize(
    ("url", "public", "secrets"),
    [
        ("http://u:p%40ss-word@h:1/v1", "http://h:1/v1", ("p%40ss-word", "p@ss-word")),
        ("https://tok3n@h/v1", "https://h/v1", ("tok3n",)),
        ("http://h:1/v1", "http://h:1/v1", ()),
        ("not a url", "not a url", ()),
    ],
)
def test_public_url_and_url_secrets(url: str, public: str, secrets: tuple[str, ...]) -> None:
    assert public_url(url) == public
    assert url_secrets(url) == secrets
