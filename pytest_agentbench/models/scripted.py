"""The ``scripted`` model: a protocol client pointed at the scripted provider.

Each request names its task's script and turn in headers (from the request's
``metadata``: the task key and the model call's number in the rollout), so replies do
not depend on the order requests arrive in (rollouts run concurrently, and under xdist
from several processes). ``register_scripts`` registers a suite's replies before its
tasks run (the run calls it for every client; it does nothing for any other client).
``scripted`` speaks Chat Completions; ``scripted/anthropic`` and
``scripted/openai-responses`` the others.

In the response cache's key (models/response_cache.py) a scripted request's endpoint is
``scripted:`` and the protocol's path, not the server's host and port (the offline
default starts its server on a new port each run), followed by a digest of the task's
registered script: the script and turn headers name the reply, the digest says what the
script held, so an edited suite is a miss, never a stale replay.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Protocol
from urllib.parse import quote, urlsplit

from pytest_agentbench.errors import ProviderError, SuiteError, TransportError
from pytest_agentbench.models.anthropic import AnthropicClient
from pytest_agentbench.models.base import (
    REQUEST_CALL,
    REQUEST_TASK,
    ModelClient,
    ModelRequest,
    ModelSpec,
)
from pytest_agentbench.models.openai_chat import OpenAIChatClient
from pytest_agentbench.models.openai_responses import OpenAIResponsesClient
from pytest_agentbench.models.wire import Response, Timeout, WireError
from pytest_agentbench.scripted.script import Reply

REGISTER_TIMEOUT_S = 30.0
_REGISTER_TIMEOUT = Timeout(
    connect=REGISTER_TIMEOUT_S,
    read=REGISTER_TIMEOUT_S,
    write=REGISTER_TIMEOUT_S,
    pool=REGISTER_TIMEOUT_S,
)
#: Kept as they are in the script header: printable ASCII except ``%`` and the space, so
#: a plain key reads the same on the wire and only ``%``, spaces, controls and non-ASCII
#: are encoded (a header value may not start or end with a space: a task id " x" or
#: "x " must reach the server as any other id does).
_HEADER_SAFE = "".join(chr(c) for c in range(0x21, 0x7F) if chr(c) != "%")


class ScriptedTask(Protocol):
    """What registering a task's script reads of it (a suite's Task): its script key, id
    and file for messages, and its scripted replies as the suite wrote them."""

    @property
    def key(self) -> str: ...

    @property
    def id(self) -> str: ...

    @property
    def path(self) -> object: ...

    @property
    def scripted(self) -> Sequence[object]: ...


class _ScriptBook:
    """What a scripted client adds to a protocol client: script headers and registration.
    Mixed in before the protocol client, whose connections (``_send``) and ``base_url``
    it uses."""

    _send: Callable[..., Response]
    base_url: str
    public_endpoint: str

    def _init_book(self) -> None:
        self.admin_url = self.base_url.removesuffix("/v1")
        self._registered: set[str] = set()
        #: each registered script's digest, by script key (shared with sibling clients)
        self.digests: dict[str, str] = {}
        self._book_lock = threading.Lock()

    def _key_endpoint(self, request: ModelRequest) -> str:
        """The response cache key's endpoint: the protocol's path and the digest of the
        request's script (module docstring), never the server's port."""
        script = request.metadata.get(REQUEST_TASK)
        digest = self.digests.get(script, "") if script is not None else ""
        return f"scripted:{urlsplit(self.public_endpoint).path}#{digest}"

    def request_headers(self, request: ModelRequest) -> dict[str, str]:
        """The script key percent-encoded (UTF-8; printable ASCII but ``%`` kept): a header
        value is ASCII on the wire, and a key holds the suite path and task id, which may
        be any Unicode. The server decodes it. The turn is the model call's number in the
        rollout (``REQUEST_CALL``), 0 when the request names none."""
        script_key = request.metadata.get(REQUEST_TASK)
        if script_key is None:
            return {}
        key = quote(script_key, safe=_HEADER_SAFE)
        turn = request.metadata.get(REQUEST_CALL, "0")
        return {"x-agentbench-script": key, "x-agentbench-turn": turn}

    def register(self, tasks: Iterable[ScriptedTask]) -> None:
        """Register the scripted replies of tasks not registered yet, in one POST.

        Raises SuiteError for a reply the server could not play (naming the suite file,
        task and index), ProviderError / TransportError when the server refuses or is down.
        """
        with self._book_lock:
            scripts: dict[str, list[object]] = {}
            for task in tasks:
                if task.key in self._registered or task.key in scripts or not task.scripted:
                    continue
                for index, reply in enumerate(task.scripted):
                    try:
                        Reply.parse(reply, f"task {task.id!r}: scripted[{index}]")
                    except ValueError as exc:
                        raise SuiteError(str(task.path), [str(exc)]) from None
                scripts[task.key] = list(task.scripted)
            if not scripts:
                return
            url = f"{self.admin_url}/_agentbench/scripts"
            body = json.dumps({"scripts": scripts}, ensure_ascii=False, separators=(",", ":"))
            try:
                response = self._send("POST", url, content=body.encode(), timeout=_REGISTER_TIMEOUT)
                try:
                    status, text = response.status_code, response.text
                finally:
                    response.close()
            except WireError as exc:
                raise TransportError(
                    f"scripted: cannot register scripts at {url}: {exc}", endpoint=url
                ) from exc
            if status != 200:
                raise ProviderError(
                    f"scripted: registering scripts at {url} failed with HTTP "
                    f"{status}: {text[:300]}",
                    endpoint=url,
                    status=status,
                )
            self._registered.update(scripts)
            for key, replies in scripts.items():
                blob = json.dumps(replies, sort_keys=True, ensure_ascii=False, default=str)
                self.digests[key] = hashlib.sha256(blob.encode()).hexdigest()[:16]


class ScriptedClient(_ScriptBook, OpenAIChatClient):
    """Chat Completions against the scripted server at ``base_url``
    (``http://127.0.0.1:PORT/v1``). Never sends an API key; ignores proxy settings."""

    def __init__(self, spec: ModelSpec, base_url: str) -> None:
        OpenAIChatClient.__init__(self, spec, base_url, None, trust_env=False)
        self._init_book()


class ScriptedResponsesClient(_ScriptBook, OpenAIResponsesClient):
    """The OpenAI Responses protocol against the scripted server."""

    def __init__(self, spec: ModelSpec, base_url: str) -> None:
        OpenAIResponsesClient.__init__(self, spec, base_url, None, trust_env=False)
        self._init_book()


class ScriptedAnthropicClient(_ScriptBook, AnthropicClient):
    """The Anthropic Messages protocol against the scripted server."""

    def __init__(self, spec: ModelSpec, base_url: str) -> None:
        AnthropicClient.__init__(self, spec, base_url, None, trust_env=False)
        self._init_book()


def scripted_client(spec: ModelSpec, base_url: str) -> ModelClient:
    """The scripted client speaking the protocol ``spec`` names (``scripted/<protocol>``)."""
    if spec.model == "anthropic":
        return ScriptedAnthropicClient(spec, base_url)
    if spec.model == "openai-responses":
        return ScriptedResponsesClient(spec, base_url)
    return ScriptedClient(spec, base_url)


def register_scripts(client: ModelClient, tasks: Iterable[ScriptedTask]) -> None:
    """Register the tasks' scripted replies when ``client`` is a scripted client (the bare
    client, not a retrying or limiting wrapper around it); any other client needs nothing
    before a task runs, so this does nothing for it."""
    if isinstance(client, _ScriptBook):
        client.register(tasks)
