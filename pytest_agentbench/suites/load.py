"""Load a suite file into Task records, or fail with every problem the file has.

A suite is a TOML, JSON or YAML file holding ``suite`` (defaults) and ``task`` (a list),
or a manifest whose ``suite.dataset`` names a dataset (JSONL, a JSON array, CSV) mapped
through ``suite.fields`` (``suites/dataset.py``).
The file is parsed, its structure checked against ``suite.schema.json``, then the checks
a schema cannot make run on every part that is well-formed, so that one SuiteError lists
all the problems at once. Tasks are only returned from a file without problems. This
module reads the file and its suite table; ``suites/build.py`` builds each task.
"""

from __future__ import annotations

import functools
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_agentbench.core.fastclass import dataclass
from pytest_agentbench.core.jsontypes import JsonObject, JsonValue
from pytest_agentbench.errors import SuiteError
from pytest_agentbench.suites.build import SamplingCheck, TaskBuilder
from pytest_agentbench.suites.raw_task import (
    TASK_SETTINGS,
    RawTask,
    SuiteDefaults,
    as_number,
    as_optional_text,
    as_table,
    as_text,
    as_texts,
    as_whole,
)
from pytest_agentbench.suites.read import (
    DEFAULT_MAX_FILE_BYTES,
    DocumentProblems,
    read_document,
)
from pytest_agentbench.suites.task import DEFAULT_TOOLS, Task
from pytest_agentbench.suites.template import template_fields
from pytest_agentbench.suites.validate import (
    RESERVED_FIELDS,
    Parts,
    ReplyCheck,
    clean,
    document_check,
    id_problem,
    json_path,
    mark_problem,
    reserved_name,
    show,
    structure_problems,
    type_name,
)

if TYPE_CHECKING:
    from pytest_agentbench.suites.dataset import FindDataset
    from pytest_agentbench.suites.fit import VerifierKind

__all__ = ["ReplyCheck", "SamplingCheck", "Suite", "load_document", "load_suite"]

DEFAULT_TEMPLATE = "{input}"


@dataclass(frozen=True)
class Suite:
    """A loaded suite: its name, the file it came from, and its tasks in file order."""

    name: str
    path: Path
    tasks: tuple[Task, ...]
    description: str = ""


def load_suite(
    path: Path,
    verifiers: Mapping[str, VerifierKind],
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
    except DocumentProblems as exc:
        raise SuiteError(str(path), exc.problems) from None
    except ValueError as exc:
        raise SuiteError(str(path), [str(exc)]) from None
    loader = _Loader(path, fmt, verifiers, reply_check, tools, max_bytes)
    loader.find_dataset = find_dataset
    loader.sampling_check = sampling_check
    return loader.load(document)


def load_document(
    path: Path,
    document: object,
    verifiers: Mapping[str, VerifierKind],
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


class _Loader(TaskBuilder):
    """Reads one suite document: its structure, its suite table, its task tables (of
    the file or of a dataset); the tasks themselves are built by TaskBuilder."""

    list_key = "task"
    find_dataset: FindDataset | None = None

    def doc_path(self, parts: Parts) -> str:
        if parts[:1] == ("task",):
            parts = (self.list_key, *parts[1:])
        return json_path(parts)

    def _task_path(self, index: int, parts: Parts) -> str:
        return self.doc_path(("task", index, *parts))

    def load(self, found: object) -> Suite:
        if not isinstance(found, dict):
            expected = f'{self.object_word} with "suite" and "task" keys'
            problem = f"the file must hold {expected}; got {type_name(found)}"
            raise SuiteError(str(self.path), [problem])
        # The JSON edge: read as JSON from here. The structure check reports every value
        # JSON cannot hold (a date, a key that is not a string) and every value of the
        # wrong type, and nothing is read at or below a problem (``clean``).
        document = self._rename_tasks(found)
        shape = structure_problems(document, document_check(), self.object_word)
        for parts, problem in shape:
            is_task = len(parts) > 1 and parts[0] == "task" and isinstance(parts[1], int)
            self.add(int(parts[1]) if is_task else None, self.doc_path(parts), problem)
        bad = {parts for parts, _ in shape}
        suite = document.get("suite")
        suite = suite if isinstance(suite, dict) else {}
        defaults = self._defaults(suite, bad)
        if isinstance(suite.get("dataset"), str) and clean(bad, ("suite", "dataset")):
            if "task" in document:
                reason = "cannot be used in a manifest: its tasks come from $.suite.dataset"
                self.add(None, self.doc_path(("task",)), reason)
            raws = self._dataset_tasks(suite, bad)
        else:
            raws = self._file_tasks(document.get("task"), bad)
        tasks = [task for raw in raws if (task := self.task(raw, defaults)) is not None]
        if not raws and not self.problems:
            where = "[[task]] tables" if self.fmt == "toml" else 'a "task" list'
            self.add(None, "", f"the suite has no tasks: add {where} or a dataset")
        if self.problems:
            raise SuiteError(str(self.path), self.problem_lines())
        return Suite(defaults.name, self.path, tuple(tasks), defaults.description)

    def _rename_tasks(self, document: JsonObject) -> JsonObject:
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

    def _defaults(self, suite: JsonObject, bad: set[Parts]) -> SuiteDefaults:
        """The suite table's well-formed values; a broken one reads as unset (its
        problem is already recorded), and what depends on it is not checked further."""

        def pick(key: str, default: JsonValue = None) -> JsonValue:
            return suite[key] if key in suite and clean(bad, ("suite", key)) else default

        settings: JsonObject = {
            key: value for key in TASK_SETTINGS if (value := pick(key)) is not None
        }
        name = as_optional_text(pick("name"))
        if name is None:
            name = self.path.stem.removeprefix("bench_") or self.path.stem
            problem = None if "name" in suite else id_problem(name)
            if problem is not None:
                self.add(None, "", f"the suite name {show(name)} (from the file name) {problem}")
        elif (problem := id_problem(name)) is not None:
            self.add(None, "$.suite.name", problem)
        template = as_optional_text(
            pick("template", None if "template" in suite else DEFAULT_TEMPLATE)
        )
        known = template_fields(template)[1] if template is not None else []
        for problem in known:
            self.add(None, "$.suite.template", problem)
        suite_vars = as_table(pick("vars", {}))
        for key in suite_vars:
            if key in RESERVED_FIELDS:
                self.add(None, json_path(("suite", "vars", key)), reserved_name(key))
        marks = as_texts(pick("marks", []))
        for i, mark in enumerate(marks):
            if (problem := mark_problem(mark)) is not None:
                self.add(None, json_path(("suite", "marks", i)), problem)
        verifier = pick("verifier")
        verifier_ok = "verifier" not in suite or verifier is not None
        if verifier is not None:
            verifier = as_table(verifier)
            options = {k: v for k, v in verifier.items() if k != "kind"}
            for parts, problem in self.verifier_problems(as_text(verifier["kind"]), options):
                self.add(None, json_path(("suite", "verifier", *parts)), problem)
                verifier_ok = False
        files, files_dir = self.files(
            pick("files"), None, lambda parts: json_path(("suite", "files", *parts))
        )
        self.check_tools(None, pick("tools", []), lambda j: json_path(("suite", "tools", j)))
        sampling = self.sampling(
            pick("sampling", {}), None, lambda key: json_path(("suite", "sampling", key))
        )
        min_score = pick("min_score")
        return SuiteDefaults(
            name=name,
            description=as_text(pick("description", "")),
            settings=settings,
            sampling=sampling,
            files=files,
            files_dir=files_dir,
            min_score=None if min_score is None else as_number(min_score),
            epochs=as_whole(pick("epochs", 1)),
            reducer=as_text(pick("reducer", "mean")),
            template=template,
            template_path="$.suite.template" if "template" in suite else "",
            template_problems=known,
            renderable=clean(bad, ("suite", "vars")),
            vars=suite_vars,
            marks=marks,
            verifier=verifier,
            verifier_ok=verifier_ok,
        )

    def _file_tasks(self, tasks: JsonValue, bad: set[Parts]) -> list[RawTask]:
        # each task's problem paths, grouped in one pass over them (not one pass per task)
        by_task: dict[int, set[Parts]] = {}
        for parts in bad:
            if len(parts) > 1 and parts[0] == "task" and isinstance(parts[1], int):
                by_task.setdefault(parts[1], set()).add(parts[2:])
        return [
            RawTask(
                index=i,
                data=data,
                bad=frozenset(by_task.get(i, ())),
                locate=functools.partial(self._task_path, i),
            )
            for i, data in enumerate(tasks if isinstance(tasks, list) else [])
            if isinstance(data, dict)
        ]

    def _dataset_tasks(self, suite: JsonObject, bad: set[Parts]) -> list[RawTask]:
        """One raw task per dataset row (``suites/dataset.py`` reads and maps them)."""
        self.dataset = as_text(suite["dataset"])
        if not clean(bad, ("suite", "fields")) or not clean(bad, ("suite", "columns")):
            return []
        from pytest_agentbench.suites.dataset import dataset_rows  # (manifests only)

        found, rows, locate = dataset_rows(self.path, suite, self.max_bytes, self.find_dataset)
        for path, problem in found:
            self.add(None, path, problem)
        for index, row in enumerate(rows):
            self.lines[index] = row.line
            for path, problem in row.problems:
                self.add(index, path, problem)
        return [
            RawTask(index, row.data, row.broken, locate)
            for index, row in enumerate(rows)
            if row.data is not None
        ]
