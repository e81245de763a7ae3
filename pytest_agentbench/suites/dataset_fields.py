"""The field specs of a manifest (``suite.fields``): each task key a dataset record can
fill, where its value comes from (a field name, or a table with ``field`` or ``template``
and optional ``after`` and ``join``), the problems of a broken spec, and one record made
into a task table (:class:`FieldMap`). The rows themselves are suites/dataset.py's.
"""

from __future__ import annotations

import json
import string
from collections.abc import Iterator, Mapping

from pytest_agentbench.core.fastclass import dataclass
from pytest_agentbench.core.jsontypes import JsonObject, JsonValue
from pytest_agentbench.suites.validate import Parts, json_path, show, type_name

#: The task keys a dataset record can fill, each from the field ``fields`` maps it to.
DATASET_KEYS = ("id", "input", "target", "choices", "scripted", "oracle")


def spec_problems(fields: Mapping[str, JsonValue]) -> list[tuple[Parts, str]]:
    """What is wrong with the field specs of ``fields`` (its structure already checked by
    the schema), as paths under ``suite.fields``."""
    found: list[tuple[Parts, str]] = []
    for parts, spec in _specs(fields):
        if not isinstance(spec, dict):
            continue
        if ("field" in spec) == ("template" in spec):
            found.append((parts, 'must have one of "field" or "template"'))
        elif isinstance(template := spec.get("template"), str):
            found.extend(((*parts, "template"), text) for text in _template_problems(template))
    return [(("suite", "fields", *parts), text) for parts, text in found]


def _specs(fields: Mapping[str, JsonValue]) -> Iterator[tuple[Parts, JsonValue]]:
    for key in DATASET_KEYS:
        spec = fields.get(key)
        if isinstance(spec, list):
            yield from (((key, i), item) for i, item in enumerate(spec))
        elif spec is not None:
            yield (key,), spec
    for group in ("vars", "verifier"):
        table = fields.get(group)
        if isinstance(table, dict):
            yield from (((group, name), spec) for name, spec in table.items())


def _template_problems(template: str) -> list[str]:
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError as exc:
        return [f"is not a valid template: {exc} (write {{{{ and }}}} for braces)"]
    return [
        f"uses {{{name}}}, which is not a plain field name; write {{field}}"
        for _, name, spec_, conversion in parsed
        if name is not None and (not name.isidentifier() or spec_ or conversion)
    ]


class FieldMap:
    """Turns one dataset record into a task table through ``suite.fields``."""

    def __init__(self, fields: Mapping[str, JsonValue]) -> None:
        self.fields = fields
        names, options = fields.get("vars", []), fields.get("verifier")
        #: A var's field spec by the var's name (a list of names: each its own field).
        self.vars: dict[str, JsonValue] = (
            {str(name): name for name in names}
            if isinstance(names, list)
            else names
            if isinstance(names, dict)
            else {}
        )
        self.options: dict[str, JsonValue] = options if isinstance(options, dict) else {}

    def task(self, record: Mapping[str, JsonValue]) -> tuple[JsonObject, list[tuple[Parts, str]]]:
        """The task table made from ``record``, and the problems at its task keys: a
        field the record lacks (``input``, a mapped field, a var, a verifier option), a
        value a spec cannot use."""
        task: JsonObject = {}
        missing: list[tuple[Parts, str]] = []

        def fill(parts: Parts, spec: JsonValue, where: str, required: bool) -> None:
            value = _value(spec, record, where, required)
            if not isinstance(value, _Missing):
                _put(task, parts, value)
            elif value.problem is not None:
                missing.append((parts, value.problem))

        for key in DATASET_KEYS:
            spec = self.fields.get(key, key)
            required = key == "input" or key in self.fields
            if isinstance(spec, list):
                values = [_value(item, record, f"fields.{key}", True) for item in spec]
                if problems := [v.problem for v in values if isinstance(v, _Missing)]:
                    missing.extend(((key,), str(p)) for p in problems)
                else:
                    task[key] = [v for v in values if not isinstance(v, _Missing)]
                continue
            fill((key,), spec, f"fields.{key}", required)
        for name, spec in self.vars.items():
            fill(("vars", name), spec, "fields.vars", True)
        for name, spec in self.options.items():
            fill(("verifier", name), spec, f"fields.verifier.{name}", True)
        scripted = task.get("scripted")
        if isinstance(scripted, str):
            task["scripted"] = [scripted]  # one reply, written as a plain string
        elif "scripted" in task and not isinstance(scripted, list):
            expected = "must be a string (one reply) or a list of replies"
            source = show(_source(self.fields.get("scripted", "scripted")) or "scripted")
            got = f"{type_name(task.pop('scripted'))} {show(scripted)}"
            missing.append((("scripted",), f"the field {source} {expected}; got {got}"))
        return task, missing

    def locate(self, parts: Parts) -> str:
        """Where in a record (or in the manifest) a path inside a task table came from."""
        if not parts:
            return "$"
        head, rest = parts[0], parts[1:]
        if head in ("vars", "verifier") and rest:
            table = self.vars if head == "vars" else self.options
            spec, rest = table.get(str(rest[0]), rest[0]), rest[1:]
            here: Parts = ("suite", "fields", head, parts[1])
        else:
            spec = self.fields.get(str(head), head)
            here = ("suite", "fields", head)
            if isinstance(spec, list) and rest and isinstance(rest[0], int) and rest[0] < len(spec):
                spec, rest, here = spec[rest[0]], rest[1:], (*here, rest[0])
        source = _source(spec)
        return json_path((source, *rest)) if source is not None else json_path(here)


@dataclass(frozen=True)
class _Missing:
    """A field spec's value the record does not give: ``problem`` says why (None when an
    optional field is simply not there)."""

    problem: str | None


def _source(spec: JsonValue) -> str | None:
    """The record field a spec reads (None for a template: it reads several)."""
    if isinstance(spec, str):
        return spec
    if isinstance(spec, dict) and isinstance(spec.get("field"), str):
        return str(spec["field"])
    return None


def _put(task: JsonObject, parts: Parts, value: JsonValue) -> None:
    if len(parts) == 1:
        task[str(parts[0])] = value
    elif isinstance(table := task.setdefault(str(parts[0]), {}), dict):
        table[str(parts[1])] = value


def _value(
    spec: JsonValue, record: Mapping[str, JsonValue], where: str, required: bool
) -> JsonValue | _Missing:
    """The value ``spec`` reads from ``record``, or why there is none."""
    table: Mapping[str, JsonValue] = spec if isinstance(spec, dict) else {"field": spec}
    value: JsonValue
    if "template" in table:
        value, problem = _render(str(table["template"]), record, where)
        if problem is not None:
            return _Missing(problem)
    else:
        name = str(table["field"])
        if name not in record:
            problem = f"the record has no field {show(name)} ({where})" if required else None
            return _Missing(problem)
        value = record[name]
    join = table.get("join")
    if isinstance(join, str) and isinstance(value, list):
        value = join.join(_text(item) for item in value)
    after = table.get("after")
    if isinstance(after, str):
        what = f"the field {show(table['field'])}" if "field" in table else "the template"
        if not isinstance(value, str):
            return _Missing(
                f"{what} must be text to look for {show(after)}; got {type_name(value)}"
            )
        if after not in value:
            return _Missing(f"{what} has no {show(after)} ({where}.after)")
        value = value.rsplit(after, 1)[1].strip()
    return value


def _render(template: str, record: Mapping[str, JsonValue], where: str) -> tuple[str, str | None]:
    names = [name for _, name, _, _ in string.Formatter().parse(template) if name]
    absent = [name for name in dict.fromkeys(names) if name not in record]
    if absent:
        shown = ", ".join(show(name) for name in absent)
        return "", f"the record has no field {shown} ({where} template)"
    return template.format_map({name: _text(record[name]) for name in names}), None


def _text(value: JsonValue) -> str:
    """A record value as template text: strings as they are, a list one item per line,
    null as nothing, anything else as JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(_text(item) for item in value)
    if value is None:
        return ""
    return json.dumps(value, ensure_ascii=False)
