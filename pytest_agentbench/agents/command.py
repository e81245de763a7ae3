"""The ``command`` agent: a program we did not write, run with the task's prompt in the
task's workspace, reaching its model through the run's gateway.

Each attempt runs the command line once (a repair round runs ``resume_argv`` with the
verifier's feedback as the prompt, continuing the agent's own session). The agent gets
its task's gateway endpoint in the environment variables the common SDKs and CLIs read
(``AgentEndpoint.environment``), never the real key. It runs in the task's sandbox
(``auto`` / ``basic``: sharing the host's network, which the containment record says;
``strict``: a network namespace whose only way out is the gateway, through
agents/netbridge.py). Its attempt ends when it exits, when the task's deadline passes, or
when the gateway stops its route (a loop, the circuit breaker): its whole process group
is killed then.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import field
from pathlib import Path

from pytest_agentbench.agents.external import (
    ExternalSession,
    ProcessOptions,
    fill_template,
    final_text,
    last_line,
    open_workspace,
    record_failure,
    stopped_by_route,
    timed_out,
)
from pytest_agentbench.agents.gateway import Gateway
from pytest_agentbench.agents.route import ClientFor, Route
from pytest_agentbench.core.fastclass import dataclass
from pytest_agentbench.core.jsontypes import JsonObject, JsonValue
from pytest_agentbench.core.stream import EventSink
from pytest_agentbench.errors import AgentbenchError, SandboxError
from pytest_agentbench.models.usage import (
    normalise_anthropic_usage,
    normalise_chat_usage,
    normalise_responses_usage,
)
from pytest_agentbench.runner.agent_run import AgentRun
from pytest_agentbench.runner.loopguard import KillPolicy
from pytest_agentbench.sandbox import CommandResult, Workspace
from pytest_agentbench.suites.task import Task


@dataclass(frozen=True)
class CommandOptions:
    """A ``command`` agent's options (suite ``agent`` table, checked by the suite schema)."""

    argv: tuple[str, ...]
    resume_argv: tuple[str, ...] | None = None
    prompt: str = "argv"
    final_message: str = "gateway"
    process: ProcessOptions = field(default_factory=ProcessOptions)

    @classmethod
    def parse(cls, options: Mapping[str, JsonValue]) -> CommandOptions:
        def strings(value: JsonValue) -> tuple[str, ...]:
            return tuple(str(v) for v in value) if isinstance(value, list) else ()

        argv = strings(options.get("argv"))
        if not argv:
            raise AgentbenchError("a command agent needs argv, a non-empty list of strings")
        resume = options.get("resume_argv")
        prompt = options.get("prompt")
        if not isinstance(prompt, str):
            prompt = "argv" if any("{prompt}" in arg for arg in argv) else "stdin"
        return cls(
            argv=argv,
            resume_argv=strings(resume) or None if resume is not None else None,
            prompt=prompt,
            final_message=str(options.get("final_message") or "gateway"),
            process=ProcessOptions.parse(options),
        )


def reported_usage(stdout: str) -> JsonObject | None:
    """The usage an agent reports of itself in its output: the last JSON object line of
    stdout (or the whole of it) holding a ``usage`` object (Claude Code's
    ``--output-format json``, and agents like it), with ``total_cost_usd`` when given."""
    candidates = [stdout.strip()] + [line.strip() for line in reversed(stdout.splitlines())]
    for text in candidates:
        if not (text.startswith("{") and text.endswith("}")):
            continue
        try:
            data = json.loads(text)
        except ValueError:
            continue
        if isinstance(data, dict) and isinstance(data.get("usage"), dict):
            found: JsonObject = {"usage": data["usage"]}
            cost = data.get("total_cost_usd", data.get("cost_usd"))
            if isinstance(cost, int | float):
                found["cost_usd"] = cost
            return found
    return None


def usage_disagreement(
    reported: Mapping[str, JsonValue], counted: Sequence[Mapping[str, JsonValue]]
) -> JsonObject | None:
    """Where the agent's own count differs from the gateway's: input (cache included) and
    output tokens, each side normalised with its provider's arithmetic (the shape says
    which); None when they agree or either side does not know."""
    if "prompt_tokens" in reported:
        own = normalise_chat_usage(reported)
    elif "input_tokens_details" in reported or "output_tokens_details" in reported:
        own = normalise_responses_usage(reported)
    else:
        own = normalise_anthropic_usage(reported)

    def whole_input(input_: object, read: object, write: object) -> int | None:
        if not isinstance(input_, int):
            return None
        return input_ + sum(v for v in (read, write) if isinstance(v, int))

    theirs = {
        "input": whole_input(own.input, own.cache_read, own.cache_write),
        "output": own.output,
    }
    ours: dict[str, int | None] = {"input": 0, "output": 0}
    for usage in counted:
        whole = whole_input(usage.get("input"), usage.get("cache_read"), usage.get("cache_write"))
        out = usage.get("output")
        for name, value in (("input", whole), ("output", out)):
            current = ours[name]
            ours[name] = current + value if current is not None and isinstance(value, int) else None
    differ: JsonObject = {}
    for name in ("input", "output"):
        a, b = theirs[name], ours[name]
        if a is not None and b is not None and a != b:
            differ[name] = {"agent": a, "gateway": b}
    return differ or None


class CommandSession(ExternalSession):
    """The agent-under-test counterpart of runner/agent.py's AgentSession: what
    run_rollout asks of a session (``attempt``, ``close``, ``workspace``, ``calls``)."""

    def __init__(
        self,
        task: Task,
        options: CommandOptions,
        workspace: Workspace,
        gateway: Gateway,
        route: Route,
        *,
        strict_network: bool = False,
    ) -> None:
        super().__init__(
            task, options.process, workspace, gateway, route, strict_network=strict_network
        )
        self.options = options

    def _argv(self, index: int, prompt: str) -> list[str]:
        template = self.options.argv if index == 0 else self.options.resume_argv
        if template is None:  # refused at collection; a plugin's task could still get here
            raise AgentbenchError(
                f"task {self.task.id!r}: a repair round needs the command agent's resume_argv"
            )
        values = self.template_values()
        if self.options.prompt == "argv":
            values["prompt"] = prompt
        return fill_template(template, values)

    def _stdin(self, index: int, prompt: str) -> str | None:
        """What the agent reads on stdin in attempt ``index`` (None: nothing)."""
        return prompt if self.options.prompt == "stdin" else None

    def attempt(
        self,
        messages: Sequence[Mapping[str, JsonValue]],
        *,
        index: int,
        deadline: float,
        timeout_s: float,
        on_event: EventSink | None = None,
        on_phase: Callable[[str], None] | None = None,
        phase: str = "waiting",
    ) -> AgentRun:
        """Run the agent once (attempt ``index``; a repair round's prompt is the last user
        turn of ``messages``, the verifier's feedback) and read what it did from the
        gateway's record of its calls."""
        attempt = self.begin(messages, index, deadline, timeout_s, (on_event, on_phase, phase))
        run, prompt = attempt.run, attempt.prompt
        route = self.route
        argv = self._argv(index, prompt)
        started = self.bridged(argv)
        try:
            with self.watching():
                result = self._workspace.run(
                    started.command,
                    limits=self.limits(max(attempt.bound - time.monotonic(), 0.01)),
                    stdin=self._stdin(index, prompt),
                    env=self.process.env,
                    stand_ins=started.endpoint.environment(),
                    stop=route.stopped,
                    network=not self.strict_network,
                    read_only=self.visible(argv),
                    writable=started.writable,
                )
        except SandboxError as exc:
            return self.could_not_start(attempt, exc)
        route.settle()  # a relay still finishing its record (the agent is gone)
        self._read(run, index, argv, result, attempt.timeout_s)
        run.elapsed_s = time.monotonic() - attempt.started
        return run

    def _read(
        self, run: AgentRun, index: int, argv: list[str], result: CommandResult, timeout_s: float
    ) -> None:
        """Fill ``run`` from the gateway's records of this attempt and the command's end."""
        route = self.route
        answered = self.read_calls(run, index)
        calls = run.turns
        final = final_text(answered)
        run.text = result.stdout.strip() if self.options.final_message == "stdout" else final
        stop = route.stop_info
        every = route.calls
        if stop is not None:
            stopped_by_route(run, stop, timeout_s, every)
        elif result.killed_by == "timeout":
            timed_out(run, timeout_s, every)
        elif result.exit_code != 0:
            run.stop = "agent_failed"
            last = last_line(result.stderr)
            if result.killed_by == "output":  # its last line is the flood: not said
                last = ""
                run.error = self.flooded()
            elif result.exit_code is None:
                run.error = f"agent killed by {result.killed_by or 'a signal'}"
            else:
                run.error = f"agent exited {result.exit_code}"
            if last:
                run.error += f": {last}"
        elif calls == 0:
            run.stop = "agent_failed"
            run.error = "agent made no model call"
        record_failure(run)
        agent: JsonObject = {
            "kind": "command",
            "argv": list(argv),
            "exit_code": result.exit_code,
            "killed_by": result.killed_by,
            "stopped": stop.reason if stop is not None else None,
            "elapsed_s": round(result.elapsed_s, 3),
            "model_calls": calls,
            **({"waited_s": round(run.waited_s, 3)} if run.waited_s >= 0.0005 else {}),
            "stdout": result.stdout,
            "stderr": result.stderr,
            "output_truncated": result.truncated,
            "network": self.network_note(),
        }
        reported = reported_usage(result.stdout)
        if reported is not None:
            agent["reported"] = reported
            own = reported.get("usage")
            if isinstance(own, dict):
                agent["usage_disagreement"] = usage_disagreement(own, run.usages)
        run.trajectory.append({"attempt": index + 1, "agent": agent})


def open_command_session(
    task: Task,
    root: Path,
    gateway: Gateway,
    clients: ClientFor,
    model_label: str,
    *,
    isolation: str,
    kill_policy: KillPolicy,
) -> CommandSession:
    """A command agent's session for ``task``: a fresh workspace at ``root`` seeded from
    the task's files, and a route on ``gateway`` to the task's model. Raises
    AgentbenchError (SandboxError) when either cannot be had."""
    if task.agent is None or task.agent.kind != "command":
        raise AgentbenchError(f"task {task.id!r} has no command agent")
    options = CommandOptions.parse(task.agent.options)
    workspace = open_workspace(task, root, isolation)
    route = gateway.open_route(task.key, model_label, clients, kill_policy=kill_policy)
    strict = isolation == "strict"
    return CommandSession(task, options, workspace, gateway, route, strict_network=strict)
