"""What ``python_tests`` and ``python_checks`` share: a runner of ours in the sandbox that
reports through a file descriptor of an unlinked file, stamped with a nonce that arrives
on stdin (docs/sandbox.md has the threat model).

Here: starting the runner (``inner_pytest.py`` or ``inner_checks.py``, each loaded alone by
its path) in a fork server's child or a fresh sandboxed Python, reading its report and
trusting it only when stamped, the words for how the run ended, marking the cases of a run
that proves nothing, and the CTRF report written as ``verifier/ctrf.json``.
"""

from __future__ import annotations

import hmac
import io
import json
import marshal
import secrets
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, Literal, get_args

from pytest_agentbench.core.fastclass import dataclass
from pytest_agentbench.core.jsontypes import JsonObject, JsonValue
from pytest_agentbench.core.records import CTRF_STATUSES
from pytest_agentbench.sandbox import CommandResult, Workspace
from pytest_agentbench.verifiers.base import Check
from pytest_agentbench.verifiers.sandboxed import (
    REPORT_LIMIT,
    forkable_files,
    limits_from,
    run_forked,
    run_sandboxed,
)

STATUSES = CTRF_STATUSES
#: The ``scoring`` option of both verifiers: ``fraction`` (passed / total) or ``all``
#: (1 only when every test or case passes).
Scoring = Literal["fraction", "all"]
SCORINGS: tuple[Scoring, ...] = get_args(Scoring)
#: The ``module`` option of both verifiers (merged into their options schemas).
MODULE_OPTION: JsonObject = {
    "type": "string",
    "pattern": "^[A-Za-z_][A-Za-z0-9_]*$",
    "default": "solution",
    "description": "The module name the answer's code is saved as.",
}
# A fresh run is ``python -I [-S] -B -c BOOTSTRAP``: it reads its orders from the first line
# of stdin (then stdin is /dev/null), marshalled, in hex, loads the runner by path and calls
# its ``main(orders, nonce, fd)`` as a fork server's child does; the nonce and the
# descriptor go straight into the runner, never into a global of ``__main__``. Only
# ``marshal`` and ``importlib.machinery``: ``json`` and ``importlib.util`` would import
# ``re`` and ``contextlib``, which cost a fresh ``python_checks`` run more than its checks.
BOOTSTRAP = """\
import marshal, os, sys
from importlib.machinery import SourceFileLoader
orders = marshal.loads(bytes.fromhex(sys.stdin.readline()))
null = os.open(os.devnull, os.O_RDONLY)
os.dup2(null, 0)
os.close(null)
runner = type(sys)(orders["runner_module"])
runner.__file__ = orders.pop("runner")
runner.__loader__ = SourceFileLoader(runner.__name__, runner.__file__)
sys.modules[runner.__name__] = runner
runner.__loader__.exec_module(runner)
del null
runner.main(orders, orders.pop("nonce"), orders.pop("fd"))
"""


@dataclass(frozen=True, slots=True)
class InnerReport:
    """A trusted report of an inner run (stamped with the run's nonce): its ``tests``
    (the objects among them), the runner's ``stamp`` (``results.extra[key]``), and the
    ``summary`` and ``tool`` objects of its ``results`` (empty when it has none)."""

    tests: list[JsonObject]
    stamp: JsonObject
    summary: JsonObject
    tool: JsonObject


def _member(value: JsonValue, key: str) -> JsonValue:
    """``value[key]`` of a JSON object; KeyError when there is none, TypeError when
    ``value`` is no object."""
    if not isinstance(value, dict):
        raise TypeError(f"{type(value).__name__} has no member {key!r}")
    return value[key]


def _object(value: JsonValue) -> JsonObject:
    return value if isinstance(value, dict) else {}


def read_report(channel: IO[bytes], nonce: str, key: str) -> tuple[InnerReport | None, str]:
    """The inner run's report when its ``extra[key]`` carries ``nonce``; else None and why."""
    channel.seek(0)
    raw = channel.read(REPORT_LIMIT + 1)
    if not raw:
        return None, "the test run ended before reporting any result"
    if len(raw) > REPORT_LIMIT:
        return None, "the test report is too large to trust"
    try:
        report: JsonValue = json.loads(raw)
        results = _member(report, "results")
        stamp = _member(_member(results, "extra"), key)
        tests = _member(results, "tests")
        stamped = _member(stamp, "nonce")
        signed = isinstance(stamped, str) and hmac.compare_digest(stamped, nonce)
    except (ValueError, KeyError, TypeError):
        return None, "the test report is not readable"
    if not signed or not isinstance(tests, list):
        return None, "the test report does not come from our test run"
    assert isinstance(results, dict) and isinstance(stamp, dict)  # members were read
    found = [test for test in tests if isinstance(test, dict)]
    summary, tool = _object(results.get("summary")), _object(results.get("tool"))
    return InnerReport(found, stamp, summary, tool), ""


def run_inner(
    workspace: Workspace,
    check: Check,
    runner: Path,
    orders: Mapping[str, JsonValue],
    *,
    key: str,
    flags: Sequence[str] = ("-I", "-B"),
    env: Mapping[str, str] | None = None,
    fresh_orders: Callable[[], JsonObject] | None = None,
) -> tuple[CommandResult, InnerReport | None, str]:
    """Run ``runner``'s ``main(orders, nonce, fd)``; the result, the trusted report (or None)
    and why not. ``orders["solution"]`` is relative to the workspace; the runner gets it
    joined to ``orders["workspace"]``, its workspace's path. Where the fork server may take
    the run (``sandboxed.forkable_files``), a child of the server does; else a fresh
    sandboxed ``python`` with ``flags``, its orders joined by ``fresh_orders()`` (work the
    harness does for it, such as compiling what a fork server's child compiles itself)."""
    nonce = secrets.token_hex(16)
    runner_module = str(orders["runner_module"])
    files = forkable_files(workspace, check)
    if files is not None:
        result, raw = run_forked(workspace, files, runner, runner_module, orders, nonce, check)
        report, problem = read_report(io.BytesIO(raw), nonce, key)
        return result, report, problem
    with tempfile.TemporaryFile() as channel:
        fresh: JsonObject = {
            **orders,
            **(fresh_orders() if fresh_orders is not None else {}),
            "runner": str(runner),
            "nonce": nonce,
            "fd": channel.fileno(),
            "workspace": str(workspace.path),
            "solution": str(workspace.path / str(orders["solution"])),
        }
        result = run_sandboxed(
            workspace,
            [sys.executable, *flags, "-c", BOOTSTRAP],
            limits=limits_from(check.options),
            stdin=marshal.dumps(fresh).hex() + "\n",
            env=env,
            pass_fds=(channel.fileno(),),
        )
        report, problem = read_report(channel, nonce, key)
    return result, report, problem


def killed_verifier(result: CommandResult) -> str | None:
    """``signal 9`` when the verifier's own process (the sandbox shim that is the test
    run's parent) was killed from inside the sandbox; None otherwise. Such a run proves
    nothing: whatever it reported before the kill does not count."""
    killed_by = result.killed_by or ""
    return killed_by.removeprefix("parent ") if killed_by.startswith("parent signal") else None


def outcome_words(result: CommandResult) -> str:
    if result.killed_by == "timeout":
        return f"timed out after {result.elapsed_s:.1f}s"
    if result.killed_by:
        return f"stopped by {result.killed_by} after {result.elapsed_s:.1f}s"
    return f"exit status {result.exit_code}"


def exited_at_import(result: CommandResult, stamp: Mapping[str, JsonValue]) -> str | None:
    """Why nothing ran, when the run ended while the answer's module was being imported
    (the runner's last report says phase ``importing``): by itself, or stopped by a limit
    (a module that loops at import); else None."""
    if stamp.get("phase") != "importing":
        return None
    if result.killed_by:
        return f"the answer's module was still importing when the run {outcome_words(result)}"
    return f"the answer's module exited during import ({outcome_words(result)})"


def why_unreported(result: CommandResult, problem: str, run: str) -> str:
    """Why a case ``run`` (``the run``, ``the test run``) did not report has no result."""
    if result.killed_by == "timeout":
        return f"{run} {outcome_words(result)}"
    if problem:
        return f"{problem} ({outcome_words(result)})"
    return f"{run} ended early ({outcome_words(result)})"


def untrusted(
    result: CommandResult,
    stamp: Mapping[str, JsonValue],
    tests: list[JsonObject],
    shown: int | None = None,
) -> tuple[list[str], str | None, list[JsonObject]]:
    """(what the run tampered with, why the verifier was killed, the tests): when either is
    set the run proves nothing and every test fails, its message naming the tampered places
    (the first ``shown`` of them)."""
    listed = stamp.get("tampered", [])
    tampered = [str(t) for t in listed] if isinstance(listed, list) else []
    killed = killed_verifier(result) or (
        "its parent process died" if stamp.get("orphaned") else None
    )
    if tampered or killed:
        raw = "tampered" if tampered else "verifier_killed"
        message = (
            f"not trusted: the run changed {', '.join(tampered[:shown])}"
            if tampered
            else f"not judged: the verifier was killed ({killed})"
        )
        tests = [{**t, "status": "failed", "rawStatus": raw, "message": message} for t in tests]
    return tampered, killed, tests


def run_details(
    result: CommandResult, tampered: list[str], killed: str | None, containment: JsonValue
) -> JsonObject:
    """The verdict details every stamped run ends with."""
    return {
        "tampered": [*tampered],
        "verifier_killed": killed,
        "exit_code": result.exit_code,
        "killed_by": result.killed_by,
        "elapsed_s": round(result.elapsed_s, 3),
        "containment": containment,
    }


def ctrf_document(
    report: InnerReport | None,
    tests: list[JsonObject],
    tool: JsonObject,
    generated_by: str,
) -> JsonObject:
    """The CTRF report of ``tests``, timed as the inner ``report`` was (0 without one)."""
    counts: dict[str, int] = dict.fromkeys(STATUSES, 0)
    for test in tests:
        counts[str(test["status"])] += 1
    summary = report.summary if report is not None else {}
    start = summary.get("start")
    start = start if isinstance(start, int) else 0
    stop = summary.get("stop")
    stop = stop if isinstance(stop, int) else start
    return {
        "reportFormat": "CTRF",
        "specVersion": "0.0.0",
        "generatedBy": generated_by,
        "results": {
            "tool": tool,
            "summary": {"tests": len(tests), **counts, "start": start, "stop": max(start, stop)},
            "tests": [*tests],
        },
    }
