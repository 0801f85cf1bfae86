"""The models as Airflow Assets. The champion: ``ranker_retrain`` (on promotion) and ``ranker_rollback``
emit events on it, so a serving DAG scheduled on it reloads the model. Event extras carry the
version and the previous champion."""

from __future__ import annotations

from airflow.sdk import Asset

CHAMPION = Asset(name="ranker_champion", uri="ranker://champion", group="model")
# the base model (ranker pretrain, the weekly ranker_pretrain DAG): ranker_retrain is scheduled on it
# too, so a new base is picked up by a retrain right away instead of at the next daily run
BASE = Asset(name="ranker_base", uri="ranker://base", group="model")
