"""Item 5's measurement: per day whether the candidate beat the served model on the eval day and
what the gate decided; the per-recipe summary counts false rejections and false promotions."""

from __future__ import annotations

from ranking.backtest.day import DayCandidate, DayRecord, RecordedMetrics, ServedModel, beat_served
from ranking.backtest.report import recipe_summary


def _hit(value: float) -> RecordedMetrics:
    return RecordedMetrics(save_hit_at_3=value)


def _served(value: float) -> ServedModel:
    return ServedModel(version="v1", trained_for=None, age_days=None, metrics=_hit(value))


def _day(day: str, candidate: float | None, served: float | None, gate: str | None) -> DayRecord:
    return DayRecord(
        day=day,
        exit_code=0 if gate != "reject" else 1,
        served=_served(served) if served is not None else None,
        candidate=DayCandidate(version="v2", metrics=_hit(candidate), scores=None)
        if candidate is not None
        else None,
        decision=gate,
        gate_decision=gate,
        candidate_beat_served=beat_served(
            _hit(candidate) if candidate is not None else None,
            _served(served) if served is not None else None,
        ),
        promoted=gate == "pass",
    )


def test_beat_served_compares_on_the_same_day_or_says_it_cannot() -> None:
    assert beat_served(_hit(0.31), _served(0.30)) is True
    assert beat_served(_hit(0.30), _served(0.30)) is False
    assert beat_served(_hit(0.30), None) is None  # day 1: nothing served
    assert beat_served(None, _served(0.30)) is None  # no candidate (failed day)


def test_the_summary_counts_false_rejections_and_false_promotions() -> None:
    records = [
        _day("d1", 0.30, None, "pass"),  # first day: not judged
        _day("d2", 0.33, 0.30, "reject"),  # a better candidate rejected
        _day("d3", 0.34, 0.30, "reject"),  # another
        _day("d4", 0.29, 0.30, "pass"),  # a worse one promoted
        _day("d5", 0.35, 0.29, "pass"),  # right call
        _day("d6", 0.28, 0.35, "reject"),  # right call
        _day("d7", None, 0.35, None),  # failed run: not judged
    ]
    calls = recipe_summary(records).gate_calls.model_dump()
    assert calls == {
        "judged_days": 5,
        "candidate_beat_served": 3,
        "rejected_a_better_candidate": 2,
        "promoted_a_worse_candidate": 1,
    }


def test_the_gate_decision_counts_not_a_forced_promotion() -> None:
    forced = _day("d2", 0.29, 0.30, "reject").model_copy(update={"promoted": True, "decision": "pass"})
    calls = recipe_summary([forced]).gate_calls
    assert calls.promoted_a_worse_candidate == 0 and calls.judged_days == 1
