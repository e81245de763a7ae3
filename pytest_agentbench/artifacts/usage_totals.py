"""The run's token totals, defined once: every report (terminal, Markdown, summary.json,
CTRF) shows this function's answer for the records it shows.

A record's ``usage`` is already normalised (models/usage.py): ``input`` is the uncached
input, ``cache_read`` and ``cache_write`` add to it, ``output`` includes ``reasoning``, and
``total`` is the provider's whole count. The run's totals are:

* ``input``, ``output``, ``reasoning``, ``cache_read``, ``cache_write``: the sum of the
  values the records know; None when no record knows the field (never 0 for unknown);
* ``total``: the sum of each record's total, where a record that knows no total counts
  the known parts of it (``input + cache_read + cache_write + output``). So the run's
  total is never smaller than its input plus output, the bug this module replaced;
* ``tasks``: how many records used the model (made an attempt or reported any usage);
* ``unknown``: per field, how many of those records did not know it (so a sum that misses
  some tasks says so; a ``total`` counted from parts is listed under ``total``).

A record that never reached the model (a harness error before any attempt, no usage at
all) adds nothing and is not counted as unknown.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from pytest_agentbench.core.jsontypes import JsonObject, JsonValue
from pytest_agentbench.core.task_record import TaskRecord

#: The run-level token fields, in the order reports show them.
TOTAL_FIELDS = ("input", "output", "reasoning", "cache_read", "cache_write", "total")

#: The parts that make up a whole count (reasoning is part of output).
_PARTS = ("input", "cache_read", "cache_write", "output")


def run_usage(records: Iterable[TaskRecord]) -> JsonObject:
    """The run's token totals over ``records`` (see the module docstring)."""
    sums: dict[str, int | None] = dict.fromkeys(TOTAL_FIELDS)
    unknown: dict[str, int] = dict.fromkeys(TOTAL_FIELDS, 0)
    used = 0
    for record in records:
        usage = record.usage
        values = {name: usage.get(name) for name in TOTAL_FIELDS}
        if record.attempts <= 0 and all(v is None for v in values.values()):
            continue
        used += 1
        parts = [part for name in _PARTS if (part := values[name]) is not None]
        if values["total"] is None:
            unknown["total"] += 1
            values["total"] = sum(parts) if parts else None
        for name in TOTAL_FIELDS:
            value = values[name]
            if value is None:
                if name != "total":
                    unknown[name] += 1
                continue
            sums[name] = (sums[name] or 0) + value
    counts: JsonObject = {name: count for name, count in unknown.items() if count}
    return {**sums, "tasks": used, "unknown": counts}


def whole_input(totals: Mapping[str, JsonValue]) -> int | None:
    """The whole prompt side: uncached input plus cache reads and writes (known ones);
    None when no part is known."""
    parts = [totals.get(name) for name in ("input", "cache_read", "cache_write")]
    known = [p for p in parts if isinstance(p, int)]
    return sum(known) if known else None
