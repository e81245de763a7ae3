"""One exception tree, so callers catch what they mean.

    AgentbenchError
     ├── SuiteError          a suite file is broken (file, task, JSON path, what was expected)
     ├── ModelError          talking to a model failed
     │    ├── ProviderError  the provider answered with an error status
     │    │    ├── RateLimited     429 / 529 and friends (retryable)
     │    │    └── ContextOverflow the conversation does not fit the model's context
     │    ├── TransportError the connection failed or the stream broke
 │    │    └── QueueTimeout    no reply began while queued behind earlier requests
     │    ├── CircuitOpen    not sent: the same permanent error kept coming back
     │    ├── BudgetExhausted not sent: it could pass the run's --agentbench-max-cost
     │    └── ModelTimeout   the request ran past its deadline
     ├── SandboxError        the sandbox could not run something
     ├── ContainerError      the container engine or a container did wrong (a harness error)
     │    ├── EngineUnavailable no engine, or it does not answer: .reason says what to do
     │    └── ImageBuildError   an image could not be built or pulled: .step, .log_path, .log_tail
     └── VerifierError       a verifier could not reach a verdict (bad config, crash)
          └── WorkerCrashed  not verified again: its verification killed an xdist worker

Every message is written for the person running the benchmark: it names the file, the
task or the endpoint, and what was expected. No message ever contains an API key.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

#: HTTP statuses that mean "slow down" (429, and Anthropic's 529 overloaded): a provider
#: answering with one raises RateLimited, any other error status ProviderError.
RATE_LIMIT_STATUSES = (429, 529)


class AgentbenchError(Exception):
    """Base of every error pytest-agentbench raises on purpose."""


class SuiteError(AgentbenchError):
    """A suite file cannot be loaded; ``problems`` lists every issue found in it."""

    def __init__(self, path: str, problems: list[str]) -> None:
        self.path = path
        self.problems = list(problems)
        lines = "\n".join(f"  - {p}" for p in self.problems)
        count = len(self.problems)
        noun = "problem" if count == 1 else "problems"
        super().__init__(f"{path}: invalid suite ({count} {noun})\n{lines}")


class ModelError(AgentbenchError):
    """A model request failed; ``endpoint`` is the URL (never with credentials), ``status``
    the HTTP status when the provider answered with one, ``detail`` the provider's own
    words from an HTTP error response ("" for any other error). Set by the clients as the error
    travels up: ``partial`` (what arrived before it, a Generation, or None),
    ``retry_after`` (seconds the server asked for, or None), ``retries`` (one entry per
    retried attempt), ``retry_note`` (why retrying stopped, as appended to the message,
    or ""), ``relayed`` (part of the reply was already handed on: never retried),
    ``waited_s`` (seconds the request waited in its server's queue before its own time
    began: not the model's time) and ``ask_unstreamed`` (a stream that ended without one
    event where the same request unstreamed may say why: the retrying client's next
    attempt is that request)."""

    def __init__(
        self, message: str, *, endpoint: str = "", status: int | None = None, detail: str = ""
    ) -> None:
        self.endpoint = endpoint
        self.status = status
        self.detail = detail
        self.partial: object = None
        self.retry_after: float | None = None
        self.retries: Sequence[Mapping[str, object]] = ()
        self.retry_note = ""
        self.relayed = False
        self.waited_s = 0.0
        self.ask_unstreamed = False
        super().__init__(message)


class ProviderError(ModelError):
    """The provider answered with an HTTP error status."""


class RateLimited(ProviderError):
    """The provider asked us to slow down (429, 529 overloaded)."""


class ContextOverflow(ProviderError):
    """The request does not fit the model's context window: llama.cpp's
    ``exceed_context_size_error``, OpenAI's ``context_length_exceeded``, Anthropic's
    "prompt is too long". Asking again cannot help (never retried, whatever the status;
    never counted by the circuit breaker, since each conversation overflows on its own).
    ``prompt_tokens``, ``completion_tokens`` (the output the request asked room for) and
    ``context_tokens`` are the server's counts, None when it gave none."""

    def __init__(
        self,
        message: str,
        *,
        endpoint: str = "",
        status: int | None = None,
        prompt_tokens: int | None = None,
        context_tokens: int | None = None,
        completion_tokens: int | None = None,
    ) -> None:
        self.prompt_tokens = prompt_tokens
        self.context_tokens = context_tokens
        self.completion_tokens = completion_tokens
        super().__init__(message, endpoint=endpoint, status=status)


class TransportError(ModelError):
    """The connection could not be made, or the stream broke mid-way."""


class QueueTimeout(TransportError):
    """No reply began while earlier requests to the same server were still in flight:
    the request waited in the server's queue past its bound (models/queue.py). Not the
    model's time, so never a model timeout; never retried (it would queue again)."""


class SandboxError(AgentbenchError):
    """The sandbox could not run a command."""


class ContainerError(AgentbenchError):
    """The container engine, or a container, did something wrong: a harness error, never
    the agent's failure. The message names the command and the engine's own last words."""


class EngineUnavailable(ContainerError):
    """No container engine is usable: none installed, or it does not answer. ``reason`` is
    what a user can do about it (what to install, what to set)."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


class ImageBuildError(ContainerError):
    """An image could not be made: ``step`` is ``"build"``, ``"pull"`` or ``"build
    timeout"``, ``log_path`` the build log kept (None when nothing was logged),
    ``log_tail`` its last lines."""

    def __init__(
        self, message: str, *, step: str, log_path: Path | None = None, log_tail: str = ""
    ) -> None:
        self.step = step
        self.log_path = log_path
        self.log_tail = log_tail
        super().__init__(message)


class VerifierError(AgentbenchError):
    """A verifier could not reach a verdict."""


class WorkerCrashed(VerifierError):
    """This task's verification killed an xdist worker before (session/workers.py); it is not
    verified again. The message is the whole reason, the same words the controller
    reports for the task that was verifying when its worker died."""


class ModelTimeout(ModelError):
    """A model request ran past its deadline (total, or no byte for too long)."""


class CircuitOpen(ModelError):
    """A request was not sent: the circuit breaker opened after identical permanent
    errors in a row (a bad key, an unknown model); the message names the first of them."""


class BudgetExhausted(ModelError):
    """A request was not sent: the run's spend plus the worst case of the requests in
    flight and of this one could pass ``--agentbench-max-cost``. Its task is reported as
    not run (reason budget), never as a failure."""


def unexpected_cause(exc: BaseException) -> str:
    """The whole cause of an exception nobody raised on purpose (a bug here, in a plugin,
    or in a library), on one line: its type and message, where it was raised, then each
    exception it was raised from or while handling, the same way. Never raises."""
    parts: list[str] = []
    seen: set[int] = set()
    current: BaseException | None = exc
    chained = False
    while current is not None and id(current) not in seen and len(parts) < 8:
        seen.add(id(current))
        text = " ".join(str(current).split()) or "(no message)"
        where = ""
        tb = current.__traceback__
        while tb is not None and tb.tb_next is not None:
            tb = tb.tb_next
        if tb is not None:
            code = tb.tb_frame.f_code
            where = f" (at {code.co_filename}:{tb.tb_lineno} in {code.co_name})"
        link = "" if not parts else ("; raised from " if chained else "; while handling ")
        parts.append(f"{link}{type(current).__name__}: {text}{where}")
        chained = current.__cause__ is not None
        current = current.__cause__ or (
            None if current.__suppress_context__ else current.__context__
        )
    return "".join(parts)
