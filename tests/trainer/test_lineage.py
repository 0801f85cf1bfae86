"""The incremental plan: full or incremental, which days, when the full retrain comes back."""

from __future__ import annotations

import datetime as dt

import pytest

from ranking.core.errors import RankerError
from ranking.trainer.lineage import ChampionInfo, champion_info, plan_training

D = dt.date(2026, 3, 10)


def _plan(champion: ChampionInfo | None, every: int | None = 7, incremental: bool = True):  # type: ignore[no-untyped-def]
    return plan_training(
        end=D,
        warm_start="champion",
        incremental=incremental,
        full_retrain_every_days=every,
        full_retrain_warm_start="base",
        champion=champion,
    )


def test_not_incremental_is_a_full_retrain_from_the_recipes_warm_start() -> None:
    plan = _plan(ChampionInfo("v0003", D - dt.timedelta(days=1), None), incremental=False)
    assert (plan.warm_start, plan.since, plan.lineage.kind) == ("champion", None, "full")
    assert plan.lineage.full_retrain_end == D


def test_without_a_champion_the_first_model_is_a_full_retrain_from_the_base() -> None:
    plan = _plan(None)
    assert (plan.warm_start, plan.since, plan.lineage.kind) == ("base", None, "full")


def test_incremental_trains_only_the_days_after_the_champions_window() -> None:
    champion = ChampionInfo("v0003", D - dt.timedelta(days=2), None)  # yesterday's was rejected
    plan = _plan(champion)
    assert plan.warm_start == "champion" and plan.since == D - dt.timedelta(days=2)
    assert plan.lineage.kind == "incremental" and plan.lineage.parent == "v0003"
    # the champion was itself a full retrain: the line's last full retrain is its window end
    assert plan.lineage.full_retrain_end == D - dt.timedelta(days=2)


def test_the_full_retrain_comes_back_every_k_days_counted_from_the_last_one() -> None:
    last_full = D - dt.timedelta(days=7)
    champion = ChampionInfo("v0009", D - dt.timedelta(days=1), full_retrain_end=last_full)
    assert _plan(champion, every=7).lineage.kind == "full"
    assert _plan(champion, every=7).warm_start == "base"
    assert _plan(champion, every=8).lineage.kind == "incremental"
    assert _plan(champion, every=8).lineage.full_retrain_end == last_full
    assert _plan(champion, every=None).lineage.kind == "incremental"  # never


def test_a_champion_that_already_saw_every_day_is_refused() -> None:
    with pytest.raises(RankerError, match="nothing new to train on"):
        _plan(ChampionInfo("v0003", D, None))


def test_champion_info_reads_the_version_records_train_summary() -> None:
    full = champion_info("v0002", {"train_end": "2026-03-09", "lineage": {"kind": "full"}})
    assert full == ChampionInfo("v0002", dt.date(2026, 3, 9), None)
    inc = champion_info(
        "v0003",
        {"train_end": "2026-03-09", "lineage": {"kind": "incremental", "full_retrain_end": "2026-03-05"}},
    )
    assert inc is not None and inc.full_retrain_end == dt.date(2026, 3, 5)
    assert champion_info("v0004", {}) is None
