"""A model comparison within a family is called significant by its Holm-adjusted p, not
its own (docs/comparing-models.md): three models, one pair whose own p lies between
α/m and α — significant alone, not once adjusted over the three pairs."""

from __future__ import annotations

from records_support import make_record

from pytest_agentbench.artifacts.lineup import model_comparisons
from pytest_agentbench.core.task_record import TaskRecord

TASKS = 20


def _records(model: str, fails: int) -> list[TaskRecord]:
    return [
        make_record(
            model=model,
            task_id=f"t{i:02d}",
            nodeid=f"bench_s.toml::t{i:02d}[{model}]",
            outcome="failed" if i < fails else "passed",
            reward=0.0 if i < fails else 1.0,
        )
        for i in range(TASKS)
    ]


def test_a_comparison_is_significant_by_its_holm_adjusted_p() -> None:
    records = [*_records("good", 0), *_records("weak", 6), *_records("twin", 0)]
    rows = {(r["first"], r["second"]): r for r in model_comparisons(records) or []}
    pair = rows["good", "weak"]
    alpha, family = 0.05, 3
    assert pair["family"] == family
    own, adjusted = pair["p_value"], pair["p_adjusted"]
    assert alpha / family < own < alpha, own  # significant alone …
    assert isinstance(adjusted, float) and adjusted > alpha, adjusted  # … not in the family
    assert pair["significant"] is False
    assert pair["verdict"] not in ("better", "worse"), pair["verdict"]
    assert "Holm-adjusted p=" in pair["words"]
    alone = model_comparisons([*_records("good", 0), *_records("weak", 6)]) or []
    assert alone[0]["significant"] is True and alone[0]["verdict"] == "better"
