"""docs/suite-format.md's Limits table states the numbers the code enforces: each row's
limit is rebuilt here from the constant or the schema that enforces it, so changing one
without the other fails."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from pytest_agentbench.scripted.script import MAX_COUNT, MAX_SECONDS
from pytest_agentbench.suites.build import MAX_PROBLEMS
from pytest_agentbench.suites.read import (
    DEFAULT_MAX_FILE_BYTES,
    MAX_ALIAS_GROWTH,
    MAX_TREE_ENTRIES,
)
from pytest_agentbench.suites.validate import MAX_ID_LENGTH, suite_schema
from pytest_agentbench.verifiers.checks import PYTHON_CHECKS
from pytest_agentbench.verifiers.code import PYTHON_TESTS
from pytest_agentbench.verifiers.command import COMMAND, REWARD_FILE_LIMIT
from pytest_agentbench.verifiers.json_schema import JSON_SCHEMA
from pytest_agentbench.verifiers.text import REGEX

DOC = Path(__file__).resolve().parents[2] / "docs" / "suite-format.md"


def table() -> dict[str, str]:
    """The Limits table: what → limit."""
    text = DOC.read_text(encoding="utf-8")
    section = text.split("\n## Limits\n", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0] not in ("what", "---"):
            rows[cells[0]] = cells[1]
    return rows


def commas(number: int) -> str:
    return f"{number:,}"


def span(schema: dict[str, Any]) -> str:
    """How the table writes a schema's numeric range."""
    low, high = schema.get("minimum"), schema["maximum"]
    if "exclusiveMinimum" in schema:
        text = f"> {schema['exclusiveMinimum']:g}, at most {high:g}"
    else:
        text = f"{low:g}–{high:g}" if isinstance(low, float) else f"{low}–{high}"
    if "default" in schema:
        text += f"; default {schema['default']:g}"
    return text


def test_the_limits_table_states_the_codes_numbers() -> None:
    defs = suite_schema()["$defs"]
    assert isinstance(defs, dict)
    suite = defs["suite"]["properties"]
    sampling = defs["sampling"]["properties"]
    task = defs["task"]["properties"]
    sandbox = PYTHON_TESTS.options_schema["properties"]
    # the three sandboxed verifiers share their limits
    for verifier in (PYTHON_CHECKS, COMMAND):
        for key in ("timeout_s", "memory_mb"):
            assert verifier.options_schema["properties"][key] == sandbox[key]
    choices = task["choices"]
    expected = {
        "suite file, dataset file": f"{DEFAULT_MAX_FILE_BYTES // 2**20} MB",
        "`files` directory": f"{commas(MAX_TREE_ENTRIES)} entries",
        "YAML aliases": f"{commas(MAX_ALIAS_GROWTH)} values added",
        "task id, suite name": f"{MAX_ID_LENGTH} characters",
        "`choices`": f"{choices['minItems']}–{choices['maxItems']}",
        "`repairs`": span(defs["repairs"]),
        "`timeout_s`": span(defs["timeout_s"]),
        "`max_tokens`": span(defs["max_tokens"]),
        "`epochs`": span(suite["epochs"]),
        "`max_turns`": span(defs["max_turns"]),
        "`max_tool_output`": span(defs["max_tool_output"]),
        "`pass_threshold`, `min_score`": span(defs["pass_threshold"]),
        "`sampling.temperature`": span(sampling["temperature"]),
        "`sampling.top_p`": span(sampling["top_p"]),
        "`sampling.top_k`": span(sampling["top_k"]),
        "`sampling.seed`": span(sampling["seed"]),
        "`sampling.thinking_budget`": span(sampling["thinking_budget"]),
        "scripted `delay_s`, `chunk_delay_s`, `retry_after`": f"at most {MAX_SECONDS:g}",
        "scripted `repeat`, `chunk_size`, `times`": f"at most {MAX_COUNT}",
        "`regex` verifier `timeout_s`": span(REGEX.options_schema["properties"]["timeout_s"]),
        "`json_schema` verifier `timeout_s`": span(
            JSON_SCHEMA.options_schema["properties"]["timeout_s"]
        ),
        "`python_tests`, `python_checks`, `command` `timeout_s`": span(sandbox["timeout_s"]),
        "`python_tests`, `python_checks`, `command` `memory_mb`": span(sandbox["memory_mb"]),
        "`command` reward file": f"{commas(REWARD_FILE_LIMIT)} bytes",
        "problems listed per suite": str(MAX_PROBLEMS),
    }
    assert span(suite["min_score"]) == span(defs["pass_threshold"])  # one row, both keys
    assert table() == expected


def test_the_cli_timeout_has_the_documented_range() -> None:
    """``--agentbench-timeout`` is checked with the bounds the table's note gives."""
    source = Path(__file__).resolve().parents[2] / "pytest_agentbench/config/resolve.py"
    text = source.read_text(encoding="utf-8")
    found = re.search(r'number\("agentbench timeout", timeout, float, ([\d.]+), (\d+)\)', text)
    assert found is not None
    low, high = found.groups()
    assert f"(`--agentbench-timeout`: {low}–{high})" in DOC.read_text(encoding="utf-8")
    defs = suite_schema()["$defs"]
    assert isinstance(defs, dict)
    assert float(high) == float(defs["timeout_s"]["maximum"])
