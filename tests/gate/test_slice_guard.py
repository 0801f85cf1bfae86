"""The gate's slices and slice guard (issue 31): a candidate that ranks one group's slates at
random while the day's totals hold is stopped by the guard, named; clean candidates are not."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pandas as pd
import pytest
from scoresets import make_eval_day, noisy, with_scores

from ranking.evaluation.slices import SliceConfig, slice_frame
from ranking.gate.checks import GateConfig, GateInputError, TrainingWindow, run_gate

EVAL_DAY = dt.date(2026, 1, 21)
FAIR = {
    "eval_date": EVAL_DAY,
    "candidate_window": TrainingWindow(dt.date(2026, 1, 1), EVAL_DAY),
    "champion_window": TrainingWindow(dt.date(2025, 12, 31), dt.date(2026, 1, 20)),
}
REQUESTS, SLATE, NEW_SHARE = 3000, 10, 0.05


@pytest.fixture(scope="module")
def day() -> tuple[pd.DataFrame, np.ndarray, pd.DataFrame]:
    """An eval day, its propensities, and its examples' slice columns: the first 5% of the
    requests are first-seen users, the rest returning, in four countries."""
    frame, p = make_eval_day(requests=REQUESTS, slate=SLATE, seed=31)
    rng = np.random.default_rng(5)
    request_index = np.repeat(np.arange(REQUESTS), SLATE)
    new = request_index < NEW_SHARE * REQUESTS
    examples = frame.assign(
        user_stats__impressions_28d=np.where(new, 0.0, 50.0),
        pin_stats__impressions_28d=rng.integers(0, 1000, len(frame)).astype(float),
        user_stats__country=np.array(["c0", "c1", "c2", "c3"])[request_index % 4],
    )
    return frame, p, examples


def shuffled_slates(scores: pd.DataFrame, requests: set[str], seed: int) -> pd.DataFrame:
    """The same scores, with the slates of ``requests`` ranked at random."""
    out = scores.copy()
    rng = np.random.default_rng(seed)
    for request, rows in out[out["request_id"].isin(requests)].groupby("request_id").groups.items():
        del request
        out.loc[rows, "score"] = rng.permutation(out.loc[rows, "score"].to_numpy())
    return out


def guard(report):  # type: ignore[no-untyped-def]
    return next(c for c in report.checks if c.name == "slice_guard")


def test_a_candidate_that_ranks_new_users_at_random_is_stopped_by_the_slice_guard_only(day) -> None:  # type: ignore[no-untyped-def]
    frame, p, examples = day
    champion = with_scores(frame, noisy(p, 0.6, 1))
    new_users = set(frame["request_id"].unique()[: int(NEW_SHARE * REQUESTS)])
    candidate = shuffled_slates(champion, new_users, seed=2)
    slices = slice_frame(examples, SliceConfig(columns=("user_stats__country",)))
    config = GateConfig(max_lift=0.5)

    blind = run_gate(candidate, champion, config, **FAIR)  # what the gate saw before issue 31
    assert blind.passed, blind.failed_checks
    report = run_gate(candidate, champion, config, slices=slices, **FAIR)
    assert report.failed_checks == ["slice_guard"]
    found = guard(report)
    assert "user:first_seen" in found.detail and "user:returning" not in found.detail
    rows = {r["name"]: r for r in report.slices or []}
    new, returning = rows["user:first_seen"], rows["user:returning"]
    assert new["judged"] and new["relative_change"] < -config.slice_tolerance
    low, high = new["judged_ci"]
    assert high < -config.slice_tolerance and low <= new["ci"][0] and high >= new["ci"][1]  # corrected: wider
    assert new["loss_p"] < 0.05 / sum(r["judged"] for r in rows.values())
    assert (
        returning["relative_change"] == pytest.approx(0.0) and returning["candidate"] == returning["champion"]
    )
    # every slice's HIT@3 is its saved pins' share in the top 3 of their slate
    assert sum(r["requests_with_save"] for n, r in rows.items() if n.startswith("user:")) == sum(
        r["requests_with_save"] for n, r in rows.items() if n.startswith("user_stats__country:")
    )


def test_a_clean_candidate_passes_and_each_slice_is_reported(day) -> None:  # type: ignore[no-untyped-def]
    frame, p, examples = day
    champion, candidate = with_scores(frame, noisy(p, 0.6, 1)), with_scores(frame, noisy(p, 0.6, 3))
    slices = slice_frame(examples, SliceConfig(columns=("user_stats__country",)))
    report = run_gate(candidate, champion, GateConfig(max_lift=0.5), slices=slices, **FAIR)
    assert report.passed, report.failed_checks
    found = guard(report)
    judged = [r for r in report.slices or [] if r["judged"]]
    # users and countries take whole slates; pin tiers take part of one and are reported, not judged
    assert len(judged) == 2 + 4 and all(r["whole_slates"] for r in judged)
    assert {r["name"] for r in report.slices or [] if not r["whole_slates"]} == {
        "pin:head",
        "pin:torso",
        "pin:tail",
    }
    assert f"{len(judged)} slices of whole slates judged" in found.detail and found.value == min(
        r["relative_change"] for r in judged
    )
    partial = run_gate(
        candidate, champion, GateConfig(max_lift=0.5, slice_guard_partial=True), slices=slices, **FAIR
    )
    assert sum(r["judged"] for r in partial.slices or []) == 2 + 3 + 4  # every slice here has enough saves


def test_tail_pins_moved_down_within_their_slates_are_judged_only_on_request(day) -> None:  # type: ignore[no-untyped-def]
    """A candidate that ranks tail pins below every other pin of their slate: the top 3 places
    went to head and torso pins. Whole slates did not lose that way, so by default the guard (which
    judges whole slates) does not stop it on the tail; with slice_guard_partial it does."""
    frame, p, examples = day
    champion = with_scores(frame, noisy(p, 0.6, 1))
    slices = slice_frame(examples, SliceConfig(columns=()))
    tail = frame[["request_id", "pin_id"]].merge(slices, on=["request_id", "pin_id"])["pin:tail"].to_numpy()
    candidate = champion.assign(score=champion["score"] - tail)  # scores in (0, 1): tail pins last
    default = run_gate(candidate, champion, GateConfig(max_lift=0.5), slices=slices, **FAIR)
    rows = {r["name"]: r for r in default.slices or []}
    assert rows["pin:tail"]["relative_change"] < -0.5 and not rows["pin:tail"]["judged"]
    assert "pin:tail" not in guard(default).detail
    partial = run_gate(
        candidate, champion, GateConfig(max_lift=0.5, slice_guard_partial=True), slices=slices, **FAIR
    )
    assert not guard(partial).passed and "pin:tail" in guard(partial).detail


def test_small_slices_are_reported_but_not_judged_and_the_guard_can_be_turned_off(day) -> None:  # type: ignore[no-untyped-def]
    frame, p, examples = day
    champion = with_scores(frame, noisy(p, 0.6, 1))
    candidate = shuffled_slates(champion, set(frame["request_id"].unique()[: int(NEW_SHARE * REQUESTS)]), 2)
    slices = slice_frame(examples, SliceConfig(columns=()))
    too_big = run_gate(
        candidate, champion, GateConfig(max_lift=0.5, slice_min_requests=10_000), slices=slices, **FAIR
    )
    assert too_big.passed and "none judged" in guard(too_big).detail
    assert not any(r["judged"] for r in too_big.slices or [])
    off = run_gate(candidate, champion, GateConfig(max_lift=0.5, slice_guard=False), slices=slices, **FAIR)
    assert off.passed and "slice_guard" not in [c.name for c in off.checks]
    assert {r["name"] for r in off.slices or []} == {
        "user:first_seen", "user:returning", "pin:head", "pin:torso", "pin:tail"
    }  # fmt: skip


def test_a_first_run_reports_the_candidates_slices_without_a_guard(day) -> None:  # type: ignore[no-untyped-def]
    frame, p, examples = day
    report = run_gate(
        with_scores(frame, noisy(p, 0.6, 1)),
        None,
        slices=slice_frame(examples, SliceConfig()),
        eval_date=EVAL_DAY,
    )
    assert "slice_guard" not in [c.name for c in report.checks]
    assert report.slices and all(r["candidate"] is not None and "champion" not in r for r in report.slices)


def test_slices_that_miss_eval_impressions_are_refused(day) -> None:  # type: ignore[no-untyped-def]
    frame, p, examples = day
    scores = with_scores(frame, noisy(p, 0.6, 1))
    partial = slice_frame(examples, SliceConfig()).iloc[10:]
    with pytest.raises(GateInputError, match="slices do not cover"):
        run_gate(scores, scores, slices=partial, **FAIR)
