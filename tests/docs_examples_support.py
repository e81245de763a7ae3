"""Fenced blocks of README.md and docs/*.md, sorted into the kinds the docs test checks.

Why: an example that drifts from the code misleads every reader who copies it, and
nobody notices until they do. ``tests/package/test_docs_examples.py`` checks every block; this
module finds the blocks and says what each one is:

- ``suite``: a TOML/YAML/JSON suite (``suite`` or ``task`` at the top), loaded by the
  real loader; ``suite-part``: a piece of one (a ``verifier`` table, ``[[task.scripted]]``
  tables) that the test completes into a suite;
- ``agent``: an agent file (``--agentbench-agent``: one agent table, ``kind`` at the
  top), read by the loader a run uses;
- ``script``: a scripted-provider script file (``default`` / ``scripts``);
- ``workflow``: a GitHub Actions file, whose ``run`` steps are shell commands;
- ``request``: a JSON request body with ``[...]`` placeholders;
- ``python``: a snippet executed as is; ``plugin``: one defining ``@pytest.hookimpl``
  hooks, loaded into a real ``pytest --agentbench`` run;
- ``ini``: a pytest ini file (``[pytest]`` first), read by a real run;
- ``shell``: command lines (``pytest --agentbench …``, ``python -m pytest_agentbench …``);
- ``output``: expected output, compared with what a real run prints;
- ``invalid``: a TOML/JSON/YAML block that does not parse (always a failure);
- ``fragment``: marked ``<!-- example: fragment … -->`` directly above the fence: not
  runnable on purpose, skipped and counted;
- ``package``: marked ``<!-- example: package file <name> … -->``: a file of the example
  plugin package that ``tests/package/test_plugin_package.py`` builds and pip-installs.

A mark ``<!-- example: output of … -->`` says which run produces an output block.
"""

from __future__ import annotations

import json
import re
import shlex
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
MARK = re.compile(r"^<!--\s*example:\s*(.*?)\s*-->$")
FENCE = re.compile(r"^```(\S*)\s*$")
#: First words of a line that make an unlabelled block a shell block.
COMMANDS = {
    "pytest",
    "python",
    "python3",
    "pip",
    "export",
    "curl",
    "echo",
    "mv",
    "cd",
    "bash",
    "npm",
}
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


@dataclass(frozen=True)
class Block:
    """One fenced block: where it is, its info string, its text and its mark (if any)."""

    doc: str
    line: int
    lang: str
    text: str
    mark: str | None

    @property
    def id(self) -> str:
        return f"{self.doc}:{self.line}"

    @property
    def first(self) -> str:
        return next((line for line in self.text.splitlines() if line.strip()), "")


def doc_paths() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def blocks(path: Path) -> Iterator[Block]:
    """The fenced blocks of one markdown file, in order."""
    doc = path.relative_to(ROOT).as_posix()
    lines = path.read_text(encoding="utf-8").splitlines()
    index = 0
    while index < len(lines):
        match = FENCE.match(lines[index])
        if not match:
            index += 1
            continue
        start = index
        end = next((j for j in range(start + 1, len(lines)) if lines[j].strip() == "```"), None)
        if end is None:
            raise ValueError(f"{doc}:{start + 1}: the fence opened here is never closed")
        above = next((lines[j] for j in range(start - 1, -1, -1) if lines[j].strip()), "")
        mark = MARK.match(above.strip())
        text = "\n".join(lines[start + 1 : end]) + "\n"
        yield Block(doc, start + 1, match.group(1), text, mark.group(1) if mark else None)
        index = end + 1


def all_blocks() -> list[Block]:
    return [block for path in doc_paths() for block in blocks(path)]


def parse_data(block: Block) -> Any:
    """A data block's value (TOML, JSON or YAML); raises ValueError when it is invalid."""
    text = block.text.replace("[...]", "[]")
    if block.lang == "toml":
        return tomllib.loads(text)
    if block.lang == "json":
        return json.loads(text)
    import yaml

    return yaml.safe_load(text)


def kind(block: Block) -> str:
    """What the block is (see the module docstring); ``unknown`` when nothing fits."""
    if block.mark is not None:
        if block.mark.startswith("fragment"):
            return "fragment"
        if block.mark.startswith("output of"):
            return "output"
        if block.mark.startswith("package file "):
            return "package"
    if block.lang == "python":
        return "plugin" if "@pytest.hookimpl" in block.text else "python"
    if block.lang == "ini" and block.first.strip() == "[pytest]":
        return "ini"
    if block.lang in ("toml", "json", "yaml"):
        try:
            value = parse_data(block)
        except Exception:  # reported by the docs test, with the parser's message
            return "invalid"
        if not isinstance(value, dict):
            return "unknown"
        if "jobs" in value:
            return "workflow"
        if set(value) <= {"verifier", "files"} or block.first.startswith("[[task.scripted]]"):
            return "suite-part"
        if "suite" in value or "task" in value:
            return "suite"
        if value.get("kind") in ("command", "acp", "python"):
            return "agent"
        if "default" in value or "scripts" in value:
            return "script"
        if isinstance(value.get("models"), dict):
            return "prices"
        if "model" in value:
            return "request"
        return "unknown"
    if block.lang in ("bash", "sh", "") and is_shell(block.text):
        return "shell"
    return "output" if block.lang == "" else "unknown"


def logical_lines(text: str) -> list[str]:
    """Lines with backslash continuations joined, comments and blanks dropped."""
    joined = re.sub(r"\\\n", " ", text)
    return [
        line for line in joined.splitlines() if line.strip() and not line.lstrip().startswith("#")
    ]


def is_shell(text: str) -> bool:
    """True when every line starts like a command: a known program, a path to one, or an
    environment assignment."""
    for line in logical_lines(text):
        word = line.split()[0]
        if word in COMMANDS or word.startswith(("/", ".venv/")) or _ASSIGNMENT.match(word):
            continue
        return False
    return True


def commands(text: str) -> list[list[str]]:
    """The simple commands of a shell text, each as words without its leading
    ``VAR=value`` assignments; ``[--opt value]`` (optional parts) lose their brackets.
    Words inside ``$( … )`` are not commands of their own and are dropped."""
    found: list[list[str]] = []
    for line in logical_lines(text):
        line = _drop_substitutions(line)
        lexer = shlex.shlex(line, posix=True, punctuation_chars="|&;<>")
        lexer.whitespace_split = True
        lexer.commenters = "#"
        current: list[str] = []
        redirect = False
        for token in lexer:
            if token in ("&&", "||", ";", "|", "&"):
                found.append(current)
                current = []
            elif set(token) <= set("<>&"):
                redirect = True
            elif redirect:
                redirect = False
            else:
                optional = token.startswith("[") or token.count("]") > token.count("[")
                current.append(token.strip("[]") if optional else token)
        found.append(current)
    result = []
    for words in found:
        while words and _ASSIGNMENT.match(words[0]):
            words = words[1:]
        if words:
            result.append(words)
    return result


def _drop_substitutions(line: str) -> str:
    """``line`` with each ``$( … )`` (nested parentheses included) replaced by ``X``."""
    out, depth, index = [], 0, 0
    while index < len(line):
        if line.startswith("$(", index):
            depth += 1
            index += 2
            if depth == 1:
                out.append("X")
            continue
        char = line[index]
        if depth and char == "(":
            depth += 1
        elif depth and char == ")":
            depth -= 1
        elif not depth:
            out.append(char)
        index += 1
    return "".join(out)


def assignments(text: str) -> list[str]:
    """Names of the environment variables a shell text sets before a command."""
    return re.findall(r"(?:^|\s)([A-Z][A-Z0-9_]*)=", text)


def pytest_args(words: list[str]) -> list[str] | None:
    """The arguments of a pytest invocation (``pytest …``, ``python -m pytest …``,
    ``.venv/bin/python -m pytest …``); None when the command is something else."""
    program = words[0].rsplit("/", 1)[-1]
    if program == "pytest":
        return words[1:]
    if program.startswith("python") and words[1:3] == ["-m", "pytest"]:
        return words[3:]
    return None


def module_cli(words: list[str]) -> tuple[str, list[str]] | None:
    """``(module, args)`` of a ``python -m pytest_agentbench…`` command, else None."""
    program = words[0].rsplit("/", 1)[-1]
    if program.startswith("python") and words[1:2] == ["-m"] and len(words) > 2:
        return (words[2], words[3:]) if words[2].startswith("pytest_agentbench") else None
    return None
