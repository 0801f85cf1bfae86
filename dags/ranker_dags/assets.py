"""The champion model as an Airflow Asset: ``ranker_retrain`` (on promotion) and ``ranker_rollback``
emit events on it, so a serving DAG scheduled on it reloads the model. Event extras carry the
version and the previous champion."""

from __future__ import annotations

from airflow.sdk import Asset

CHAMPION = Asset(name="ranker_champion", uri="ranker://champion", group="model")
