"""The bad-candidate kinds of the gate suite (ranking/backtest/inject.py): parsing --inject, spreading
``all`` over the eval days, and the pure transforms each kind applies."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from features.window import WindowManifest
from ranking.backtest import inject
from ranking.core.errors import RankerError

DAYS = [dt.date(2026, 11, 10) + dt.timedelta(days=i) for i in range(28)]


def test_every_kind_is_explained_in_one_line() -> None:
    assert len(inject.KINDS) >= 8
    for kind, line in inject.KINDS.items():
        assert line.strip() and "\n" not in line, kind
    assert set(inject.TRAINED_KINDS) < set(inject.KINDS)


def test_parse_reads_kinds_and_days_sorted() -> None:
    found = inject.parse_injections("nan_scores@2026-11-12, leakage@2026-11-11", DAYS)
    assert [(i.kind, i.day) for i in found] == [("leakage", DAYS[1]), ("nan_scores", DAYS[2])]
    assert found[0].key == "leakage@2026-11-11"


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("typo@2026-11-12", "expected KIND@YYYY-MM-DD"),
        ("nan_scores", "expected KIND@YYYY-MM-DD"),
        ("nan_scores@12/11/2026", "is not a date"),
        ("nan_scores@2026-11-10", "not an eval day after the first"),  # day 1: no champion to judge against
        ("nan_scores@2026-12-31", "not an eval day after the first"),
        ("nan_scores@2026-11-12,nan_scores@2026-11-12", "the same KIND@DAY twice"),
        (" , ", "at least one"),
        ("stale_window@2026-11-12", "before the first window"),
    ],
)
def test_bad_injections_are_one_line(text: str, says: str) -> None:
    with pytest.raises(RankerError) as err:
        inject.parse_injections(text, DAYS, earliest=dt.date(2026, 10, 21))
    assert says in str(err.value) and "\n" not in str(err.value)


def test_all_puts_every_kind_on_three_distinct_usable_days() -> None:
    earliest = dt.date(2026, 10, 21)
    found = inject.parse_injections("all", DAYS, earliest=earliest)
    by_kind: dict[str, list[dt.date]] = {}
    for i in found:
        by_kind.setdefault(i.kind, []).append(i.day)
    assert set(by_kind) == set(inject.KINDS)
    for kind, days in by_kind.items():
        assert len(set(days)) == 3 and all(d in DAYS[1:] for d in days), kind
    assert all(d - dt.timedelta(days=inject.STALE_DAYS) >= earliest for d in by_kind["stale_window"])
    # spread: each kind meets early and late champions
    assert all(max(days) - min(days) >= dt.timedelta(days=10) for days in by_kind.values())


def test_all_refuses_a_backtest_too_short_for_a_kind() -> None:
    with pytest.raises(RankerError, match="stale_window needs 3 usable eval days"):
        inject.parse_injections("all", DAYS[:10], earliest=dt.date(2026, 10, 21))


def scores(n: int = 1000) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    return pd.DataFrame(
        {"request_id": np.arange(n) // 10, "score": rng.uniform(0.0, 0.5, n), "saved": rng.random(n) < 0.1}
    )


def test_nan_scores_spoils_about_two_percent_and_leaves_the_source_alone() -> None:
    source = scores(20_000)
    spoiled = inject.nan_scores(source, seed=3)
    share = spoiled["score"].isna().mean()
    assert 0.015 < share < 0.025
    assert not source["score"].isna().any()
    kept = spoiled["score"].notna()
    assert np.array_equal(spoiled.loc[kept, "score"], source.loc[kept, "score"])
    assert spoiled["score"].isna().equals(inject.nan_scores(source, seed=3)["score"].isna())  # seeded


def test_rescaled_scores_are_three_times_as_large_within_zero_one() -> None:
    source = scores()
    out = inject.rescaled_scores(source)
    assert np.allclose(out["score"], np.clip(source["score"] * 3.0, 0.0, 1.0))
    assert out["score"].max() <= 1.0


def test_first_seen_shuffled_ranks_only_those_slates_at_random() -> None:
    rng = np.random.default_rng(0)
    source = pd.DataFrame(
        {
            "request_id": np.repeat([f"r{i}" for i in range(40)], 8),
            "pin_id": np.tile(np.arange(8), 40),
            "saved": 0,
            "score": rng.random(320),
        }
    ).sample(frac=1.0, random_state=1)  # rows of a slate need not be together
    examples = source[["request_id"]].assign(
        user_stats__impressions_28d=np.where(source["request_id"].isin({"r1", "r2", "r3"}), np.nan, 5.0)
    )
    examples.loc[examples["request_id"] == "r4", "user_stats__impressions_28d"] = 0.0
    first_seen = inject.first_seen_requests(examples)
    assert first_seen == {"r1", "r2", "r3", "r4"}  # no snapshot yet, or none of the 28 days
    out = inject.first_seen_shuffled(source, first_seen, seed=5)
    hit = source["request_id"].isin(first_seen)
    assert out.loc[~hit, "score"].equals(source.loc[~hit, "score"])
    for request in first_seen:  # the same scores within the slate, on other pins
        mine = source["request_id"] == request
        assert sorted(out.loc[mine, "score"]) == sorted(source.loc[mine, "score"])
    assert not out.loc[hit, "score"].equals(source.loc[hit, "score"])
    assert out.equals(inject.first_seen_shuffled(source, first_seen, seed=5))  # seeded


def test_shuffled_labels_keep_the_rate_and_lose_the_rows() -> None:
    saved = np.zeros(1000, dtype=bool)
    saved[::7] = True
    table = pa.table({"x": np.arange(1000), "saved": saved})
    out = inject.shuffled_labels(table, seed=1)
    labels = out.column("saved").to_numpy()
    assert labels.sum() == saved.sum() and not np.array_equal(labels, saved)
    assert np.array_equal(out.column("x").to_numpy(), np.arange(1000))


def test_zeroed_feature_zeroes_one_column_keeping_its_type() -> None:
    table = pa.table(
        {inject.ZEROED_FEATURE: pa.array([0.1, 0.5, 0.9], pa.float32()), "other": [1.0, 2.0, 3.0]}
    )
    out = inject.zeroed_feature(table)
    assert out.column(inject.ZEROED_FEATURE).to_pylist() == [0.0, 0.0, 0.0]
    assert out.schema.field(inject.ZEROED_FEATURE).type == pa.float32()
    assert out.column("other").to_pylist() == [1.0, 2.0, 3.0]
    with pytest.raises(RankerError, match="no column"):
        inject.zeroed_feature(pa.table({"other": [1.0]}))


def test_leaky_manifest_trains_on_the_eval_day_with_the_same_length() -> None:
    manifest = WindowManifest.model_validate(
        {
            "window_id": "w",
            "days": 3,
            "feature_version": "f",
            "train": [{"date": f"2026-11-0{i}", "rows": 10, "path": f"p{i}"} for i in range(1, 4)],
            "eval": {"date": "2026-11-04", "rows": 7, "path": "p4"},
            "end": "2026-11-04",
            "rows_train": 30,
            "path": "manifest.json",
        }
    )
    out = inject.leaky_manifest(manifest)
    assert [p.date.isoformat() for p in out.train] == ["2026-11-02", "2026-11-03", "2026-11-04"]
    assert out.eval == manifest.eval and out.end.isoformat() == "2026-11-04" and out.rows_train == 27
    assert out.record()["rows_train"] == 27 and len(out.record()["train"]) == 3  # what the crafted file holds
    assert len(manifest.train) == 3 and manifest.train[0].date.isoformat() == "2026-11-01"  # a copy


def test_scaled_optimizers_multiply_both_learning_rates() -> None:
    config = {
        "table_optimizer": {"name": "rowwise_adagrad", "lr": 0.05},
        "dense_optimizer": {"name": "adam", "lr": 0.001},
    }
    out = inject.scaled_optimizers(config)
    assert out["table_optimizer"] == {"name": "rowwise_adagrad", "lr": pytest.approx(5.0)}
    assert out["dense_optimizer"] == {"name": "adam", "lr": pytest.approx(0.1)}
    assert config["table_optimizer"]["lr"] == 0.05
