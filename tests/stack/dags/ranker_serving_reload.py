"""Test DAG of the stack tests (a second DAG bundle, not the repo's dags/): a serving job scheduled on
the champion Asset, as a downstream consumer would be. It records the asset events that triggered it
(the version each promotion or rollback moved the champion to) and returns the newest version.

The Asset is declared by name and URI, not imported from ranker_dags: a consumer lives in another
repository and only shares the Asset's identity (dags/ranker_dags/assets.py).
"""

from __future__ import annotations

from typing import Any

from airflow.sdk import Asset, dag, get_current_context, task
from airflow.sdk.timezone import datetime

CHAMPION = Asset(name="ranker_champion", uri="ranker://champion", group="model")


@dag(dag_id="ranker_serving_reload", schedule=[CHAMPION], start_date=datetime(2026, 1, 1), catchup=False)
def ranker_serving_reload() -> None:
    @task
    def reload() -> dict[str, Any]:
        events = get_current_context()["triggering_asset_events"][CHAMPION]
        seen = [dict(event.extra or {}) for event in events]
        print(f"champion events: {seen}")
        return {"versions": [e.get("version") for e in seen], "version": seen[-1].get("version")}

    reload()


ranker_serving_reload()
