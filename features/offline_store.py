"""Feast's DuckDB offline store, reading only the snapshots that can serve a lookup.

Feast's ibis point-in-time join (feast.infra.offline_stores.ibis, "TODO handle ttl") joins every
row of a view's source, across all its days, to the lookups on the join keys and only then drops
the rows outside ``[event_timestamp - ttl, event_timestamp]``. Our sources hold one snapshot per
day per entity (per user x pin pair for the history views), so one day's join read and matched
every day's snapshot of each key: its cost grew with the length of the history (the history views
made a window build 3.4x slower, issue 34). This store filters each source to
``[min(event_timestamp) - max ttl, max(event_timestamp)]`` before the join, which DuckDB pushes
into the parquet scan (row-group statistics skip the other days' files). No row that the join
could use is removed, so the result is Feast's own, row for row (tests/features/
test_offline_store.py compares them); the SQL offline stores (Spark) filter the same way already.

A custom offline store as Feast documents them: ``feature_store.yaml`` names it by its import path
(``offline_store: {type: features.offline_store.DayRangeDuckDBOfflineStore}``), which
``ranker features apply`` renders for ``[features] offline_store = "duckdb"``; the stock ``feast``
CLI loads it from the project's environment.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pandas as pd
from feast.data_source import DataSource
from feast.feature_view import FeatureView
from feast.infra.offline_stores import duckdb as feast_duckdb
from feast.infra.offline_stores.duckdb import DuckDBOfflineStore, DuckDBOfflineStoreConfig
from feast.infra.offline_stores.ibis import get_historical_features_ibis
from feast.infra.offline_stores.offline_store import RetrievalJob
from feast.infra.offline_stores.offline_utils import infer_event_timestamp_from_entity_df
from feast.infra.registry.base_registry import BaseRegistry
from feast.repo_config import RepoConfig
from pydantic import StrictStr

from features.feast_repo import DAY_RANGE_DUCKDB


class DayRangeDuckDBOfflineStoreConfig(DuckDBOfflineStoreConfig):
    type: StrictStr = DAY_RANGE_DUCKDB


def lookup_range(
    entity_df: pd.DataFrame, feature_views: list[FeatureView]
) -> tuple[pd.Timestamp, pd.Timestamp | None]:
    """(the newest lookup time, the oldest snapshot time any view can serve a lookup from: None
    when a view has no TTL, so every older snapshot can serve)."""
    column = infer_event_timestamp_from_entity_df(dict(zip(entity_df.columns, entity_df.dtypes, strict=True)))
    times = pd.to_datetime(entity_df[column], utc=True)
    ttls = [fv.ttl for fv in feature_views if fv.ttl]
    if len(ttls) < len(feature_views):
        return times.max(), None
    return times.max(), times.min() - max(ttls, default=timedelta(0))


class DayRangeDuckDBOfflineStore(DuckDBOfflineStore):
    """Feast's DuckDB offline store whose historical retrieval reads only the lookups' day range."""

    @staticmethod
    def get_historical_features(
        config: RepoConfig,
        feature_views: list[FeatureView],
        feature_refs: list[str],
        entity_df: pd.DataFrame | str,
        registry: BaseRegistry,
        project: str,
        full_feature_names: bool = False,
        filter_by_created_timestamp: bool = False,
    ) -> RetrievalJob:
        if not isinstance(entity_df, pd.DataFrame) or entity_df.empty:  # a SQL entity query: as Feast does
            return DuckDBOfflineStore.get_historical_features(
                config,
                feature_views,
                feature_refs,
                entity_df,
                registry,
                project,
                full_feature_names,
                filter_by_created_timestamp,
            )
        newest, oldest = lookup_range(entity_df, feature_views)

        def read_in_range(source: DataSource, repo_path: str) -> Any:  # an ibis Table
            table = feast_duckdb._read_data_source(source, repo_path)
            stamp = table[source.timestamp_field]
            kept = stamp <= newest.to_pydatetime()
            if oldest is not None:
                kept &= stamp >= oldest.to_pydatetime()
            return table.filter(kept)

        return get_historical_features_ibis(
            config=config,
            feature_views=feature_views,
            feature_refs=feature_refs,
            entity_df=entity_df,
            registry=registry,
            project=project,
            full_feature_names=full_feature_names,
            data_source_reader=read_in_range,
            data_source_writer=feast_duckdb._write_data_source,
            staging_location=config.offline_store.staging_location,
            staging_location_endpoint_override=config.offline_store.staging_location_endpoint_override,
            filter_by_created_timestamp=filter_by_created_timestamp,
        )
