"""A failure line says what was expected and what came instead, for every built-in
verifier kind, not only which metrics were 0 (``correct 0, extracted 1`` says nothing a
person can act on). One real run answers a failing task of each kind; the lines are
those of the run's records (the terminal, ``FAILED`` lines, CTRF and summary.json show
the same). Values are cut and their whitespace shown (report/mismatch.py)."""

from __future__ import annotations

import json

import pytest

from pytest_agentbench.report.mismatch import expected_got, visible

SUITE = r"""
[suite]
name = "kinds"

[[task]]
id = "exact"
input = "Capital of France?"
target = "Paris"
scripted = ["Paris. "]
verifier = { kind = "exact", strip = false }

[[task]]
id = "exact-list"
input = "Say yes."
target = ["yes", "y"]
scripted = ["no"]
verifier = { kind = "exact" }

[[task]]
id = "exact-long"
input = "Recite."
target = "The quick brown fox jumps over the lazy dog and then Paris"
scripted = ["The quick brown fox jumps over the lazy dog and then\nparis"]
verifier = { kind = "exact" }

[[task]]
id = "includes"
input = "Name the inputs of photosynthesis."
target = ["water", "carbon dioxide", "light"]
scripted = ["Plants need light  and soil."]
verifier = { kind = "includes" }

[[task]]
id = "regex"
input = "Say alpha or beta."
scripted = ["gamma"]
verifier = { kind = "regex", pattern = "^(alpha|beta)$" }

[[task]]
id = "regex-whole"
input = "Give a date."
scripted = ["on 2024-01-02\t"]
verifier = { kind = "regex", pattern = "\\d{4}-\\d\\d-\\d\\d", fullmatch = true }

[[task]]
id = "choice"
input = "Is there sound in a vacuum?"
choices = ["Yes", "No"]
target = "B"
scripted = ["A"]
verifier = { kind = "choice" }

[[task]]
id = "choice-none"
input = "Is there sound in a vacuum?"
choices = ["Yes", "No"]
target = "B"
scripted = ["It depends."]
verifier = { kind = "choice" }

[[task]]
id = "choice-both"
input = "Is there sound in a vacuum?"
choices = ["Yes", "No"]
target = "B"
scripted = ["A or B"]
verifier = { kind = "choice" }

[[task]]
id = "number"
input = "How many books?"
target = 1013
scripted = ["1240 - 315 = 925, plus 88 = 1003"]
verifier = { kind = "number" }

[[task]]
id = "number-none"
input = "How many?"
target = 7
scripted = ["seven"]
verifier = { kind = "number" }

[[task]]
id = "json-invalid"
input = "JSON please."
scripted = ["{'a': 1}"]
verifier = { kind = "json_schema", schema = { type = "object" } }

[[task]]
id = "json-schema"
input = "An invoice as JSON."
target = { total = 90 }
scripted = ['{"total": "90.00 EUR"}']
verifier.kind = "json_schema"
verifier.schema = { type = "object", properties = { total = { type = "number" } } }

[[task]]
id = "json-field"
input = "An invoice as JSON."
target = { vendor = "Rosa", total = 90 }
scripted = ['{"vendor": "Rosa", "total": 91}']
verifier = { kind = "json_schema", schema = { type = "object" } }
"""

LINES = {
    "exact": 'reward 0 — expected "Paris", got "Paris.␣"',
    "exact-list": 'reward 0 — expected one of "yes", "y", got "no"',
    "exact-long": ('reward 0 — expected "…and then Paris", got "…and then\\nparis"'),
    "includes": (
        'reward 0.333 — missing "water", "carbon dioxide" in "Plants need light␣␣and soil."'
        " (items found 1/3)"
    ),
    "regex": 'reward 0 — "gamma" has no match for /^(alpha|beta)$/',
    "regex-whole": (
        'reward 0 — "on 2024-01-02\\t" does not wholly match /\\\\d{4}-\\\\d\\\\d-\\\\d\\\\d/'
    ),
    "choice": 'reward 0 — expected B ("No"), got A ("Yes")',
    "choice-none": 'reward 0 — expected B ("No"), no option letter found in "It depends."',
    "choice-both": 'reward 0 — expected B ("No"), got an answer naming A, B',
    "number": "reward 0 — expected 1013, got 1003 (last number in the answer)",
    "number-none": 'reward 0 — expected 7, no number found in "seven"',
    "json-schema": (
        "reward 0 — $.total: '90.00 EUR' is not of type 'number' (expected 90) (fields found 0/1)"
    ),
    "json-field": "reward 0.5 — total: expected 90, got 91 (fields found 1/2)",
}


def test_each_built_in_kind_says_what_was_expected_and_what_came(
    pytester: pytest.Pytester,
) -> None:
    pytester.makefile(".toml", bench_kinds=SUITE)
    result = pytester.runpytest("--agentbench", "-p", "no:cacheprovider")
    run = (pytester.path / "agentbench-results" / "latest").resolve()
    summary = json.loads((run / "summary.json").read_text())
    lines = {t["task_id"]: t["message"] for t in summary["tasks"]}
    invalid = lines.pop("json-invalid")
    assert invalid.startswith("reward 0 — not valid JSON: got \"{'a': 1}\" (Expecting"), invalid
    assert lines == LINES
    result.stdout.fnmatch_lines(["✗ kinds::exact-list: " + LINES["exact-list"]])


def test_values_are_cut_and_their_whitespace_shown() -> None:
    assert visible("a  b\tc\n") == '"a␣␣b\\tc\\n"'
    assert visible(" lead and trail ") == '"␣lead and trail␣"'
    assert visible("x" * 50, 10) == '"' + "x" * 10 + '…"'
    assert visible({"total": 90}) == '{"total": 90}'
    assert visible(list(range(30)), 12) == "[0, 1, 2, 3…"
    assert expected_got("Paris", "Paris ") == 'expected "Paris", got "Paris␣"'
    shared = "z" * 60
    assert expected_got(shared + "A", shared + "B", 20) == (
        f'expected "…{"z" * 8}A", got "…{"z" * 8}B"'
    )
