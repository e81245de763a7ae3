"""Building one Task from its table over the suite's defaults, every problem recorded.

``suites/load.py`` reads the file, checks its structure and makes the suite's defaults
(``SuiteDefaults``) and one ``RawTask`` per task table (of the file, or of a dataset
row); ``TaskBuilder`` resolves each task's fields here: its id, prompt, verifier, replies,
files, tools and sampling, recording each problem where the user wrote it. A value is
read only where the structure check found no problem at or below it (``clean``), so it
has the type the schema gives it; the readers of ``raw_task.py`` narrow it to that type.
What loading hands the builder (``SuiteDefaults``, ``RawTask``) lives there too.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from pathlib import Path, PurePosixPath
from types import MappingProxyType
from typing import TYPE_CHECKING

from pytest_agentbench.core.jsontypes import JsonObject, JsonValue
from pytest_agentbench.core.sampling import Sampling
from pytest_agentbench.suites.build_agent import read_agent, read_task_environment
from pytest_agentbench.suites.fit import fit_path, fit_problems
from pytest_agentbench.suites.raw_task import (
    TASK_SETTINGS,
    RawTask,
    SuiteDefaults,
    as_items,
    as_number,
    as_optional_text,
    as_table,
    as_text,
    as_texts,
    as_whole,
    as_word,
)
from pytest_agentbench.suites.read import DEFAULT_MAX_FILE_BYTES, seed_dir_problem
from pytest_agentbench.suites.task import (
    DEFAULT_TOOLS,
    DEFAULT_VERIFIER,
    FEEDBACK_LEVELS,
    REPAIR_MODES,
    TASK_MODES,
    Task,
    VerifierConfig,
)
from pytest_agentbench.suites.template import render_prompt
from pytest_agentbench.suites.validate import (
    RESERVED_FIELDS,
    Parts,
    ReplyCheck,
    SchemaCheck,
    clean,
    id_problem,
    mark_problem,
    options_check,
    problem_lines,
    reply_problem,
    reserved_name,
    show,
    unknown_name,
)

if TYPE_CHECKING:
    from pytest_agentbench.suites.fit import VerifierKind

#: Judges a ``sampling`` table against the run's wire protocol: ``(key, reason)`` pairs.
SamplingCheck = Callable[[JsonObject], list[tuple[str, str]]]

#: A task without replies by model: one empty table for all of them (memory per task).
NO_REPLIES: Mapping[str, tuple[JsonValue, ...]] = MappingProxyType({})
#: A SuiteError lists at most this many problems (a broken dataset could give thousands).
MAX_PROBLEMS = 100


class TaskBuilder:
    """Collects the problems of one suite file while building its tasks."""

    def __init__(
        self,
        path: Path,
        fmt: str,
        verifiers: Mapping[str, VerifierKind],
        reply_check: ReplyCheck | None,
        tools: Collection[str] = DEFAULT_TOOLS,
        max_bytes: int = DEFAULT_MAX_FILE_BYTES,
    ) -> None:
        self.path = path
        self.max_bytes = max_bytes
        self.fmt = fmt
        self.verifiers = verifiers
        self.reply_check = reply_check
        self.tools = tools
        self.object_word = "a table" if fmt == "toml" else "an object"
        self.problems: list[tuple[int | None, str, str]] = []
        #: The task indexes with a problem (None: the suite has one): one look-up per task,
        #: never a scan of every problem (N tasks with a problem each stay linear).
        self.problem_indexes: set[int | None] = set()
        #: The dataset's name, and the line each task's row starts on (a manifest's).
        self.dataset = ""
        self.lines: dict[int, int] = {}
        self.ids: dict[int, str] = {}
        self.first_with_id: dict[str, int] = {}
        self.validators: dict[str, SchemaCheck] = {}
        self.sampling_check: SamplingCheck | None = None
        self.inherited: VerifierConfig | None = None

    def add(self, index: int | None, path: str, text: str) -> None:
        """Record a problem of task ``index`` (None: of the suite as a whole)."""
        self.problems.append((index, path, text))
        self.problem_indexes.add(index)

    def task(self, raw: RawTask, defaults: SuiteDefaults) -> Task | None:
        """The task of ``raw`` over the suite's defaults; None when it has a problem."""
        data, i = raw.data, raw.index

        def pick(key: str, default: JsonValue = None) -> JsonValue:
            return data[key] if key in data and clean(raw.bad, (key,)) else default

        task_id = self._task_id(raw)
        text, choices = as_optional_text(pick("input")), as_texts(pick("choices", []))
        task_vars, marks = as_table(pick("vars", {})), as_texts(pick("marks", []))
        for key in task_vars:
            if key in RESERVED_FIELDS:
                self.add(i, raw.locate(("vars", key)), reserved_name(key))
        for j, mark in enumerate(marks):
            if (problem := mark_problem(mark)) is not None:
                self.add(i, raw.locate(("marks", j)), problem)
        if "template" in data:
            template, template_path = as_optional_text(pick("template")), raw.locate(("template",))
            known = []
        else:
            template, template_path = defaults.template, defaults.template_path
            known = defaults.template_problems
        # a task that adds nothing shares the suite's (frozen Task; memory per task)
        merged_vars = {**defaults.vars, **task_vars} if task_vars else defaults.vars
        prompt = None
        renderable = all(clean(raw.bad, (key,)) for key in ("input", "choices", "vars"))
        if template is not None and text is not None and renderable and defaults.renderable:
            prompt, problems = render_prompt(template, text, choices, merged_vars)
            for problem in problems:
                if problem not in known:
                    self.add(i, template_path, problem)
        scripted = data.get("scripted")
        replies = scripted if isinstance(scripted, list) else []
        for j, reply in enumerate(replies):
            if clean(raw.bad, ("scripted", j)):
                self._check_reply(i, raw.locate(("scripted", j)), reply)
        by_model = {
            name: as_items(r) for name, r in as_table(pick("scripted_by_model", {})).items()
        }
        for model, model_replies in by_model.items():
            for j, reply in enumerate(model_replies):
                if clean(raw.bad, ("scripted_by_model", model, j)):
                    self._check_reply(i, raw.locate(("scripted_by_model", model, j)), reply)
        oracle = self._oracle(raw)
        verifier = self._task_verifier(raw, defaults)
        files, files_dir = self.files(pick("files"), i, lambda parts: raw.locate(("files", *parts)))
        self.check_tools(i, pick("tools", []), lambda j: raw.locate(("tools", j)))
        own = self.sampling(pick("sampling", {}), i, lambda key: raw.locate(("sampling", key)))
        if task_id is None or text is None or prompt is None or verifier is None:
            return None
        settings = {
            key: pick(key, defaults.settings.get(key, value))
            for key, value in TASK_SETTINGS.items()
        }
        timeout_s, max_tokens, tools = (settings[k] for k in ("timeout_s", "max_tokens", "tools"))
        task = Task(
            suite=defaults.name,
            id=task_id,
            index=i,
            path=self.path,
            input=text,
            prompt=prompt,
            target=data.get("target"),
            system=as_optional_text(settings["system"]),
            verifier=verifier,
            choices=tuple(choices),
            repairs=as_whole(settings["repairs"]),
            repair_mode=as_word(settings["repair_mode"], REPAIR_MODES),
            feedback=as_word(settings["feedback"], FEEDBACK_LEVELS),
            timeout_s=None if timeout_s is None else as_number(timeout_s),
            max_tokens=None if max_tokens is None else as_whole(max_tokens),
            pass_threshold=as_number(settings["pass_threshold"]),
            min_score=defaults.min_score,
            scripted=tuple(replies),
            scripted_by_model=(
                {name: tuple(r) for name, r in by_model.items()} if by_model else NO_REPLIES
            ),
            epochs=defaults.epochs,
            reducer=defaults.reducer,
            vars=merged_vars,
            marks=tuple(dict.fromkeys([*defaults.marks, *marks])),
            files={**defaults.files, **files} if files else defaults.files,
            files_dir=files_dir or defaults.files_dir,
            mode=as_word(settings["mode"], TASK_MODES),
            max_turns=as_whole(settings["max_turns"]),
            tools=DEFAULT_TOOLS if tools is None else tuple(as_texts(tools)),
            max_tool_output=as_whole(settings["max_tool_output"]),
            agent=read_agent(settings, raw, self.add),
            oracle=oracle,
            sampling=own.over(defaults.sampling),
            environment=read_task_environment(
                settings["environment"], raw, i, defaults, self.path.parent, self.add
            ),
        )
        if i in self.problem_indexes or None in self.problem_indexes:
            return None  # asked only of a task with no other problem: no noise on noise
        return task if self._check_setup(raw, task, defaults) else None

    def _oracle(self, raw: RawTask) -> tuple[JsonValue, ...]:
        """The task's known-good answer as scripted replies (a string is one reply),
        each checked like a scripted reply; empty when it has none."""
        value = raw.data.get("oracle")
        if not clean(raw.bad, ("oracle",)) or value is None:
            return ()
        replies = [value] if isinstance(value, str) else as_items(value)
        for j, reply in enumerate(replies):
            where = raw.locate(("oracle",) if isinstance(value, str) else ("oracle", j))
            self._check_reply(raw.index, where, reply)
        return tuple(replies)

    def _check_setup(self, raw: RawTask, task: Task, defaults: SuiteDefaults) -> bool:
        """Ask the task's verifier whether it can judge this task at all (suites/fit.py);
        record each problem where it was written. True when there is none."""
        found = fit_problems(self.verifiers[task.verifier.kind], task)
        own, suite = raw.data.get("verifier") or {}, defaults.verifier or {}
        for at, text in found:
            self.add(raw.index, fit_path(at, as_table(own), suite, raw.locate), text)
        return not found

    def sampling(
        self, value: JsonValue, index: int | None, where: Callable[[str], str]
    ) -> Sampling:
        """A well-formed ``sampling`` table (the schema checked it) as Sampling, each
        setting the run's protocol cannot send recorded as a problem where it is written."""
        settings = as_table(value)
        for key, reason in self.sampling_check(settings) if self.sampling_check else ():
            self.add(index, where(key), f"cannot be sent: {reason}")
        try:
            return Sampling.parse(settings)
        except ValueError as exc:  # what the schema lets through (NaN)
            key, _, reason = str(exc).partition(": ")
            self.add(index, where(key), f"has a bad value: {reason}")
            return Sampling()

    def check_tools(self, index: int | None, names: JsonValue, where: Callable[[int], str]) -> None:
        """Every tool name a suite or task asks for must be a tool this run has."""
        for j, name in enumerate(as_texts(names)):
            if name not in self.tools:
                self.add(index, where(j), unknown_name(name, sorted(self.tools)))

    def files(
        self, value: JsonValue, index: int | None, where: Callable[[Parts], str]
    ) -> tuple[dict[str, str], Path | None]:
        """A ``files`` table with every path checked, or the directory it names (next to
        the suite file) checked to exist; empty when unset or broken (reason recorded)."""
        if value is None:
            return {}, None
        if isinstance(value, str):
            directory = self.path.parent / value
            if (problem := seed_dir_problem(directory, value, self.max_bytes)) is not None:
                self.add(index, where(()), problem)
                return {}, None
            return {}, directory
        found = {name: text for name, text in as_table(value).items() if isinstance(text, str)}
        for name in found:
            pure = PurePosixPath(name)
            if not name.strip() or "\x00" in name or pure.is_absolute() or ".." in pure.parts:
                reason = "must be a relative path inside the workspace (no '..', not absolute)"
                self.add(index, where((name,)), reason)
        return found, None

    def _task_id(self, raw: RawTask) -> str | None:
        """The task's id (its 1-based position when it has none), checked and unique."""
        if "id" not in raw.data:
            task_id = str(raw.index + 1)
        elif not clean(raw.bad, ("id",)):
            return None
        else:
            value = raw.data["id"]
            task_id = str(int(value)) if isinstance(value, float) else str(value)
            self.ids[raw.index] = task_id
            if (problem := id_problem(task_id)) is not None:
                self.add(raw.index, raw.locate(("id",)), problem)
            elif "::" in task_id:
                reason = (
                    f'must not contain "::" (pytest\'s node-id separator: the task could not be '
                    f"selected as <file>::<id>); got {show(task_id)}"
                )
                self.add(raw.index, raw.locate(("id",)), reason)
        first = self.first_with_id.setdefault(task_id, raw.index)
        if first != raw.index and "id" in raw.data:
            reason = f"repeats the id {show(task_id)} of {self.label(first)}"
            self.add(raw.index, raw.locate(("id",)), reason)
        elif first != raw.index:
            taken = f"is taken by {self.label(first)}; give this task an id"
            self.add(raw.index, "", f"its default id {show(task_id)} (its position) {taken}")
        return task_id

    def _task_verifier(self, raw: RawTask, defaults: SuiteDefaults) -> VerifierConfig | None:
        """The task's own verifier table (over the suite's, when it names no kind), else
        the suite's, else the default kind; None when broken (the reason recorded)."""
        if not clean(raw.bad, ("verifier",)):
            return None
        own = as_table(raw.data.get("verifier") or {})
        inherits = "kind" not in own
        if inherits and not defaults.verifier_ok:
            return None
        options = {**(defaults.verifier or {"kind": DEFAULT_VERIFIER}), **own}
        kind = as_text(options.pop("kind") if inherits else own["kind"])
        if not inherits:
            options = {k: v for k, v in own.items() if k != "kind"}
        elif not own and defaults.verifier is not None:
            # one record for every task that inherits the suite's table as it is
            config = VerifierConfig(kind, options)
            if self.inherited != config:
                self.inherited = config
            return self.inherited
        problems = self.verifier_problems(kind, options)
        for parts, message in problems:
            if parts == ("kind",) and inherits:
                kinds = ", ".join(sorted(self.verifiers)) or "(none)"
                reason = f"no verifier kind is set and the default {show(kind)} is not available"
                self.add(raw.index, "", f"{reason}; set verifier.kind to one of: {kinds}")
            else:
                self.add(raw.index, raw.locate(("verifier", *parts)), message)
        return None if problems else VerifierConfig(kind, options)

    def verifier_problems(self, kind: str, options: JsonObject) -> list[tuple[Parts, str]]:
        """Problems of a verifier table (kind unknown, options invalid), as paths in it."""
        if kind not in self.verifiers:
            why = getattr(self.verifiers, "why_missing", lambda _: None)(kind)
            return [(("kind",), why or unknown_name(kind, sorted(self.verifiers)))]
        if kind not in self.validators:
            self.validators[kind] = options_check(kind, self.verifiers[kind].options_schema)
        return self.validators[kind].problems(dict(options), self.object_word)

    def _check_reply(self, index: int, path: str, reply: JsonValue) -> None:
        if (problem := reply_problem(self.reply_check, reply, path, self.object_word)) is not None:
            self.add(index, path, problem)

    def label(self, index: int) -> str:
        """How a problem line names task ``index``: its position, id and dataset line."""
        label = f"task {index + 1}"
        if index in self.ids:
            label += f" ({show(self.ids[index])})"
        if index in self.lines:
            label += f" at {self.dataset} line {self.lines[index]}"
        return label

    def problem_lines(self) -> list[str]:
        """The problems recorded, one line each (at most MAX_PROBLEMS)."""
        return problem_lines(self.problems, self.label, self.lines, self.dataset, MAX_PROBLEMS)
