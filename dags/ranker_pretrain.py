"""Airflow DAG ``ranker_pretrain``: the weekly base model.

``ranker pretrain`` trains a model from scratch on the range just before the daily window
(disjoint from it) and moves the registry's ``base`` alias to it; the recipes with
``warm_start = "base"`` start from it every day (docs/study.md says why). The task emits an event
on the base Asset, on which ``ranker_retrain`` is also scheduled, so a new base is used by a
retrain right away. Manual runs take ``window_end`` (the eval day of the daily window the base
is for; default yesterday) and ``reason``.
"""

from __future__ import annotations

from datetime import timedelta

from airflow.sdk import DAG, CronDataIntervalTimetable, dag, task
from airflow.sdk.timezone import datetime
from ranker_dags import one_step_tasks
from ranker_dags.assets import BASE
from ranker_dags.callbacks import make_failure_callback
from ranker_dags.json_values import Summary
from ranker_dags.params import pretrain_params
from ranker_dags.settings import OrchestrationSettings


def build_pretrain_dag(settings: OrchestrationSettings) -> DAG:
    @dag(
        dag_id="ranker_pretrain",
        schedule=CronDataIntervalTimetable(settings.pretrain_cron, timezone="UTC"),
        start_date=datetime(2026, 1, 1),
        catchup=False,
        max_active_runs=1,
        dagrun_timeout=timedelta(hours=12),
        params=pretrain_params(),
        default_args={
            "owner": "ml-platform",
            "retry_delay": settings.retry_delay,
            "on_failure_callback": make_failure_callback(settings),
        },
        tags=["ranker", "training"],
        doc_md=__doc__,
    )
    def ranker_pretrain() -> None:
        @task(
            execution_timeout=timedelta(hours=8),
            pool=settings.training_pool,
            retries=min(settings.task_retries, 1),
            outlets=[BASE],
        )
        def pretrain() -> Summary:
            return one_step_tasks.pretrain(settings)

        pretrain()

    return ranker_pretrain()


ranker_pretrain = build_pretrain_dag(OrchestrationSettings.from_env())
