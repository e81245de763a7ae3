"""The quick schema check (suites/quick_schema.py) over the fuzz generator's broken
suites: seeded, one to four changes each to a valid suite (wrong types at any key,
missing and unknown keys, bad verifiers, replies and templates, duplicated tasks),
checked whole against the suite schema and task by task against a dataset record's. It
never accepts what jsonschema refuses; of what jsonschema accepts it leaves very little
to jsonschema (a value JSON cannot hold, which the loader reports itself, or a nesting
too deep to walk), so a valid suite seldom imports it. tests/suites/test_quick_schema.py probes
each slot and keyword on its own; this one mixes the changes."""

from __future__ import annotations

import copy
import random
import sys
from pathlib import Path
from typing import Any

import jsonschema

from pytest_agentbench.suites.validate import document_check, record_check

sys.path.insert(0, str(Path(__file__).parents[1]))  # the helpers (*_support.py)
import suite_fuzz_support as suite_fuzz


def test_mixed_changes_to_valid_suites_get_jsonschema_s_answer() -> None:
    suite_check, record = document_check(), record_check()
    suite_validator = jsonschema.Draft202012Validator(suite_check.quick.schema)
    record_validator = jsonschema.Draft202012Validator(record.quick.schema)
    rng = random.Random(20261206)
    counts = {True: 0, False: 0}
    missed = record_missed = record_valid = 0
    for number in range(3000):
        document: Any = copy.deepcopy(rng.choice(suite_fuzz.BASES))
        steps: list[str] = []
        for _ in range(rng.randint(1, 4)):
            document = suite_fuzz._mutate_tree(document, rng, steps)
        expected = suite_validator.is_valid(document)
        accepted = suite_check.quick.accepts(document)
        assert accepted <= expected, (number, steps)  # never a yes jsonschema refuses
        counts[expected] += 1
        missed += expected and not accepted
        tasks = document.get("task") if isinstance(document, dict) else None
        for task in tasks if isinstance(tasks, list) else []:
            expected = record_validator.is_valid(task)
            accepted = record.quick.accepts(task)
            assert accepted <= expected, (number, steps, task)
            record_missed += expected and not accepted
            record_valid += expected
    assert min(counts.values()) > 200, counts
    assert missed <= counts[True] // 50, (missed, counts)
    assert record_missed <= record_valid // 50, (record_missed, record_valid)
