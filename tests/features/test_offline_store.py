"""features/offline_store.py: Feast's DuckDB store reading only the lookups' day range gives
Feast's own point-in-time join, row for row, and is what `ranker features apply` renders."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml
from tinyspace import START

from features import feast_repo, sources
from features.schema import FEATURE_SERVICE
from ranking.core.workspace import Workspace


def _lookups(ws: Workspace, day: dt.date) -> pd.DataFrame:
    imp = sources.read_day(ws, sources.IMPRESSIONS, day).to_pandas()
    lookups = imp[["user_id", "pin_id", "event_timestamp"]].drop_duplicates(ignore_index=True)
    # a lookup at exactly D 00:00 may be served by D-1's snapshot (the TTL is inclusive): keep one
    first = lookups.iloc[[0]].assign(event_timestamp=pd.Timestamp(day.isoformat(), tz="UTC"))
    return pd.concat([lookups, first], ignore_index=True)


def _join(ws: Workspace, offline: dict[str, Any], lookups: pd.DataFrame, views: list[str]) -> pd.DataFrame:
    from feast import FeatureStore
    from feast.repo_config import RepoConfig

    raw = yaml.safe_load((ws.feast / "feature_store.yaml").read_text())
    config = RepoConfig(**{**raw, "offline_store": offline})
    config.repo_path = feast_repo.REPO
    store = FeatureStore(config=config)
    service = store.get_feature_service(FEATURE_SERVICE)
    refs = [
        f"{p.name}:{f.name}" for p in service.feature_view_projections if p.name in views for f in p.features
    ]
    with feast_repo.quiet_stdout():
        out = store.get_historical_features(entity_df=lookups, features=refs, full_feature_names=True).to_df()
    keys = [c for c in lookups.columns]
    return out.sort_values(keys, ignore_index=True)[sorted(out.columns)]


@pytest.mark.parametrize("offset", [1, 4])
def test_the_day_range_store_joins_as_feasts_own(private_home: Path, offset: int) -> None:
    ws = Workspace.resolve(private_home)
    day = START + dt.timedelta(days=offset)
    lookups = _lookups(ws, day)
    views = ["user_stats", "pin_stats", "user_pin_stats"]
    ours = _join(ws, {"type": feast_repo.DAY_RANGE_DUCKDB}, lookups, views)
    feasts = _join(ws, {"type": "duckdb"}, lookups, views)
    assert len(ours) == len(lookups)
    pd.testing.assert_frame_equal(ours, feasts)
    # the join served something: the day's user snapshots were read (not an empty range)
    assert ours["user_stats__as_of"].notna().mean() > 0.9
    # and the lookup at exactly 00:00 was served by the day before's snapshot where it had to be
    assert ours["user_stats__as_of"].min() >= pd.Timestamp(day - dt.timedelta(days=1), tz="UTC")


def test_the_range_is_the_lookups_widened_by_the_ttl() -> None:
    from features.offline_store import lookup_range

    class View:
        def __init__(self, hours: float | None) -> None:
            self.ttl = dt.timedelta(hours=hours) if hours is not None else None

    times = pd.Series(pd.to_datetime(["2026-01-03 05:00", "2026-01-02 23:00"], utc=True))
    lookups = pd.DataFrame({"user_id": [1, 2], "event_timestamp": times})
    newest, oldest = lookup_range(lookups, [View(24), View(48)])  # type: ignore[list-item]
    assert newest == pd.Timestamp("2026-01-03 05:00", tz="UTC")
    assert oldest == pd.Timestamp("2025-12-31 23:00", tz="UTC")  # the oldest lookup minus the longest TTL
    # a view with no TTL can be served by any older snapshot: no lower bound
    assert lookup_range(lookups, [View(24), View(None)])[1] is None  # type: ignore[list-item]


def test_apply_renders_the_day_range_store_for_duckdb_only(tmp_path: Path) -> None:
    home = tmp_path / "home"
    duck = feast_repo.render_store_config(
        (feast_repo.REPO / "feature_store.yaml").read_text(), home, feast_repo.StoreSettings()
    )
    assert yaml.safe_load(duck)["offline_store"]["type"] == feast_repo.DAY_RANGE_DUCKDB
    spark = feast_repo.render_store_config(
        (feast_repo.REPO / "feature_store.yaml").read_text(), home, feast_repo.StoreSettings("spark")
    )
    assert yaml.safe_load(spark)["offline_store"]["type"] == "spark"
