"""The ranker's Feast feature repository: entities, batch sources, feature views, feature service.

A standard Feast repo (read by `feast plan|apply|ui` and by `ranker features apply`) beside the
`feature_store.yaml` template. The workspace comes from configuration: $RANKER_HOME, which must be
absolute — the sources are absolute globs into ``$RANKER_HOME/source`` because Feast's duckdb
offline store resolves a relative path against the working directory, and the Feast CLI changes
that directory to the repo before it loads this file.

The offline store named in the workspace's rendered ``$RANKER_HOME/feast/feature_store.yaml``
(default duckdb) picks the kind of source over the same parquet files: a FileSource for duckdb, a
SparkSource for spark. The feature views are the same on both.

Any change to this file changes the feature version, so every window partition is rebuilt.
"""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

import yaml
from feast import Entity, FeatureService, FeatureView, Field, FileSource, ValueType
from feast.data_format import ParquetFormat
from feast.data_source import DataSource
from feast.types import Float64, Int64, String, UnixTimestamp


def _home() -> Path:
    raw = os.environ.get("RANKER_HOME", "")
    if not raw or not Path(raw).is_absolute():
        raise RuntimeError(
            f"the ranker Feast repo needs RANKER_HOME set to the workspace's absolute path, got {raw!r}"
        )
    return Path(raw)


def _offline_store(home: Path) -> str:
    config = home / "feast" / "feature_store.yaml"
    if not config.is_file():
        return "duckdb"
    return str(yaml.safe_load(config.read_text())["offline_store"]["type"])


HOME = _home()
OFFLINE_STORE = _offline_store(HOME)


def _snapshots(name: str, table: str) -> DataSource:
    """Every day of a snapshot table: ``<home>/source/<table>/date=YYYY-MM-DD/*.parquet``."""
    path = str(HOME / "source" / table / "date=*" / "*.parquet")
    if OFFLINE_STORE == "spark":
        from feast.infra.offline_stores.contrib.spark_offline_store.spark_source import SparkSource

        return SparkSource(name=name, path=path, file_format="parquet", timestamp_field="event_timestamp")
    return FileSource(name=name, path=path, file_format=ParquetFormat(), timestamp_field="event_timestamp")


user = Entity(name="user", join_keys=["user_id"], value_type=ValueType.INT64, description="a home-feed user")
pin = Entity(
    name="pin",
    join_keys=["pin_id"],
    value_type=ValueType.INT64,
    description="a pin that can be shown in a home-feed slate",
)

category = Entity(
    name="category",
    join_keys=["category"],
    value_type=ValueType.STRING,
    description="a pin's category (pin_stats' category): the key of a user's history with a category",
)

# Daily snapshots taken at 00:00 UTC of day D from impressions in [D-7, D) and [D-28, D): a
# snapshot never holds anything that happened on or after its own timestamp. TTL 24 h: a snapshot
# serves its own day only, so a missing day gives nulls (which the window's null-rate check sees).
user_stats = FeatureView(
    name="user_stats",
    entities=[user],
    ttl=timedelta(hours=24),
    schema=[
        Field(name="country", dtype=String),
        Field(name="impressions_7d", dtype=Int64),
        Field(name="saves_7d", dtype=Int64),
        Field(name="save_rate_7d", dtype=Float64),
        Field(name="impressions_28d", dtype=Int64),
        Field(name="saves_28d", dtype=Int64),
        Field(name="save_rate_28d", dtype=Float64),
        Field(name="as_of", dtype=UnixTimestamp),  # the snapshot's time: the leak check reads it per row
    ],
    source=_snapshots("user_stats_source", "users"),
    online=True,
)

pin_stats = FeatureView(
    name="pin_stats",
    entities=[pin],
    ttl=timedelta(hours=24),
    schema=[
        Field(name="category", dtype=String),
        Field(name="impressions_7d", dtype=Int64),
        Field(name="saves_7d", dtype=Int64),
        Field(name="save_rate_7d", dtype=Float64),
        Field(name="impressions_28d", dtype=Int64),
        Field(name="saves_28d", dtype=Int64),
        Field(name="save_rate_28d", dtype=Float64),
        Field(name="age_days", dtype=Int64),
        Field(name="as_of", dtype=UnixTimestamp),
    ],
    source=_snapshots("pin_stats_source", "pins"),
    online=True,
)


# A user's history with a pin and with a category (issue 34): the same daily snapshots, one row
# per pair with an impression in the 28 days before (a pair seen 3 days ago is still there, so the
# 24 h TTL does not read it as absent); a pair absent from the day's snapshot had no impression in
# 28 days, and the window fills its counts and rates with 0. Rates: saves / (impressions + 1).
def _history_fields() -> list[Field]:
    return [
        Field(name="impressions_7d", dtype=Int64),
        Field(name="saves_7d", dtype=Int64),
        Field(name="save_rate_7d", dtype=Float64),
        Field(name="impressions_28d", dtype=Int64),
        Field(name="saves_28d", dtype=Int64),
        Field(name="save_rate_28d", dtype=Float64),
        Field(name="as_of", dtype=UnixTimestamp),
    ]


user_pin_stats = FeatureView(
    name="user_pin_stats",
    entities=[user, pin],
    ttl=timedelta(hours=24),
    schema=_history_fields(),
    source=_snapshots("user_pin_stats_source", "user_pins"),
    online=True,
)

# looked up with the pin's category as pin_stats has it at the impression (a second lookup, as
# serving does: the pin's features first, then the user's stats of its category)
user_category_stats = FeatureView(
    name="user_category_stats",
    entities=[user, category],
    ttl=timedelta(hours=24),
    schema=_history_fields(),
    source=_snapshots("user_category_stats_source", "user_categories"),
    online=True,
)

ranker_v1 = FeatureService(
    name="ranker_v1", features=[user_stats, pin_stats, user_pin_stats, user_category_stats]
)
