"""Slices of an eval day (ranking.evaluation.slices): each built-in cut is a partition of the
day's impressions, columns are cut by their most frequent values plus "other"."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from ranking.core.errors import RankerError
from ranking.evaluation.slices import SLICE_COLUMNS, SliceConfig, slice_frame


def examples() -> pd.DataFrame:
    rng = np.random.default_rng(0)
    n_req, slate = 200, 5
    request = np.repeat(np.arange(n_req), slate)
    return pd.DataFrame(
        {
            "request_id": [f"r{i}" for i in request],
            "pin_id": rng.integers(0, 100, n_req * slate),
            "saved": (rng.random(n_req * slate) < 0.1).astype(np.int8),
            "user_stats__impressions_28d": np.where(request % 5 == 0, np.nan, 12.0),  # null: no snapshot yet
            "pin_stats__impressions_28d": None,
            "user_stats__country": np.array(
                ["us", "us", "us", "us", "de", "de", "de", "fr", "fr", None], dtype=object
            )[request % 10],
            "pin_stats__category": np.array([f"k{i}" for i in range(8)])[rng.integers(0, 8, n_req * slate)],
        }
    ).assign(pin_stats__impressions_28d=lambda f: f["pin_id"] * 3.0)


def test_each_built_in_cut_is_a_partition_of_the_impressions() -> None:
    frame = slice_frame(
        examples(), SliceConfig(columns=("user_stats__country", "pin_stats__category"), top_values=3)
    )
    groups: dict[str, list[str]] = {}
    for name in frame.columns[2:]:
        groups.setdefault(name.split(":")[0], []).append(name)
    assert set(groups) == {"user", "pin", "user_stats__country", "pin_stats__category"}
    for names in groups.values():
        assert (frame[names].sum(axis=1) == 1).all(), names  # every impression in exactly one slice
    # first seen: no 28-day impressions before the day (a missing snapshot counts as none)
    assert frame["user:first_seen"].mean() == pytest.approx(0.2)
    # the 3 most frequent values (a null is a value), the rest "other"
    assert groups["user_stats__country"] == [f"user_stats__country:{v}" for v in ("de", "fr", "us", "other")]
    assert frame["user_stats__country:other"].mean() == pytest.approx(0.1)
    assert len(groups["pin_stats__category"]) == 4  # top 3 plus other


def test_pin_tiers_split_the_days_distinct_pins_by_popularity() -> None:
    ex = examples()
    frame = slice_frame(ex, SliceConfig(users=False, columns=(), head_share=0.1, torso_share=0.4))
    tier = pd.Series(
        np.select([frame["pin:head"], frame["pin:torso"]], ["head", "torso"], "tail"), index=ex.index
    )
    by_pin = pd.DataFrame({"pin": ex["pin_id"], "tier": tier, "shown": ex["pin_stats__impressions_28d"]})
    per_pin = by_pin.drop_duplicates("pin")
    assert by_pin.groupby("pin")["tier"].nunique().max() == 1  # a pin is in one tier all day
    n = len(per_pin)
    assert (per_pin["tier"] == "head").sum() == int(np.ceil(0.1 * n))
    assert (per_pin["tier"] != "tail").sum() == int(np.ceil(0.5 * n))
    assert (
        per_pin[per_pin["tier"] == "head"]["shown"].min() >= per_pin[per_pin["tier"] != "head"]["shown"].max()
    )


def test_a_missing_column_and_a_bad_configuration_are_one_clear_error() -> None:
    with pytest.raises(RankerError, match=r"columns \['user_stats__impressions_28d'\]"):
        slice_frame(examples().drop(columns="user_stats__impressions_28d"), SliceConfig())
    with pytest.raises(RankerError, match="not categorical window columns"):
        SliceConfig(columns=("user_id",))
    with pytest.raises(RankerError, match="head_share"):
        SliceConfig(head_share=0.6, torso_share=0.5)
    assert "user_id" not in SLICE_COLUMNS and "user_stats__country" in SLICE_COLUMNS
