"""artifacts/jsonio.py: the text of a file a person opens, and atomic writes."""

from __future__ import annotations

import datetime
import json
import math
import os
from dataclasses import asdict
from pathlib import Path

import pytest

from pytest_agentbench.artifacts.jsonio import (
    dumps,
    write_json_atomic,
    write_text_atomic,
)
from pytest_agentbench.runner.verification import verdict_dict
from pytest_agentbench.verifiers.base import Verdict

MEMBERS: dict[str, object] = {
    "text": 'é "quoted" \\ \n\x00 <tag>',
    "none": None,
    "yes": True,
    "no": False,
    "int": 12,
    "big": 2**70,
    "negative": -3,
    "float": 0.1,
    "whole": 1.0,
    "tiny": 1e-300,
    "nested": {"a": [1, 2.5, None, {"b": "c"}], "d": {}},
    "empty": [],
    "tuple": (1, "x"),
    "when": datetime.date(2024, 1, 2),  # default=str
    "flag": False,
}


def test_each_member_is_the_compact_encoders_text() -> None:
    compact = json.JSONEncoder(
        ensure_ascii=False, allow_nan=False, default=str, separators=(",", ":")
    ).encode
    text = dumps(MEMBERS)
    lines = text.split("\n")
    assert lines[0] == "{" and lines[-1] == "}"
    expected = [f"  {compact(key)}: {compact(value)}" for key, value in MEMBERS.items()]
    assert [line.rstrip(",") for line in lines[1:-1]] == expected
    assert json.loads(text)["nested"] == MEMBERS["nested"]
    listed = dumps(list(MEMBERS.values()), indent=1).split("\n")[1:-1]
    assert [line.rstrip(",") for line in listed] == [f" {compact(v)}" for v in MEMBERS.values()]


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_nan_and_infinity_are_refused_as_members_and_within_them(bad: float) -> None:
    for data in ({"x": bad}, {"x": [1, bad]}, [bad]):
        with pytest.raises(ValueError, match="not JSON compliant"):
            dumps(data)


def test_writes_make_the_folder_only_when_asked(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b" / "result.json"
    with pytest.raises(FileNotFoundError):
        write_text_atomic(target, "x", make_parent=False)
    write_json_atomic(target, {"k": 1})
    assert json.loads(target.read_text()) == {"k": 1}
    write_text_atomic(target, "again\n", make_parent=False)  # the folder is there now
    assert target.read_text() == "again\n"
    assert sorted(os.listdir(target.parent)) == ["result.json"]  # no temp file left


def test_a_relative_path_is_written_in_the_working_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    opened: list[str] = []
    real_open = os.open

    def spy(path: str, *args: int) -> int:
        opened.append(path)
        return real_open(path, *args)

    monkeypatch.setattr(os, "open", spy)
    write_text_atomic(Path("here.json"), "{}\n")
    assert os.listdir(tmp_path) == ["here.json"]
    assert [Path(path).resolve().parent for path in opened] == [tmp_path]  # its temp file too


@pytest.mark.parametrize(
    "verdict",
    [
        Verdict(1.0),
        Verdict(0.5, {"a": 0.5}, {"n": [1, {"x": None}], "s": "t"}, "feedback", "error"),
        Verdict(0, details={"kept": (1, 2), "when": datetime.date(2024, 1, 2)}),  # asdict's way
        Verdict(0, details={1: "int key"}),
    ],
)
def test_a_verdict_becomes_what_asdict_makes_of_it(verdict: Verdict) -> None:
    made = verdict_dict(verdict)
    assert made == asdict(verdict) and list(made) == list(asdict(verdict))
    assert made["details"] is not verdict.details  # a copy, as asdict's


def test_pieces_are_written_whole_and_in_order(tmp_path: Path) -> None:
    pieces = [f"<{i}é{'x' * (i % 5000)}>" for i in range(400)]  # about 1 MB, past each batch
    target = tmp_path / "page.html"
    write_text_atomic(target, iter(pieces))
    assert target.read_text(encoding="utf-8") == "".join(pieces)
    assert os.listdir(tmp_path) == ["page.html"]
