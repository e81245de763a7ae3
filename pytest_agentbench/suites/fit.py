"""Whether a task's verifier can judge it at all, asked once per task at collection.

A verifier may define ``check_task(task)`` (see ``verifiers.base.Verifier``); each
ConfigProblem it yields names a place (``("options", name)``, ``("target",)``,
``("choices",)`` or ``()``), which is turned here into the JSON path where the user
wrote the fault: the task's own key, else the verifier table that set the option (the
task's own, else the suite's). Nothing here raises for a verifier's mistake: a check
that crashes is itself reported as a problem, a bug of the plugin that provides it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Protocol

from pytest_agentbench.core.jsontypes import JsonValue
from pytest_agentbench.errors import VerifierError
from pytest_agentbench.suites.task import Task
from pytest_agentbench.suites.validate import Parts, json_path, show


class VerifierKind(Protocol):
    """What loading asks of a verifier family: the JSON Schema of its options (and, when
    it has one, ``check_task``, read by ``fit_problems``). ``verifiers.base.Verifier`` is
    one; loading sits below the verifiers and never imports them."""

    @property
    def options_schema(self) -> Mapping[str, JsonValue]:
        """The JSON Schema of the options a suite may give."""


def fit_problems(verifier: object, task: Task) -> list[tuple[Parts, str]]:
    """The problems ``verifier.check_task`` finds in ``task``, as (place, text); none
    when the verifier defines no check."""
    check = getattr(verifier, "check_task", None)
    if check is None:
        return []
    try:
        return [(tuple(problem.at), str(problem.text)) for problem in check(task)]
    except VerifierError as exc:
        return [((), f"cannot be used: {exc}")]
    except Exception as exc:
        reason = show(f"{type(exc).__name__}: {exc}", 200)
        kind = show(task.verifier.kind)
        return [
            (
                (),
                f"could not be checked: the {kind} verifier's check_task raised {reason}; "
                "this is a bug in the plugin that provides it",
            )
        ]


def fit_path(
    at: Parts,
    own: Mapping[str, object],
    suite: Mapping[str, object],
    locate: Callable[[Parts], str],
) -> str:
    """Where a problem at ``at`` was written: ``locate`` turns a path inside the task
    into one in the file; ``own`` and ``suite`` are the task's and the suite's verifier
    tables (empty when unset)."""
    if at[:1] in (("target",), ("choices",)):
        return locate(at)
    option = at[1:2]
    if option and option[0] in own:
        return locate(("verifier", *option))
    if "kind" not in own and option and option[0] in suite:
        return json_path(("suite", "verifier", *option))
    if own:
        return locate(("verifier",))
    return "$.suite.verifier" if suite else ""
