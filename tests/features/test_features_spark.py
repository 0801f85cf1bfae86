"""Feast's Spark offline store (a local ``local[*]`` session) serves the same feature views as the
duckdb store: the same window, built on both, has the same rows and feature values every day.
Skipped with a message when Java is missing (Debian package openjdk-17-jre-headless)."""

from __future__ import annotations

import datetime as dt
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from tinyspace import WINDOW_DAYS

from features.feast_repo import StoreSettings
from features.schema import HISTORY_FEATURES, HISTORY_VIEWS, IMPRESSION_SCHEMA
from ranking.core.workspace import Workspace

pytestmark = [pytest.mark.slow, pytest.mark.integration]

KEYS = ["request_id", "pin_id"]


@pytest.fixture
def spark_settings() -> Iterator[StoreSettings]:
    pytest.importorskip("pyspark")
    if shutil.which("java") is None:
        pytest.skip("java not installed (apt-get install openjdk-17-jre-headless)")
    yield StoreSettings(offline_store="spark")
    from pyspark.sql import SparkSession

    session = SparkSession.getActiveSession()
    if session is not None:
        session.stop()


def _assert_same_day(duck: pd.DataFrame, spark: pd.DataFrame, day: str) -> None:
    assert len(duck) == len(spark), day
    assert list(duck.columns) == list(spark.columns), day
    duck = duck.sort_values(KEYS, ignore_index=True)
    spark = spark.sort_values(KEYS, ignore_index=True)
    for col in duck.columns:
        a, b = duck[col], spark[col]
        assert a.dtype == b.dtype, (day, col)
        assert (a.isna() == b.isna()).all(), (day, col)
        if pd.api.types.is_float_dtype(a):
            np.testing.assert_allclose(b.to_numpy(), a.to_numpy(), rtol=1e-12, atol=0, err_msg=f"{day} {col}")
        else:
            assert a[a.notna()].tolist() == b[b.notna()].tolist(), (day, col)


def _duckdb_window(tiny: dict[str, Any], home: Path) -> dict[str, Any]:
    """The baseline: the tiny window on the duckdb store, named explicitly (the session's tiny
    workspace is built on $RANKER_OFFLINE_STORE's store, which may be spark itself)."""
    from features import feast_repo
    from features.window import build_window

    shutil.copytree(Path(tiny["home"]) / "source", home / "source")
    ws = Workspace.resolve(home)
    duckdb = StoreSettings(offline_store="duckdb")
    assert feast_repo.apply(ws, duckdb).offline_store == "duckdb"
    return build_window(ws, dt.date.fromisoformat(tiny["end"]), WINDOW_DAYS, settings=duckdb)


def test_spark_and_duckdb_build_the_same_window(
    tiny: dict[str, Any], tmp_path: Path, spark_settings: StoreSettings
) -> None:
    from features import feast_repo
    from features.window import build_window

    home = tmp_path / "home"
    shutil.copytree(Path(tiny["home"]) / "source", home / "source")
    ws = Workspace.resolve(home)
    applied = feast_repo.apply(ws, spark_settings)
    assert applied.offline_store == "spark"
    end = dt.date.fromisoformat(tiny["end"])
    spark = build_window(ws, end, WINDOW_DAYS, settings=spark_settings)
    duck = _duckdb_window(tiny, tmp_path / "duck")

    assert spark["days_built"] == WINDOW_DAYS + 1
    assert spark["window_id"] == duck["window_id"]  # same definitions, same source bytes
    assert spark["schema"] == duck["schema"]
    spark_parts = [*spark["train"], spark["eval"]]
    for d, s in zip([*duck["train"], duck["eval"]], spark_parts, strict=True):
        assert (d["date"], d["rows"], d["partition_key"]) == (s["date"], s["rows"], s["partition_key"])
        assert s["label_rate"] == d["label_rate"] and s["null_rates"] == d["null_rates"]
        stats = json.loads((Path(s["path"]).parent / "partition.json").read_text())
        assert stats["offline_store"] == "spark"
        duck_stats = json.loads((Path(d["path"]).parent / "partition.json").read_text())
        assert duck_stats["offline_store"] == "duckdb"  # not Spark compared with Spark
        _assert_same_day(pd.read_parquet(d["path"]), pd.read_parquet(s["path"]), d["date"])
    # a window with features: not all null (the comparison above would also pass on empty joins);
    # the history views' as_of is null where a pair has no row (most user x pin pairs), their
    # counts read 0 there, and both stores fill the same rows
    last = pd.read_parquet(spark_parts[-1]["path"])
    pair_as_of = {f"{view}__as_of" for view in HISTORY_VIEWS}
    features = [c for c in last.columns if c not in IMPRESSION_SCHEMA.names and c not in pair_as_of]
    assert all(last[c].notna().mean() >= 0.5 for c in features)
    assert spark["zero_filled"] == duck["zero_filled"] == list(HISTORY_FEATURES)
    assert spark["eval"]["zero_filled"] == duck["eval"]["zero_filled"]
    for view in HISTORY_VIEWS:
        assert last[f"{view}__as_of"].notna().any() and (last[f"{view}__impressions_28d"] > 0).any()

    # serving: the online store loaded through the Spark store holds the newest snapshot
    from features import sources

    assert feast_repo.materialize(ws, end, spark_settings).mode == "full"
    users = sources.read_day(ws, sources.USERS, end + dt.timedelta(days=1)).to_pandas().head(5)
    pairs = sources.read_day(ws, sources.USER_PINS, end + dt.timedelta(days=1)).to_pandas().head(5)
    store = feast_repo.open_store(ws, spark_settings)
    online = store.get_online_features(
        features=["user_stats:country", "user_stats:saves_28d"],
        entity_rows=[{"user_id": int(u)} for u in users["user_id"]],
        full_feature_names=True,
    ).to_dict()
    assert online["user_stats__country"] == users["country"].tolist()
    assert online["user_stats__saves_28d"] == users["saves_28d"].tolist()
    online = store.get_online_features(
        features=["user_pin_stats:impressions_28d", "user_pin_stats:saves_28d"],
        entity_rows=[
            {"user_id": int(u), "pin_id": int(p)}
            for u, p in zip(pairs["user_id"], pairs["pin_id"], strict=True)
        ],
        full_feature_names=True,
    ).to_dict()
    assert online["user_pin_stats__impressions_28d"] == pairs["impressions_28d"].tolist()
    assert online["user_pin_stats__saves_28d"] == pairs["saves_28d"].tolist()
