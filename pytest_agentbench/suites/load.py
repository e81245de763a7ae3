"""Load a suite file into Task records, or fail with every problem the file has.

A suite is a TOML, JSON or YAML file holding ``suite`` (defaults) and ``task`` (a list),
or a manifest whose ``suite.dataset`` names a dataset (JSONL, a JSON array, CSV) mapped
through ``suite.fields`` (``suites/dataset.py``).
The file is parsed, its structure checked against ``suite.schema.json``, then the checks
a schema cannot make run on every part that is well-formed, so that one SuiteError lists
all the problems at once. Tasks are only returned from a file without problems.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from pytest_agentbench.core.sampling import Sampling
from pytest_agentbench.errors import SuiteError
from pytest_agentbench.suites.dataset import FindDataset, dataset_rows
from pytest_agentbench.suites.fit import fit_path, fit_problems
from pytest_agentbench.suites.read import DEFAULT_MAX_FILE_BYTES, read_document, seed_dir_problem
from pytest_agentbench.suites.task import DEFAULT_TOOLS, Task, VerifierConfig
from pytest_agentbench.suites.validate import (
    RESERVED_FIELDS,
    Parts,
    clean,
    document_validator,
    id_problem,
    json_path,
    mark_problem,
    options_validator,
    problem_lines,
    render_prompt,
    reply_problem,
    reserved_name,
    schema_problems,
    show,
    structure_problems,
    template_fields,
    type_name,
    unknown_name,
)

if TYPE_CHECKING:
    from jsonschema.protocols import Validator

    from pytest_agentbench.verifiers.base import Verifier

#: Judges one scripted reply, given the reply and its JSON path; raises ValueError.
ReplyCheck = Callable[[Any, str], None]
#: Judges a ``sampling`` table against the run's wire protocol: ``(key, reason)`` pairs.
SamplingCheck = Callable[[dict[str, Any]], list[tuple[str, str]]]

DEFAULT_TEMPLATE = "{input}"
DEFAULT_VERIFIER = "exact"
#: A SuiteError lists at most this many problems (a broken dataset could give thousands).
MAX_PROBLEMS = 100
#: Settings a task takes from the suite unless it sets its own, with their defaults.
_SETTINGS = {
    "system": None,
    "repairs": 0,
    "repair_mode": "conversation",
    "feedback": "names",
    "timeout_s": None,
    "max_tokens": None,
    "pass_threshold": 1.0,
    "mode": "answer",
    "max_turns": 20,
    "tools": None,
    "max_tool_output": 10_000,
}


@dataclass(frozen=True)
class Suite:
    """A loaded suite: its name, the file it came from, and its tasks in file order."""

    name: str
    path: Path
    tasks: tuple[Task, ...]
    description: str = ""


def load_suite(
    path: Path,
    verifiers: Mapping[str, Verifier],
    *,
    reply_check: ReplyCheck | None = None,
    tools: Collection[str] = DEFAULT_TOOLS,
    max_bytes: int = DEFAULT_MAX_FILE_BYTES,
    find_dataset: FindDataset | None = None,
    sampling_check: SamplingCheck | None = None,
) -> Suite:
    """Read and validate one suite file and build its tasks with every default applied.

    ``verifiers`` maps each verifier kind to its verifier, whose ``options_schema``
    checks the options a suite gives it. ``reply_check`` judges each scripted reply: it
    is called with the reply and its JSON path (``$.task[2].scripted[0]``) and raises
    ValueError to refuse it. Without one, a reply must be a string or a table.
    ``tools`` are the tool names an agent task may ask for (the built-in ones unless a
    plugin adds more). ``max_bytes`` caps the suite file and its dataset; only regular
    files are read (a FIFO or a device is refused, never opened to block).
    ``find_dataset`` may give a manifest's dataset a local path (a plugin's download).

    Raises SuiteError naming the file and listing every problem found, one per line.
    """
    path = Path(path)
    try:
        document, fmt = read_document(path, max_bytes)
    except ValueError as exc:
        raise SuiteError(str(path), [str(exc)]) from None
    loader = _Loader(path, fmt, verifiers, reply_check, tools, max_bytes)
    loader.find_dataset = find_dataset
    loader.sampling_check = sampling_check
    return loader.load(document)


def load_document(
    path: Path,
    document: Any,
    verifiers: Mapping[str, Verifier],
    *,
    reply_check: ReplyCheck | None = None,
    tools: Collection[str] = DEFAULT_TOOLS,
    max_bytes: int = DEFAULT_MAX_FILE_BYTES,
    sampling_check: SamplingCheck | None = None,
) -> Suite:
    """Validate a suite ``document`` that a plugin (or a Python bench file) made from the
    file at ``path``, exactly as :func:`load_suite` validates a file it read (a JSON
    document); the same SuiteError for its problems."""
    loader = _Loader(Path(path), "json", verifiers, reply_check, tools, max_bytes)
    loader.sampling_check = sampling_check
    return loader.load(document)


@dataclass(frozen=True)
class _RawTask:
    """A task's table before defaults: the paths already found broken in it, and how to
    print a path inside it (a path in the suite file, or in a dataset record)."""

    index: int
    data: Mapping[str, Any]
    bad: frozenset[Parts]
    locate: Callable[[Parts], str]


class _Loader:
    """Collects the problems of one suite file while building its tasks."""

    def __init__(
        self,
        path: Path,
        fmt: str,
        verifiers: Mapping[str, Verifier],
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
        self.list_key = "task"
        self.dataset = ""
        self.ids: dict[int, str] = {}
        self.lines: dict[int, int] = {}
        self.first_with_id: dict[str, int] = {}
        self.validators: dict[str, Validator | str] = {}
        self.find_dataset: FindDataset | None = None
        self.sampling_check: SamplingCheck | None = None
        self.inherited: VerifierConfig | None = None

    def add(self, index: int | None, path: str, text: str) -> None:
        """Record a problem of task ``index`` (None: of the suite as a whole)."""
        self.problems.append((index, path, text))

    def doc_path(self, parts: Parts) -> str:
        if parts[:1] == ("task",):
            parts = (self.list_key, *parts[1:])
        return json_path(parts)

    def _task_path(self, index: int, parts: Parts) -> str:
        return self.doc_path(("task", index, *parts))

    def load(self, document: Any) -> Suite:
        if not isinstance(document, dict):
            expected = f'{self.object_word} with "suite" and "task" keys'
            problem = f"the file must hold {expected}; got {type_name(document)}"
            raise SuiteError(str(self.path), [problem])
        document = self._rename_tasks(document)
        found = structure_problems(document, document_validator(), self.object_word)
        for parts, text in found:
            is_task = len(parts) > 1 and parts[0] == "task" and isinstance(parts[1], int)
            self.add(int(parts[1]) if is_task else None, self.doc_path(parts), text)
        bad = {parts for parts, _ in found}
        table = document.get("suite")
        table = table if isinstance(table, dict) else {}
        defaults = self._defaults(table, bad)
        if isinstance(table.get("dataset"), str) and clean(bad, ("suite", "dataset")):
            if "task" in document:
                reason = "cannot be used in a manifest: its tasks come from $.suite.dataset"
                self.add(None, self.doc_path(("task",)), reason)
            raws = self._dataset_tasks(table, bad)
        else:
            raws = self._file_tasks(document.get("task"), bad)
        tasks = [task for raw in raws if (task := self._task(raw, defaults)) is not None]
        if not raws and not self.problems:
            where = "[[task]] tables" if self.fmt == "toml" else 'a "task" list'
            self.add(None, "", f"the suite has no tasks: add {where} or a dataset")
        if self.problems:
            raise SuiteError(str(self.path), self._lines())
        return Suite(defaults["name"], self.path, tuple(tasks), defaults["description"])

    def _rename_tasks(self, document: dict[str, Any]) -> dict[str, Any]:
        """JSON and YAML files may call the task list ``tasks``; paths keep their word."""
        if self.fmt == "toml" or "tasks" not in document:
            return document
        document = dict(document)
        tasks = document.pop("tasks")
        if "task" in document:
            self.add(None, "$", 'has both "task" and "tasks"; keep one of them')
        else:
            document["task"] = tasks
            self.list_key = "tasks"
        return document

    def _defaults(self, table: dict[str, Any], bad: set[Parts]) -> dict[str, Any]:
        """The suite table's well-formed values; a broken one reads as unset (its
        problem is already recorded), and what depends on it is not checked further."""

        def pick(key: str, default: Any = None) -> Any:
            return table[key] if key in table and clean(bad, ("suite", key)) else default

        defaults = {key: pick(key) for key in _SETTINGS if pick(key) is not None}
        name = pick("name")
        if name is None:
            name = self.path.stem.removeprefix("bench_") or self.path.stem
            problem = None if "name" in table else id_problem(name)
            if problem is not None:
                self.add(None, "", f"the suite name {show(name)} (from the file name) {problem}")
        elif (problem := id_problem(name)) is not None:
            self.add(None, "$.suite.name", problem)
        template = pick("template", None if "template" in table else DEFAULT_TEMPLATE)
        known = template_fields(template)[1] if template is not None else []
        for problem in known:
            self.add(None, "$.suite.template", problem)
        suite_vars = pick("vars", {})
        for key in suite_vars:
            if key in RESERVED_FIELDS:
                self.add(None, json_path(("suite", "vars", key)), reserved_name(key))
        marks = pick("marks", [])
        for i, mark in enumerate(marks):
            if (problem := mark_problem(mark)) is not None:
                self.add(None, json_path(("suite", "marks", i)), problem)
        verifier = pick("verifier")
        verifier_ok = "verifier" not in table or verifier is not None
        if verifier is not None:
            options = {k: v for k, v in verifier.items() if k != "kind"}
            for parts, text in self._verifier_problems(verifier["kind"], options):
                self.add(None, json_path(("suite", "verifier", *parts)), text)
                verifier_ok = False
        suite_files = self._files(
            pick("files"), None, lambda parts: json_path(("suite", "files", *parts))
        )
        self._check_tools(None, pick("tools", []), lambda j: json_path(("suite", "tools", j)))
        sampling = self._sampling(
            pick("sampling", {}), None, lambda key: json_path(("suite", "sampling", key))
        )
        return defaults | {
            "sampling": sampling,
            "files": suite_files[0],
            "files_dir": suite_files[1],
            "name": name,
            "description": pick("description", ""),
            "min_score": pick("min_score"),
            "epochs": pick("epochs", 1),
            "reducer": pick("reducer", "mean"),
            "template": template,
            "template_path": "$.suite.template" if "template" in table else "",
            "template_problems": known,
            "renderable": clean(bad, ("suite", "vars")),
            "vars": suite_vars,
            "marks": marks,
            "verifier": verifier,
            "verifier_ok": verifier_ok,
        }

    def _file_tasks(self, tasks: Any, bad: set[Parts]) -> list[_RawTask]:
        return [
            _RawTask(
                index=i,
                data=data,
                bad=frozenset(parts[2:] for parts in bad if parts[:2] == ("task", i)),
                locate=functools.partial(self._task_path, i),
            )
            for i, data in enumerate(tasks if isinstance(tasks, list) else [])
            if isinstance(data, dict)
        ]

    def _dataset_tasks(self, table: Mapping[str, Any], bad: set[Parts]) -> list[_RawTask]:
        """One raw task per dataset row (``suites/dataset.py`` reads and maps them)."""
        self.dataset = table["dataset"]
        if not clean(bad, ("suite", "fields")) or not clean(bad, ("suite", "columns")):
            return []
        found, rows, locate = dataset_rows(self.path, table, self.max_bytes, self.find_dataset)
        for path, text in found:
            self.add(None, path, text)
        for index, row in enumerate(rows):
            self.lines[index] = row.line
            for path, text in row.problems:
                self.add(index, path, text)
        return [
            _RawTask(index, row.data, row.broken, locate)
            for index, row in enumerate(rows)
            if row.data is not None
        ]

    def _task(self, raw: _RawTask, defaults: Mapping[str, Any]) -> Task | None:
        data, i = raw.data, raw.index

        def pick(key: str, default: Any = None) -> Any:
            return data[key] if key in data and clean(raw.bad, (key,)) else default

        task_id = self._task_id(raw)
        text, choices = pick("input"), pick("choices", [])
        task_vars, marks = pick("vars", {}), pick("marks", [])
        for key in task_vars:
            if key in RESERVED_FIELDS:
                self.add(i, raw.locate(("vars", key)), reserved_name(key))
        for j, mark in enumerate(marks):
            if (problem := mark_problem(mark)) is not None:
                self.add(i, raw.locate(("marks", j)), problem)
        if "template" in data:
            template, template_path = pick("template"), raw.locate(("template",))
            known = []
        else:
            template, template_path = defaults["template"], defaults["template_path"]
            known = defaults["template_problems"]
        # a task that adds nothing shares the suite's (frozen Task; memory per task)
        merged_vars = {**defaults["vars"], **task_vars} if task_vars else defaults["vars"]
        prompt = None
        renderable = all(clean(raw.bad, (key,)) for key in ("input", "choices", "vars"))
        if template is not None and text is not None and renderable and defaults["renderable"]:
            prompt, problems = render_prompt(template, text, choices, merged_vars)
            for problem in problems:
                if problem not in known:
                    self.add(i, template_path, problem)
        replies: list[Any] = data["scripted"] if isinstance(data.get("scripted"), list) else []
        for j, reply in enumerate(replies):
            if clean(raw.bad, ("scripted", j)):
                self._check_reply(i, raw.locate(("scripted", j)), reply)
        by_model: dict[str, Any] = pick("scripted_by_model", {})
        for model, model_replies in by_model.items():
            for j, reply in enumerate(model_replies):
                if clean(raw.bad, ("scripted_by_model", model, j)):
                    self._check_reply(i, raw.locate(("scripted_by_model", model, j)), reply)
        oracle = self._oracle(raw)
        verifier = self._task_verifier(raw, defaults)
        files, files_dir = self._files(
            pick("files"), i, lambda parts: raw.locate(("files", *parts))
        )
        self._check_tools(i, pick("tools", []), lambda j: raw.locate(("tools", j)))
        own = self._sampling(pick("sampling", {}), i, lambda key: raw.locate(("sampling", key)))
        if task_id is None or prompt is None or verifier is None:
            return None
        settings = {key: pick(key, defaults.get(key, value)) for key, value in _SETTINGS.items()}
        timeout_s, max_tokens = settings["timeout_s"], settings["max_tokens"]
        task = Task(
            suite=defaults["name"],
            id=task_id,
            index=i,
            path=self.path,
            input=text,
            prompt=prompt,
            target=data.get("target"),
            system=settings["system"],
            verifier=verifier,
            choices=tuple(choices),
            repairs=int(settings["repairs"]),
            repair_mode=settings["repair_mode"],
            feedback=settings["feedback"],
            timeout_s=None if timeout_s is None else float(timeout_s),
            max_tokens=None if max_tokens is None else int(max_tokens),
            pass_threshold=float(settings["pass_threshold"]),
            min_score=None if defaults["min_score"] is None else float(defaults["min_score"]),
            scripted=tuple(replies),
            scripted_by_model={name: tuple(r) for name, r in by_model.items()},
            epochs=int(defaults["epochs"]),
            reducer=str(defaults["reducer"]),
            vars=merged_vars,
            marks=tuple(dict.fromkeys([*defaults["marks"], *marks])),
            files={**defaults["files"], **files} if files else defaults["files"],
            files_dir=files_dir or defaults["files_dir"],
            mode=settings["mode"],
            max_turns=int(settings["max_turns"]),
            tools=DEFAULT_TOOLS if settings["tools"] is None else tuple(settings["tools"]),
            max_tool_output=int(settings["max_tool_output"]),
            oracle=oracle,
            sampling=own.over(defaults["sampling"]),
        )
        if any(index in (i, None) for index, _, _ in self.problems):
            return None  # asked only of a task with no other problem: no noise on noise
        return task if self._check_setup(raw, task, defaults) else None

    def _oracle(self, raw: _RawTask) -> tuple[Any, ...]:
        """The task's known-good answer as scripted replies (a string is one reply),
        each checked like a scripted reply; empty when it has none."""
        value = raw.data.get("oracle")
        if not clean(raw.bad, ("oracle",)) or value is None:
            return ()
        replies = [value] if isinstance(value, str) else list(value)
        for j, reply in enumerate(replies):
            where = raw.locate(("oracle",) if isinstance(value, str) else ("oracle", j))
            self._check_reply(raw.index, where, reply)
        return tuple(replies)

    def _check_setup(self, raw: _RawTask, task: Task, defaults: Mapping[str, Any]) -> bool:
        """Ask the task's verifier whether it can judge this task at all (suites/fit.py);
        record each problem where it was written. True when there is none."""
        found = fit_problems(self.verifiers[task.verifier.kind], task)
        own, suite = raw.data.get("verifier") or {}, defaults["verifier"] or {}
        for at, text in found:
            self.add(raw.index, fit_path(at, own, suite, raw.locate), text)
        return not found

    def _sampling(
        self, table: dict[str, Any], index: int | None, where: Callable[[str], str]
    ) -> Sampling:
        """A well-formed ``sampling`` table (the schema checked it) as Sampling, each
        setting the run's protocol cannot send recorded as a problem where it is written."""
        for key, reason in self.sampling_check(table) if self.sampling_check else ():
            self.add(index, where(key), f"cannot be sent: {reason}")
        try:
            return Sampling.parse(table)
        except ValueError as exc:  # what the schema lets through (NaN)
            key, _, reason = str(exc).partition(": ")
            self.add(index, where(key), f"has a bad value: {reason}")
            return Sampling()

    def _check_tools(self, index: int | None, names: Any, where: Callable[[int], str]) -> None:
        """Every tool name a suite or task asks for must be a tool this run has."""
        for j, name in enumerate(names):
            if name not in self.tools:
                self.add(index, where(j), unknown_name(name, sorted(self.tools)))

    def _files(
        self, value: Any, index: int | None, where: Callable[[Parts], str]
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
        for name in value:
            pure = PurePosixPath(name)
            if not name.strip() or "\x00" in name or pure.is_absolute() or ".." in pure.parts:
                reason = "must be a relative path inside the workspace (no '..', not absolute)"
                self.add(index, where((name,)), reason)
        return dict(value), None

    def _task_id(self, raw: _RawTask) -> str | None:
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
            reason = f"repeats the id {show(task_id)} of {self._label(first)}"
            self.add(raw.index, raw.locate(("id",)), reason)
        elif first != raw.index:
            taken = f"is taken by {self._label(first)}; give this task an id"
            self.add(raw.index, "", f"its default id {show(task_id)} (its position) {taken}")
        return task_id

    def _task_verifier(self, raw: _RawTask, defaults: Mapping[str, Any]) -> VerifierConfig | None:
        """The task's own verifier table (over the suite's, when it names no kind), else
        the suite's, else the default kind; None when broken (the reason recorded)."""
        if not clean(raw.bad, ("verifier",)):
            return None
        own = raw.data.get("verifier") or {}
        inherits = "kind" not in own
        if inherits and not defaults["verifier_ok"]:
            return None
        table = {**(defaults["verifier"] or {"kind": DEFAULT_VERIFIER}), **own}
        kind = table.pop("kind") if inherits else own["kind"]
        if not inherits:
            table = {k: v for k, v in own.items() if k != "kind"}
        elif not own and defaults["verifier"] is not None:
            # one record for every task that inherits the suite's table as it is
            config = VerifierConfig(kind, table)
            if self.inherited != config:
                self.inherited = config
            return self.inherited
        problems = self._verifier_problems(kind, table)
        for parts, text in problems:
            if parts == ("kind",) and inherits:
                kinds = ", ".join(sorted(self.verifiers)) or "(none)"
                reason = f"no verifier kind is set and the default {show(kind)} is not available"
                self.add(raw.index, "", f"{reason}; set verifier.kind to one of: {kinds}")
            else:
                self.add(raw.index, raw.locate(("verifier", *parts)), text)
        return None if problems else VerifierConfig(kind, table)

    def _verifier_problems(self, kind: str, options: Mapping[str, Any]) -> list[tuple[Parts, str]]:
        """Problems of a verifier table (kind unknown, options invalid), as paths in it."""
        if kind not in self.verifiers:
            why = getattr(self.verifiers, "why_missing", lambda _: None)(kind)
            return [(("kind",), why or unknown_name(kind, sorted(self.verifiers)))]
        if kind not in self.validators:
            try:
                self.validators[kind] = options_validator(kind, self.verifiers[kind].options_schema)
            except ValueError as exc:
                self.validators[kind] = str(exc)
        validator = self.validators[kind]
        if isinstance(validator, str):
            return [((), validator)]
        return schema_problems(validator, dict(options), self.object_word)

    def _check_reply(self, index: int, path: str, reply: Any) -> None:
        if (problem := reply_problem(self.reply_check, reply, path, self.object_word)) is not None:
            self.add(index, path, problem)

    def _label(self, index: int) -> str:
        label = f"task {index + 1}"
        if index in self.ids:
            label += f" ({show(self.ids[index])})"
        if index in self.lines:
            label += f" at {self.dataset} line {self.lines[index]}"
        return label

    def _lines(self) -> list[str]:
        return problem_lines(self.problems, self._label, self.lines, self.dataset, MAX_PROBLEMS)
