"""Harbor's reward files read as Harbor defines them, on the host copy of
/logs/verifier: reward.txt decides, else reward.json (its reward key, else its only
key); anything else is an error verdict, never a silent 0, and never read through a
link."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pytest_agentbench.verifiers.base import Verdict
from pytest_agentbench.verifiers.harbor import KEPT_REWARD_JSON, _reward_verdict


def verdict_of(folder: Path, txt: str | None = None, table: str | None = None) -> Verdict:
    folder.mkdir(exist_ok=True)
    if txt is not None:
        (folder / "reward.txt").write_text(txt)
    if table is not None:
        (folder / KEPT_REWARD_JSON).write_text(table)
    return _reward_verdict(folder, {}, "")


@pytest.mark.parametrize(
    ("txt", "table", "reward", "metrics"),
    [
        ("1\n", None, 1.0, {}),
        ("0.25", None, 0.25, {}),
        (None, '{"reward": 0.5, "tests_passed": 3}', 0.5, {"tests_passed": 3.0}),
        (None, '{"accuracy": 0.75}', 0.75, {"accuracy": 0.75}),
        ("0", '{"reward": 1, "style": 0.2}', 0.0, {"style": 0.2}),
        ("7", None, 1.0, {}),
    ],
)
def test_a_reward_file_decides(
    tmp_path: Path, txt: str | None, table: str | None, reward: float, metrics: dict[str, float]
) -> None:
    verdict = verdict_of(tmp_path, txt, table)
    assert verdict.error is None
    assert (verdict.reward, dict(verdict.metrics)) == (reward, metrics)


@pytest.mark.parametrize(
    ("txt", "table", "words"),
    [
        (None, None, "wrote no reward"),
        ("banana", None, "reward.txt must hold one finite number; got 'banana'"),
        ("nan", None, "reward.txt must hold one finite number"),
        ("", None, "reward.txt must hold one finite number"),
        (None, '{"a": 1, "b": 0}', "names 2 rewards (a, b) and no `reward`"),
        (None, '{"reward": "high"}', "reward.json: reward must be a finite number"),
        (None, "[1]", "must be a table of named rewards"),
        (None, "{", "reward.json is not JSON"),
    ],
)
def test_anything_else_is_an_error_never_a_silent_zero(
    tmp_path: Path, txt: str | None, table: str | None, words: str
) -> None:
    verdict = verdict_of(tmp_path, txt, table)
    assert verdict.error is not None and words in verdict.error, verdict.error


def test_a_link_is_never_followed(tmp_path: Path) -> None:
    secret = tmp_path / "host-file"
    secret.write_text("1\n")
    folder = tmp_path / "verifier"
    folder.mkdir()
    os.symlink(secret, folder / "reward.txt")
    verdict = _reward_verdict(folder, {}, "")
    assert verdict.error is not None and "not a regular file" in verdict.error
