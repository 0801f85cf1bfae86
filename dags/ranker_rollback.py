"""Airflow DAG ``ranker_rollback``: on-call's manual rollback of the champion model.

Trigger it with ``reason`` (required) and optionally ``to_version`` (default: the previous
champion, as the registry's alias history says). The registry records who (the triggering user)
and why; the champion Asset gets an event, so downstream serving DAGs reload.
"""

from __future__ import annotations

from datetime import timedelta

from airflow.sdk import DAG, dag, task
from ranker_dags import one_step_tasks
from ranker_dags.assets import CHAMPION
from ranker_dags.callbacks import make_failure_callback
from ranker_dags.json_values import Summary
from ranker_dags.params import rollback_params
from ranker_dags.settings import OrchestrationSettings


def build_rollback_dag(settings: OrchestrationSettings) -> DAG:
    @dag(
        dag_id="ranker_rollback",
        schedule=None,
        catchup=False,
        max_active_runs=1,
        params=rollback_params(),
        default_args={
            "owner": "ml-platform",
            "retries": 0,
            "on_failure_callback": make_failure_callback(settings),
        },
        tags=["ranker", "on-call"],
        doc_md=__doc__,
    )
    def ranker_rollback() -> None:
        @task(execution_timeout=timedelta(minutes=10), outlets=[CHAMPION])
        def rollback() -> Summary:
            return one_step_tasks.rollback(settings)

        rollback()

    return ranker_rollback()


ranker_rollback = build_rollback_dag(OrchestrationSettings.from_env())
