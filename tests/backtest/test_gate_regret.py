"""Gate replay and regret (ranking/backtest/gates.py) and the regret in every backtest report
(ranking/backtest/report.py): pure, on hand-made days whose answers follow from the timeline."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from ranking.backtest.day import DayCandidate, DayRecord, ForwardChoice, RecordedMetrics, ServedModel
from ranking.backtest.gates import ForwardDay, GateState, regret_summary, replay, state_on
from ranking.backtest.report import build_report, forward_days, recipe_summary, render_markdown
from ranking.backtest.spec import BacktestSpec, Recipe
from ranking.gate.checks import Check, GateConfig, GateReport

D0 = dt.date(2026, 11, 10)


def day(i: int) -> dt.date:
    return D0 + dt.timedelta(days=i)


def test_regret_counts_each_miss_with_its_size() -> None:
    days = [
        # the gate kept the champion (0.40) and yesterday's candidate scored 0.44 here: a miss of +10%
        ForwardDay("d1", served=0.40, fresh=0.44, alternative=0.44, promoted_fresh=False, age_days=2),
        # it promoted a candidate (0.30) over a champion that scored 0.33 here: a miss of -9.09%
        ForwardDay("d2", served=0.30, fresh=0.30, alternative=0.33, promoted_fresh=True, age_days=1),
        # a good promotion: no miss
        ForwardDay("d3", served=0.50, fresh=0.50, alternative=0.45, promoted_fresh=True, age_days=1),
        # a good rejection: no miss
        ForwardDay("d4", served=0.20, fresh=0.10, alternative=0.10, promoted_fresh=False, age_days=5),
    ]
    r = regret_summary(days)
    assert r.days == 4
    assert r.served_mean == pytest.approx((0.40 + 0.30 + 0.50 + 0.20) / 4)
    assert r.oracle_mean == pytest.approx((0.44 + 0.33 + 0.50 + 0.20) / 4)
    assert r.always_promote_mean == pytest.approx((0.44 + 0.30 + 0.50 + 0.10) / 4)
    assert r.regret_vs_oracle == pytest.approx(1.47 / 1.40 - 1)
    assert r.vs_always_promote == pytest.approx(1.40 / 1.34 - 1)
    assert r.rejected_a_better_candidate == 1
    assert r.rejected_a_better_candidate_sizes == [pytest.approx(0.10)]
    assert r.promoted_a_worse_one == 1
    assert r.promoted_a_worse_one_sizes == [pytest.approx(0.30 / 0.33 - 1)]
    assert r.staleness_median_days == 1.5 and r.staleness_max_days == 5


def test_days_after_an_injection_are_left_out_of_the_clean_comparison() -> None:
    days = [
        ForwardDay("d1", served=0.40, fresh=0.40, alternative=0.30, promoted_fresh=True, age_days=1),
        ForwardDay(
            "d2", served=0.40, fresh=0.05, alternative=0.05, promoted_fresh=False, age_days=2, injected=True
        ),
    ]
    r = regret_summary(days)
    assert r.clean_days == 1
    assert r.vs_always_promote_clean_days == pytest.approx(0.0)
    assert r.vs_always_promote == pytest.approx(0.80 / 0.45 - 1)


def test_no_forward_days_is_no_regret_not_zero() -> None:
    r = regret_summary(
        [ForwardDay("d1", served=None, fresh=0.4, alternative=None, promoted_fresh=None, age_days=None)]
    )
    assert r.days == 0 and r.regret_vs_oracle is None and r.staleness_median_days is None


# ---------------------------------------------------------------- replay


def scripted_judge(quality: dict[str, float], seen: list[tuple[dt.date, str, GateState]]):  # type: ignore[no-untyped-def]
    """Passes a candidate whose quality is not below its champion's; records what it was shown."""

    def judge(eval_day: dt.date, candidate: str, state: GateState) -> GateReport:
        seen.append((eval_day, candidate, state))
        champion = state.champion.key if state.champion else None
        ok = champion is None or quality[candidate] >= quality[champion]
        change = None if champion is None else quality[candidate] / quality[champion] - 1
        return GateReport(
            decision="pass" if ok else "reject",
            checks=[Check("quality", ok, quality[candidate], None, "scripted")],
            candidate={},
            champion=None,
            relative_change=change,
            ci=None if change is None else [change - 0.01, change + 0.01],
            eval_date=eval_day.isoformat(),
        )

    return judge


def test_replay_promotes_what_passes_and_shows_each_day_the_state_earlier_decisions_left() -> None:
    days = [day(i) for i in range(10)]
    quality = {f"c{i}": q for i, q in enumerate([0.30, 0.32, 0.31, 0.35, 0.34, 0.36, 0.20, 0.37, 0.38, 0.10])}
    candidates = {d: f"c{i}" for i, d in enumerate(days)}
    seen: list[tuple[dt.date, str, GateState]] = []
    config = GateConfig(reference_champions=3, trend_days=7, anchor_champions=2)
    records, states = replay(days, candidates, config, scripted_judge(quality, seen))

    assert [r.decision for r in records] == [
        "pass", "pass", "reject", "pass", "reject", "pass", "reject", "pass", "pass", "reject"
    ]  # fmt: skip
    assert [r.champion for r in records] == [None, "c0", "c1", "c1", "c3", "c3", "c5", "c5", "c7", "c8"]
    assert records[3].champion_trained_for == day(1).isoformat()
    # the references: former champions, newest first, the current one excluded
    assert states[6].references == ("c3", "c1")
    assert states[6].anchors == ("c5", "c3")
    # the trend: the champion served trend_days (7) before the eval day: on day 8 - 7 = day 1, c0
    # (promoted on day 0) served; c1 only from day 2
    assert states[8].trend == "c0"
    assert states[2].trend is None  # nobody served 7 days before
    # every judged comparison with a champion is remembered for the pooled check
    assert [p.eval_date for p in states[9].history] == days[1:9]
    assert [s for s in seen] == [(d, candidates[d], st) for d, st in zip(days, states, strict=True)]


def test_state_on_names_no_trend_when_the_old_champion_still_serves() -> None:
    from ranking.backtest.gates import Crowned

    config = GateConfig(trend_days=7, reference_champions=3)
    state = state_on(day(20), [Crowned("c0", day(0))], [], config)
    assert state.champion is not None and state.champion.key == "c0"
    assert state.trend is None and state.references == ()


# ---------------------------------------------------------------- in the backtest report


def record(i: int, served: float | None, forward: ForwardChoice | None, age: int | None) -> DayRecord:
    return DayRecord(
        day=day(i).isoformat(),
        exit_code=0,
        served=None
        if served is None
        else ServedModel(
            version=f"v{i}",
            trained_for=None,
            age_days=age,
            metrics=RecordedMetrics(save_hit_at_3=served),
            forward=forward,
        ),
        candidate=DayCandidate(version=f"v{i + 1}", metrics=RecordedMetrics(save_hit_at_3=0.3), scores=None),
        decision="pass",
    )


def test_every_backtest_report_carries_the_regret_of_its_recipe() -> None:
    records = [
        record(0, None, None, None),  # day 1: nothing served, nothing to regret
        record(1, 0.40, ForwardChoice(fresh="v1", promoted_fresh=True, fresh_save_hit_at_3=0.40,
                                      other=None, other_save_hit_at_3=None), 1),
        record(2, 0.40, ForwardChoice(fresh="v2", promoted_fresh=False, fresh_save_hit_at_3=0.50,
                                      other="v2", other_save_hit_at_3=0.50), 2),
    ]  # fmt: skip
    days = forward_days(records)
    assert [(d.day, d.served, d.fresh, d.alternative, d.promoted_fresh, d.age_days) for d in days] == [
        (day(1).isoformat(), 0.40, 0.40, None, True, 1),
        (day(2).isoformat(), 0.40, 0.50, 0.50, False, 2),
    ]
    summary = recipe_summary(records)
    assert summary.regret.rejected_a_better_candidate == 1
    assert summary.regret.regret_vs_oracle == pytest.approx(0.90 / 0.80 - 1)
    recipe = Recipe("r", Path("recipes/r.toml"), {})
    spec = BacktestSpec(
        start=day(0), days=3, recipes=(recipe,), baseline="r", bootstrap_samples=10, ci_level=0.9, seed=0
    )
    text = render_markdown(build_report(spec, {"r": records}, {"r": None}, 1.0))
    assert "Gate regret" in text
    row = next(line for line in text.splitlines() if line.startswith("| `r` | 2 |") and " d / " in line)
    assert "+12.50%" in row and "1 (+25.00%)" in row and "1.5 d / 2 d" in row
