"""A task's prompt: the fields its template uses, checked (a problem is text completing
a sentence whose subject is the template, as in ``validate.py``), and the prompt
rendered from the task's input, choices and vars."""

from __future__ import annotations

import re
import string
from collections.abc import Mapping, Sequence

from pytest_agentbench.core.jsontypes import JsonValue


def template_fields(template: str) -> tuple[list[str], list[str]]:
    """The root names of the fields a template uses (``{vars[0]}`` → ``vars``) and the
    problems no task could fix: bad syntax, ``{target}``, positional fields, and any
    field that is not a plain name (``{input.upper}``, ``{vars[0]}``, ``{input!r}``,
    ``{input:>9}``), which would format to something odd instead of the value."""
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError as exc:
        return [], [f"is not a valid template: {exc} (write {{{{ and }}}} for braces)"]
    roots: list[str] = []
    problems: list[str] = []
    for _, name, spec, conversion in parsed:
        if name is None:
            continue
        root = re.split(r"[.\[]", name, maxsplit=1)[0]
        roots.append(root)
        written = (
            "{"
            + name
            + (f"!{conversion}" if conversion else "")
            + (f":{spec}" if spec else "")
            + "}"
        )
        if root == "target":
            problems.append("uses {target}, which would give the answer away; it is not a field")
        elif root == "" or root.isdigit():
            problems.append(f"uses a positional field {{{root}}}; name a field such as {{input}}")
        elif name != root or conversion or spec:
            shown = written if len(written) <= 60 else written[:59] + "…"
            problems.append(
                f"uses {shown}, which is not a plain field name; write {{{root}}} (attribute,"
                " index, !conversion and :format are not supported)"
            )
    return roots, problems


def render_choices(choices: Sequence[str]) -> str:
    """``A. Paris`` and ``B. Rome``, one per line."""
    return "\n".join(f"{chr(ord('A') + i)}. {choice}" for i, choice in enumerate(choices))


def render_prompt(
    template: str, input: str, choices: Sequence[str], vars: Mapping[str, JsonValue]
) -> tuple[str | None, list[str]]:
    """The prompt for one task, or None with every reason it cannot be rendered.

    Fields are ``input``, ``choices`` (when the task has choices) and the vars. Choices
    the template does not place are appended after a blank line.
    """
    roots, problems = template_fields(template)
    fields: dict[str, JsonValue] = {**vars, "input": input}
    shown = render_choices(choices)
    if choices:
        fields["choices"] = shown
    for root in dict.fromkeys(roots):
        if root == "choices" and not choices:
            problems.append("uses {choices}, but the task has no choices")
        elif root not in fields and root != "target" and root and not root.isdigit():
            defined = ", ".join(sorted(fields))
            problems.append(f"uses {{{root}}}, which is not defined; defined: {defined}")
    if problems:
        return None, problems
    try:
        prompt = template.format_map(fields)
    except (ValueError, LookupError, AttributeError, TypeError) as exc:
        return None, [f"cannot be rendered: {type(exc).__name__}: {exc}"]
    if choices and "choices" not in roots:
        prompt += "\n\n" + shown
    return prompt, []
