"""What the suite fuzz starts from and draws on: valid suites of every shape (plain,
choice, agent, per-task verifiers, a manifest and its records) that load without a
problem, and the bad values, keys, templates and verifier options mutations put in.
"""

from __future__ import annotations

import datetime
import math
from typing import Any

#: Valid suites every case starts from; each loads without a problem.
BASES: tuple[dict[str, Any], ...] = (
    {
        "suite": {
            "name": "arithmetic",
            "system": "Answer with the number only.",
            "template": "{input}",
            "verifier": {"kind": "number", "tolerance": 0.01},
            "repairs": 1,
            "timeout_s": 60,
            "max_tokens": 256,
            "marks": ["slow"],
        },
        "task": [
            {"id": "apples", "input": "3 + 4?", "target": "7", "scripted": ["8", "7"]},
            {"id": 2, "input": "2 + 2?", "target": 4, "vars": {"unit": "kg"}},
        ],
    },
    {
        "suite": {"verifier": {"kind": "choice"}, "feedback": "counts"},
        "task": [
            {
                "id": "planet",
                "input": "Largest planet?",
                "choices": ["Saturn", "Jupiter"],
                "target": "B",
                "scripted": [{"text": "B", "thinking": "big", "usage": {"input_tokens": 3}}],
            }
        ],
    },
    {
        "suite": {
            "name": "agent",
            "mode": "agent",
            "max_turns": 5,
            "tools": ["bash", "read_file"],
            "max_tool_output": 1000,
            "files": {"src/a.py": "x = 1\n"},
        },
        "task": [
            {
                "id": "fix",
                "input": "Fix {thing}.",
                "vars": {"thing": "a.py"},
                "verifier": {"kind": "command", "run": "true"},
                "scripted": [
                    {"text": "look", "tool_calls": [{"name": "read_file", "arguments": {}}]},
                    "done",
                ],
            }
        ],
    },
    {
        "suite": {"template": "Q: {input}\n{choices}", "pass_threshold": 0.5},
        "task": [
            {"input": "a?", "target": "a", "verifier": {"kind": "regex", "pattern": "^a$"}},
            {"input": "b?", "target": "b", "verifier": {"kind": "exact", "case_sensitive": False}},
            {
                "input": "json?",
                "target": {"a": 1},
                "verifier": {"kind": "json_schema"},
                "repair_mode": "stateless",
            },
        ],
    },
)

#: A valid manifest and its dataset records.
MANIFEST: dict[str, Any] = {
    "suite": {
        "name": "mapped",
        "dataset": "data.jsonl",
        "fields": {"id": "task_id", "input": "prompt", "target": "answer", "vars": ["fn"]},
        "template": "Complete {fn}: {input}",
        "verifier": {"kind": "exact"},
    }
}
RECORDS: tuple[dict[str, Any], ...] = (
    {"task_id": "t/1", "prompt": "def f():", "answer": "1", "fn": "f"},
    {"task_id": "t/2", "prompt": "def g():", "answer": "2", "fn": "g"},
)

DEEP = 3000
WEIRD: tuple[Any, ...] = (
    None, True, False, 0, -1, 1, 2**70, -(2**64), 1e308, -1e-308, math.nan, math.inf,
    -math.inf, 0.5, "", " ", "x" * 5000, "{", "}", "{input", "{nope}", "{0}", "{}",
    "{input!r}", "{input:>{x}}", "{input.attr}", "{input[0]}", "{{", "\x00", "../../etc",
    "/abs", "é ü 日本", "\u202e", "a\nb", [], [1, [2]], [None], {}, {"a": {"b": {}}},
    {"kind": 3}, {"": ""}, ["bash", "bash"], {"status": 529}, datetime.date(2020, 1, 1),
    datetime.datetime(2020, 1, 1, 12, 0), datetime.time(1, 2), "(", "[", "*", "(?P<",
    "a{99999999999}", "(a+)+$", {"type": 5}, {"$ref": "#/nope"}, {"type": "object",
    "properties": {"a": {"pattern": "("}}}, "os", "../evil", "a.b.c",
)  # fmt: skip
KEYS = (
    "id", "input", "target", "scripted", "choices", "system", "template", "verifier",
    "repairs", "repair_mode", "feedback", "timeout_s", "max_tokens", "pass_threshold",
    "marks", "vars", "files", "mode", "max_turns", "tools", "max_tool_output", "name",
    "description", "dataset", "fields", "min_score", "kind", "text", "thinking",
    "tool_calls", "usage", "error", "delay_s", "chunk_delay_s", "repeat", "truncate", "hang",
    "inptu", "tasks", "suite", "task", "$schema", "", "\x00",
)  # fmt: skip
#: Keys that are not strings: YAML keeps them; TOML and JSON turn them into strings.
ODD_KEYS = (1, None, True, 2.5, datetime.date(2020, 1, 1))
TEMPLATES = ("{", "{input", "{0}", "{}", "{input!z}", "{input:{x}}", "{a.b}", "{a[", "}{")
#: Options of the built-in verifiers (any kind may get any of them).
OPTIONS = (
    "pattern", "flags", "fullmatch", "tests", "module", "run", "schema", "expected",
    "tolerance", "relative", "strip", "case_sensitive", "normalize_whitespace", "timeout_s",
)  # fmt: skip
KINDS = ("exact", "number", "regex", "python_tests", "command", "json_schema", "nuber", "")
#: Names of files and folders a suite may point at (``files``, ``dataset``).
PATHS = (
    "x" * 300, "a/" * 3000, "\x00", "..", "../..", "/", "/etc", "~", "", " ", ".",
    "fixtures", "fixtures/keep.txt", "data.jsonl", "bench_case.toml", "é/ü", "a\nb",
)  # fmt: skip
