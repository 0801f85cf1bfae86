"""Gate decisions on constructed score sets: pass, each failing check, unfair, first run."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pandas as pd
import pytest
from scoresets import make_eval_day, noisy, with_scores

from ranking.core.errors import RankerError
from ranking.evaluation.metrics import save_hit_at_k
from ranking.gate.checks import (
    GateConfig,
    GateInputError,
    LeakEvidence,
    TrainingWindow,
    random_ranking_hit_at_k,
    run_gate,
)

EVAL_DAY = dt.date(2026, 1, 21)
# these fixtures' candidate is far better than its champion (noise 0.3 vs 1.5): above the leakage
# limit, which has its own test
FAR_BETTER_OK = GateConfig(max_lift=1.0)
FAIR = {
    "eval_date": EVAL_DAY,
    "candidate_window": TrainingWindow(dt.date(2026, 1, 1), EVAL_DAY),
    "champion_window": TrainingWindow(dt.date(2025, 12, 31), dt.date(2026, 1, 20)),
}


@pytest.fixture(scope="module")
def day() -> tuple[pd.DataFrame, np.ndarray]:
    return make_eval_day(requests=600, slate=10, seed=7)


def check(report, name):  # type: ignore[no-untyped-def]
    return next(c for c in report.checks if c.name == name)


def test_better_candidate_passes_with_every_check_reported(day) -> None:  # type: ignore[no-untyped-def]
    frame, p = day
    report = run_gate(
        with_scores(frame, noisy(p, 0.3, 1)), with_scores(frame, noisy(p, 1.5, 2)), FAR_BETTER_OK, **FAIR
    )
    assert report.decision == "pass", report.failed_checks
    names = [c.name for c in report.checks]
    assert names == [
        "scores_finite",
        "scores_not_constant",
        "calibration",
        "save_hit_at_3_floor",
        "window_age",
        "fair_comparison",
        "save_hit_at_3_change",
        "auc_drop",
        "ne_rise",
        "leakage",
    ]
    assert report.relative_change is not None and report.relative_change > 0
    assert report.ci is not None and report.ci[0] < report.relative_change < report.ci[1]
    body = report.to_dict()
    assert (
        body["failed_checks"] == [] and body["champion"]["save_hit_at_3"] < body["candidate"]["save_hit_at_3"]
    )
    for c in body["checks"]:
        assert set(c) == {"name", "passed", "value", "threshold", "detail", "ci", "warning"} and c["detail"]
    for name in ("save_hit_at_3_change", "auc_drop", "ne_rise"):  # non-inferiority on the CIs by default
        c = check(report, name)
        assert c.ci is not None and c.value == (c.ci[0] if name == "save_hit_at_3_change" else c.ci[1])


def test_first_run_applies_only_absolute_checks(day) -> None:  # type: ignore[no-untyped-def]
    frame, p = day
    report = run_gate(with_scores(frame, noisy(p, 0.3, 1)), None, eval_date=EVAL_DAY)
    assert report.decision == "pass"
    assert [c.name for c in report.checks] == [
        "scores_finite",
        "scores_not_constant",
        "calibration",
        "save_hit_at_3_floor",
    ]
    assert report.champion is None and report.relative_change is None and report.ci is None


def test_model_no_better_than_random_fails_the_floor(day) -> None:  # type: ignore[no-untyped-def]
    frame, _ = day
    rng = np.random.default_rng(3)
    random_scores = rng.uniform(0.03, 0.09, size=len(frame))  # calibrated-ish, but ranks at random
    report = run_gate(with_scores(frame, random_scores), None)
    floor = check(report, "save_hit_at_3_floor")
    assert report.decision == "reject" and report.failed_checks == ["save_hit_at_3_floor"]
    assert floor.threshold == pytest.approx(
        random_ranking_hit_at_k(frame["request_id"], frame["saved"]) * 1.05
    )
    assert report.to_dict()["candidate"]["random_save_hit_at_3"] == pytest.approx(0.3)
    explicit = run_gate(with_scores(frame, noisy(day[1], 0.3, 1)), None, GateConfig(min_save_hit_at_3=0.99))
    assert explicit.failed_checks == ["save_hit_at_3_floor"]


def test_worse_candidate_fails_the_change_check(day) -> None:  # type: ignore[no-untyped-def]
    frame, p = day
    report = run_gate(with_scores(frame, noisy(p, 1.5, 2)), with_scores(frame, noisy(p, 0.3, 1)), **FAIR)
    assert report.decision == "reject"
    change = check(report, "save_hit_at_3_change")
    assert (
        not change.passed
        and change.value is not None
        and change.value < -GateConfig().tolerance
        and change.threshold == -GateConfig().tolerance
    )
    # a tolerance wider than the drop lets it through the change check
    wide = run_gate(
        with_scores(frame, noisy(p, 1.5, 2)),
        with_scores(frame, noisy(p, 0.3, 1)),
        GateConfig(tolerance=0.9, max_auc_drop=1.0, max_ne_rise=1.0),
        **FAIR,
    )
    assert wide.decision == "pass"


def test_same_ranking_but_worse_auc_fails_the_guardrail(day) -> None:  # type: ignore[no-untyped-def]
    """Within each request the order is the champion's (same HIT@3), but across requests the
    scores are shuffled, so AUC drops: only the AUC guardrail can catch it."""
    frame, p = day
    champ = noisy(p, 0.3, 1)
    codes = frame["request_id"].factorize()[0]
    offsets = np.random.default_rng(5).uniform(-2.0, 2.0, size=codes.max() + 1)[codes]
    logit = np.log(champ / (1 - champ)) + offsets
    cand = 1 / (1 + np.exp(-logit))
    cand *= champ.mean() / cand.mean()  # keep calibration sane
    report = run_gate(with_scores(frame, cand), with_scores(frame, champ), **FAIR)
    assert report.relative_change == pytest.approx(0.0)
    assert check(report, "save_hit_at_3_change").ci == [0.0, 0.0]  # same order in every request
    assert "auc_drop" in report.failed_checks and report.decision == "reject"


def test_same_ranking_but_worse_log_loss_fails_the_ne_guardrail(day) -> None:  # type: ignore[no-untyped-def]
    frame, p = day
    champ = noisy(p, 0.3, 1)
    logit = np.log(champ / (1 - champ))
    cand = 1 / (1 + np.exp(-(0.35 * logit - 1.8)))  # monotone: same order, same AUC, flattened
    report = run_gate(
        with_scores(frame, cand), with_scores(frame, champ), GateConfig(calibration_high=3.0), **FAIR
    )
    assert check(report, "auc_drop").value == pytest.approx(0.0, abs=1e-12)
    assert report.failed_checks == ["ne_rise"]


def test_sanity_checks_catch_broken_models(day) -> None:  # type: ignore[no-untyped-def]
    frame, p = day
    good = noisy(p, 0.3, 1)
    nan = good.copy()
    nan[::50] = np.nan
    assert "scores_finite" in run_gate(with_scores(frame, nan), None).failed_checks
    constant = run_gate(with_scores(frame, np.full(len(frame), 0.06)), None)
    assert {"scores_not_constant", "save_hit_at_3_floor"} <= set(constant.failed_checks)
    # a constant model's HIT@3 is exactly the random-ranking expectation (ties share places)
    assert constant.candidate["save_hit_at_3"] == pytest.approx(constant.candidate["random_save_hit_at_3"])
    over = run_gate(with_scores(frame, np.clip(good * 3.0, 0, 1)), None)
    assert over.failed_checks == ["calibration"]
    assert check(over, "calibration").threshold == [0.5, 2.0]


def test_unfair_comparison_fails_closed_unless_overridden(day) -> None:  # type: ignore[no-untyped-def]
    frame, p = day
    cand, champ = with_scores(frame, noisy(p, 0.3, 1)), with_scores(frame, noisy(p, 1.5, 2))
    trained_on_eval_day = TrainingWindow(dt.date(2026, 1, 2), dt.date(2026, 1, 22))
    unfair = {**FAIR, "champion_window": trained_on_eval_day}
    report = run_gate(cand, champ, FAR_BETTER_OK, **unfair)
    assert report.failed_checks == ["fair_comparison"]
    assert "champion was trained on the eval day 2026-01-21" in check(report, "fair_comparison").detail
    overridden = run_gate(cand, champ, GateConfig(allow_unfair=True, max_lift=1.0), **unfair)
    assert overridden.decision == "pass" and "overridden" in check(overridden, "fair_comparison").detail
    unknown = run_gate(
        cand, champ, FAR_BETTER_OK, eval_date=EVAL_DAY, candidate_window=FAIR["candidate_window"]
    )
    assert unknown.failed_checks == ["fair_comparison"]
    assert "champion's training window is unknown" in check(unknown, "fair_comparison").detail


def test_the_ci_rule_rejects_an_uncertain_tie_the_point_rule_passes(day) -> None:  # type: ignore[no-untyped-def]
    frame, p = day
    cand, champ = with_scores(frame, noisy(p, 0.8, 17)), with_scores(frame, noisy(p, 0.8, 117))
    loose = {"tolerance": 0.05, "max_auc_drop": 1.0, "max_ne_rise": 1.0}
    point = run_gate(cand, champ, GateConfig(rule="point", **loose), **FAIR)  # type: ignore[arg-type]
    assert point.decision == "pass" and point.ci is not None and point.ci[0] < -0.05
    assert "CI reported" in check(point, "save_hit_at_3_change").detail
    ci = run_gate(cand, champ, GateConfig(rule="ci", **loose), **FAIR)  # type: ignore[arg-type]
    assert ci.failed_checks == ["save_hit_at_3_change"]
    assert check(ci, "save_hit_at_3_change").value == ci.ci[0]  # type: ignore[index]


def test_frames_from_different_days_cannot_be_compared(day) -> None:  # type: ignore[no-untyped-def]
    frame, p = day
    cand = with_scores(frame, noisy(p, 0.3, 1))
    with pytest.raises(
        GateInputError, match="not scored on the same impressions: 10 rows only in the candidate"
    ):
        run_gate(cand, cand.iloc[10:], **FAIR)
    flipped = cand.copy()
    flipped.loc[:4, "saved"] = 1 - flipped.loc[:4, "saved"]
    with pytest.raises(GateInputError, match="disagree on the label of 5 impressions"):
        run_gate(cand, flipped, **FAIR)
    with pytest.raises(GateInputError, match=r"lack columns \['score'\]"):
        run_gate(cand.drop(columns="score"), None)
    with pytest.raises(GateInputError, match="duplicate"):
        run_gate(pd.concat([cand, cand.iloc[:3]]), None)
    with pytest.raises(GateInputError, match="no saves"):
        run_gate(cand.assign(saved=0), None)


def test_gate_config_is_validated() -> None:
    with pytest.raises(
        RankerError, match="invalid gate configuration: tolerance: Input should be less than 1"
    ):
        GateConfig(tolerance=1.5)
    with pytest.raises(RankerError, match="calibration_low: Input should be less than or equal to 1"):
        GateConfig(calibration_low=1.2)
    with pytest.raises(RankerError, match="max_auc_drop: Input should be a finite number"):
        GateConfig(max_auc_drop=float("nan"))
    with pytest.raises(RankerError, match="rule: Input should be 'ci' or 'point'"):
        GateConfig(rule="median")
    with pytest.raises(RankerError, match="anchor_champions: Input should be greater than or equal to 0"):
        GateConfig(anchor_champions=-1)
    with pytest.raises(RankerError, match="max_lift: Input should be a finite number"):
        GateConfig(max_lift=float("inf"))


def test_random_ranking_baseline_matches_a_constant_model() -> None:
    frame, _ = make_eval_day(requests=50, slate=7, seed=3)
    baseline = random_ranking_hit_at_k(frame["request_id"], frame["saved"])
    assert baseline == pytest.approx(3 / 7)
    assert save_hit_at_k(frame["request_id"], frame["saved"], np.zeros(len(frame))) == pytest.approx(baseline)


def test_a_candidate_too_far_above_its_champion_is_leakage(day) -> None:  # type: ignore[no-untyped-def]
    """Honest daily candidates measured -8 % .. +7.6 % against their champion (gate suite, 54 days);
    a model trained on the eval day +11 % .. +30 %: above max_lift (point estimate) is rejected."""
    frame, p = day
    cand, champ = with_scores(frame, noisy(p, 0.3, 1)), with_scores(frame, noisy(p, 1.5, 2))
    report = run_gate(cand, champ, **FAIR)
    leak = check(report, "leakage")
    assert report.relative_change is not None and report.relative_change > 0.10
    assert not leak.passed and leak.value == report.relative_change and leak.threshold == 0.10
    assert report.failed_checks == ["leakage"] and "too good to be true" in leak.detail
    assert run_gate(cand, champ, GateConfig(max_lift=report.relative_change + 0.01), **FAIR).passed
    # a lift above the limit that the day's CI cannot tell from zero is noise, not a leak (a small eval day)
    assert report.ci is not None and report.ci[0] > 0
    from ranking.gate.checks import _leakage_check

    assert _leakage_check(0.5, 0.4, 0.25, [-0.05, 0.55], GateConfig(), None).passed
    assert not _leakage_check(0.5, 0.4, 0.25, [0.15, 0.35], GateConfig(), None).passed
    assert not _leakage_check(0.5, 0.4, 0.25, [-0.05, 0.55], GateConfig(rule="point"), None).passed
    assert _leakage_check(0.44, 0.4, 0.10, [0.02, 0.18], GateConfig(), None).passed  # at the limit: honest
    assert "leakage" not in [c.name for c in run_gate(cand, champ, GateConfig(max_lift=0.0), **FAIR).checks]


@pytest.mark.parametrize(
    ("evidence", "passes", "says"),
    [
        (None, False, "no data-level leak check or lineage was given"),
        (LeakEvidence(False, False, True, True), False, "data-level leak check did not run"),
        (LeakEvidence(True, False, True, True), False, "data-level leak check found a leak"),
        (LeakEvidence(True, True, False, False), False, "the lineage is not known"),
        (LeakEvidence(True, True, True, False), False, "a model in its lineage was trained on the eval day"),
        (LeakEvidence(True, True, True, True), True, "found no leak"),
        (LeakEvidence(False, False, False, False, review_switch="r7"), True, "review r7's recipe switch"),
    ],
)
def test_a_large_lift_is_judged_by_the_data_and_the_lineage_not_its_size(  # type: ignore[no-untyped-def]
    day, evidence: LeakEvidence | None, passes: bool, says: str
) -> None:
    """Issue 30: a genuinely better recipe (+11 %) was rejected as a leak. A large, significant lift
    is a warning when the window's data-level leak checks and the lineage ran and found nothing (or
    it is a review's recipe switch); a check that did not run counts as not passed."""
    frame, p = day
    cand, champ = with_scores(frame, noisy(p, 0.3, 1)), with_scores(frame, noisy(p, 1.5, 2))
    report = run_gate(cand, champ, leak_evidence=evidence, **FAIR)
    leak = check(report, "leakage")
    assert report.relative_change is not None and report.relative_change > 0.10
    assert leak.passed is passes and says in leak.detail
    assert leak.warning is passes and report.warnings == (["leakage"] if passes else [])
    assert report.passed is passes


def test_a_model_no_better_than_the_heuristic_is_told(day) -> None:  # type: ignore[no-untyped-def]
    """Issue 31: a trained model exactly as good as one of its own input features passed every
    check. The gate scores the heuristic beside it: a warning by default, a rejection on request."""
    from ranking.gate.checks import Heuristic

    frame, p = day
    model = with_scores(frame, noisy(p, 0.3, 1))
    same = Heuristic("pin_save_rate", model)  # a model that ranks as the heuristic does
    report = run_gate(model, None, heuristic=same, eval_date=EVAL_DAY)
    found = check(report, "beats_heuristic")
    assert found.passed and found.warning and report.warnings == ["beats_heuristic"]
    assert found.value == pytest.approx(0.0) and report.heuristic is not None
    assert report.heuristic["save_hit_at_3"] == pytest.approx(report.candidate["save_hit_at_3"])
    strict = run_gate(
        model, None, heuristic=Heuristic("pin_save_rate", model, policy="fail"), eval_date=EVAL_DAY
    )
    assert strict.failed_checks == ["beats_heuristic"]
    weak = Heuristic("pin_save_rate", with_scores(frame, noisy(p, 3.0, 2)))
    better = run_gate(model, None, heuristic=weak, eval_date=EVAL_DAY)
    lift = check(better, "beats_heuristic")
    assert lift.passed and not lift.warning and lift.ci is not None and lift.ci[0] > 0
    # with a champion, its own lift over the heuristic is reported too (the served model's)
    champ = with_scores(frame, noisy(p, 1.5, 3))
    both = run_gate(model, champ, heuristic=weak, **FAIR)
    assert both.heuristic is not None and both.heuristic["champion_relative_change"] is not None
