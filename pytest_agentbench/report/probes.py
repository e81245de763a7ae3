"""Bounded readers for a rollout's verifier artifacts: ``reward.json``, a judge's
``judge.json`` and ``test-stdout.txt`` (the inner ``ctrf.json`` has its own reader,
:mod:`pytest_agentbench.report.ctrf_scan`).

Each reader takes a path and returns plain data, or None when the file is too big to trust
or says nothing useful; :mod:`pytest_agentbench.report.evidence` turns that data into a
failure line. Every read is bounded:

- ``reward.json``: at most :data:`READ_CAP` bytes; a bigger file is skipped, not truncated
  (a cut JSON document is not a smaller JSON document);
- ``judge.json``: at most :data:`READ_CAP` bytes, like ``reward.json`` (a bigger one
  falls back to the rationale ``reward.json`` keeps in its details);
- ``test-stdout.txt``: its last :data:`READ_CAP` bytes (pytest's summary is at the end).

The readers may raise ``OSError`` or ``ValueError`` on unreadable input; the evidence miner
catches everything and falls through to its next tier.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from pytest_agentbench.core.jsontypes import JsonObject

READ_CAP = 64 * 1024


def read_reward_json(path: Path) -> JsonObject | None:
    """The parsed ``reward.json`` object; None when it is bigger than :data:`READ_CAP`
    (skipped, never truncated) or not a JSON object."""
    with path.open("rb") as file:
        data = file.read(READ_CAP + 1)
    if len(data) > READ_CAP:
        return None
    value = json.loads(data.decode("utf-8", errors="replace"))
    return value if isinstance(value, dict) else None


_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_COUNT = r"\d+ (?:failed|passed|skipped|deselected|xfailed|xpassed|warnings?|errors?|rerun)"
_SUMMARY = re.compile(
    rf"^=*\s*((?:{_COUNT})(?:, {_COUNT})*|no tests ran)\s+in\s+\d+(?:\.\d+)?s\b.*$"
)
_SHORT_LINE = re.compile(r"^(?:FAILED|ERROR) \S.*$")
_SECTION = re.compile(r"^_+ (ERROR (?:collecting|at setup of|at teardown of) .+?) _+$")
_PROGRESS = re.compile(r"^(\S+::\S+) (FAILED|ERROR)\b")


def stdout_evidence(path: Path) -> str | None:
    """From the last :data:`READ_CAP` bytes of a pytest run's stdout: the last summary line
    (``1 failed, 2 passed, 1 error``, timing dropped), else the last ``FAILED …`` or
    ``ERROR …`` line (short test summary, ``ERROR collecting …`` / ``ERROR at setup of …``
    section headers, or verbose progress). None when neither is there."""
    with path.open("rb") as file:
        file.seek(0, 2)
        size = file.tell()
        file.seek(max(0, size - READ_CAP))
        data = file.read(READ_CAP)
    lines = data.decode("utf-8", errors="replace").splitlines()
    if size > READ_CAP and lines:
        lines = lines[1:]
    summary = failure = None
    for raw in lines:
        line = _ANSI.sub("", raw).strip()
        if (match := _SUMMARY.match(line)) is not None:
            summary = match.group(1)
        elif (match := _SECTION.match(line)) is not None:
            failure = match.group(1)
        elif _SHORT_LINE.match(line):
            failure = line
        elif (match := _PROGRESS.match(line)) is not None:
            failure = f"{match.group(2)} {match.group(1)}"
    return summary or failure


def judge_rationale(directory: Path) -> str | None:
    """What the judge said of a judged answer it did not pass: the rationale of its
    lowest-rewarded sample in ``judge.json`` (``judge: <rationale>``, with ``(k of n
    samples)`` when several disagreed), else the rationale ``reward.json`` keeps in its
    details. None for an answer no judge graded, or a judge that gave no rationale."""
    path = directory / "judge.json"
    data = read_reward_json(path) if path.is_file() else None
    samples = data.get("samples") if data is not None else None
    graded: list[tuple[float, str]] = []
    for sample in samples if isinstance(samples, list) else []:
        if not isinstance(sample, dict):
            continue
        reward, rationale = sample.get("reward"), sample.get("rationale")
        if isinstance(reward, int | float) and isinstance(rationale, str) and rationale.strip():
            graded.append((float(reward), rationale))
    if graded:
        lowest = min(reward for reward, _ in graded)
        worst = [text for reward, text in graded if reward == lowest]
        note = f" ({len(worst)} of {len(graded)} samples)" if len(graded) > 1 else ""
        return f"judge: {worst[0]}{note}"
    kept_path = directory / "reward.json"
    kept = read_reward_json(kept_path) if kept_path.is_file() else None
    details = kept.get("details") if kept is not None else None
    if isinstance(details, dict) and details.get("extraction") == "judge":
        rationale = details.get("rationale")
        if isinstance(rationale, str) and rationale.strip():
            return f"judge: {rationale}"
    return None
