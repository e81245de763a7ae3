"""Memory per task (docs/scale.md): what a task adds nothing to is shared with its suite,
and the values of its record that repeat from task to task are kept once per run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_agentbench.suites import load_suite
from pytest_agentbench.verifiers.text import EXACT

SUITE = """
[suite]
name = "m"
verifier = { kind = "exact" }
vars = { who = "you" }
files = { "a.txt" = "x" }
sampling = { temperature = 0.5 }

[[task]]
id = "one"
input = "q1"
target = "a"

[[task]]
id = "two"
input = "q2"
target = "a"

[[task]]
id = "own"
input = "q3"
target = "a"
vars = { who = "me" }
files = { "b.txt" = "y" }
sampling = { seed = 3 }
verifier = { case_sensitive = false }
"""


def test_tasks_share_what_they_inherit_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "bench_m.toml"
    path.write_text(SUITE)
    one, two, own = load_suite(path, {EXACT.kind: EXACT}).tasks
    for name in ("vars", "files", "sampling", "verifier"):
        assert getattr(one, name) is getattr(two, name), name
        assert getattr(own, name) is not getattr(one, name), name
    assert dict(own.vars) == {"who": "me"}
    assert dict(own.files) == {"a.txt": "x", "b.txt": "y"}
    assert (own.sampling.temperature, own.sampling.seed) == (0.5, 3)
    assert (one.sampling.temperature, one.sampling.seed) == (0.5, None)
    assert own.verifier.kind == "exact"
    assert dict(own.verifier.options) == {"case_sensitive": False}
    assert not hasattr(one, "__dict__")  # slots: no per-task attribute dict
    assert one.scripted_by_model is own.scripted_by_model  # no replies by model: one table
    # the item of the run's only model, run once, runs the task itself: no copy
    assert one.for_item("", 0, "openai-compat/x") is one
    assert (one.for_item("b", 0).model, one.for_item("", 2).epoch) == ("b", 2)


SHARED_CONFTEST = """
import json, os
from pytest_agentbench.session.items import _TASK_FILES
from pytest_agentbench.session.stash import STATE_KEY

def pytest_sessionfinish(session):
    records = session.config.stash[STATE_KEY].results.records
    out = {
        name: [getattr(a, name) is getattr(b, name) for a, b in zip(records, records[1:])]
        for name in ("repair", "verdict", "usage", "rounds", "sampling", "model")
    }
    out["owners kept"] = _TASK_FILES in session.config.stash
    pairs = [item.user_properties for item in session.items]
    out["properties"] = [
        [x is y for x, y in zip(a, b)] for a, b in zip(pairs, pairs[1:])
    ]
    out["property types"] = [type(v).__name__ for _, v in pairs[0]]
    suite_tasks = {id(t) for item in session.items for t in item.parent.tasks}
    out["task copied"] = [id(item.task) not in suite_tasks for item in session.items]
    out["equal"] = [a.repair == b.repair for a, b in zip(records, records[1:])]
    out["slots"] = not any(hasattr(r, "__dict__") for r in records)
    by_id = {r.nodeid: r for r in records}
    out["one object"] = all(item.record is by_id[item.nodeid] for item in session.items)
    beside = type(records[0]).__dict__["verifier_dir"]
    out["verifier_dir derived"] = [beside.derived(r) for r in records]
    out["verifier_dir"] = [r.verifier_dir for r in records]
    out["rollout_dir"] = [r.rollout_dir for r in records]
    with open(os.environ["SHARED_OUT"], "w") as f:
        json.dump(out, f)
"""


def test_records_keep_one_copy_of_repeating_values(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    tasks = "".join(
        f'[[task]]\nid = "t{i}"\ninput = "q"\ntarget = "a"\nscripted = ["a"]\n' for i in range(3)
    )
    pytester.makefile(
        ".toml", bench_r='[suite]\nname = "r"\nverifier = { kind = "exact" }\n' + tasks
    )
    pytester.makeconftest(SHARED_CONFTEST)
    out = pytester.path / "shared.json"
    monkeypatch.setenv("SHARED_OUT", str(out))
    # a model named provider/model: its name is made from the two for each task
    model = ("--agentbench-model", "scripted/openai")
    result = pytester.runpytest("--agentbench", *model, "-p", "no:cacheprovider")
    result.assert_outcomes(passed=3)
    shared = json.loads(out.read_text())
    assert shared["equal"] == [True, True]
    assert shared["repair"] == [True, True]
    assert shared["verdict"] == [True, True]
    assert shared["usage"] == [False, False]  # per task: not among the shared fields
    assert shared["rounds"] == [True, True]  # tried once, the same reward and tokens
    assert shared["sampling"] == [True, True]  # the empty table too
    assert shared["model"] == [True, True]  # one name string for the model's records
    assert shared["slots"] is True  # typed, slotted records: no per-record dict
    assert shared["one object"] is True  # the item's record is the run's: shared once
    assert shared["owners kept"] is False  # the clash check's map is dropped after collection
    assert shared["task copied"] == [False] * 3  # one model, once: the suite's task itself
    assert shared["properties"] == [[True] * 3] * 2  # equal user_properties pairs kept once
    assert shared["property types"] == ["str", "float", "int"]  # 1.0 stays 1.0, not 1
    # verifier_dir is not a string of its own: rebuilt from rollout_dir when read, and
    # read back as summary.json has it
    assert shared["verifier_dir derived"] == [True] * 3
    folders = [str(Path(d) / "verifier") for d in shared["rollout_dir"]]
    assert shared["verifier_dir"] == folders
    summary = json.loads((pytester.path / "agentbench-results/latest/summary.json").read_text())
    assert [t["verifier_dir"] for t in summary["tasks"]] == folders


FREEZE_CONFTEST = """
import gc, os

def pytest_sessionfinish(session):
    with open(os.environ["FROZEN_OUT"], "w") as f:
        f.write(str(gc.get_freeze_count()))
"""


@pytest.mark.slow
def test_collected_objects_are_frozen_out_of_the_gc(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What collection made lives to the end of the run: ``gc.freeze()`` after
    collection keeps the cyclic collector from scanning it again (start-up, per task).
    Without ``--agentbench`` the plugin leaves the collector alone."""
    pytester.makefile(
        ".toml",
        bench_f='[suite]\nname = "f"\n\n[[task]]\nid = "t"\ninput = "q"\ntarget = "a"\n'
        'scripted = ["a"]\n',
    )
    pytester.makepyfile(test_plain="def test_one():\n    pass\n")
    pytester.makeconftest(FREEZE_CONFTEST)
    out = pytester.path / "frozen.txt"
    monkeypatch.setenv("FROZEN_OUT", str(out))
    result = pytester.runpytest_subprocess("--agentbench", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)
    assert int(out.read_text()) > 1000
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "test_plain.py")
    result.assert_outcomes(passed=1)
    assert int(out.read_text()) == 0


def test_the_freeze_is_undone_when_the_session_ends(pytester: pytest.Pytester) -> None:
    """An in-process run (pytester, ``pytest.main`` in a loop) leaves the collector as
    it found it: nothing stays frozen after the session."""
    import gc

    pytester.makefile(
        ".toml",
        bench_u='[suite]\nname = "u"\n\n[[task]]\nid = "t"\ninput = "q"\ntarget = "a"\n'
        'scripted = ["a"]\n',
    )
    before = gc.get_freeze_count()
    try:
        result = pytester.runpytest("--agentbench", "-p", "no:cacheprovider")
        result.assert_outcomes(passed=1)
        assert gc.get_freeze_count() == before == 0
    finally:
        gc.unfreeze()
