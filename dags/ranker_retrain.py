"""Airflow DAG ``ranker_retrain``: the daily retrain of the home-feed save ranker.

plan → check_freshness → build_window → validate_window → train → gate → decide → decide_branch
  → promote | record_rejection | keep_champion → materialize_online → publish_metrics
  → collect_garbage

The steps, their edges and the branch on the decision are declared once, in
``ranking/pipeline/graph.py`` (``ranker run`` executes the same graph); this DAG builds one task per
step from its export (``ranker_dags/retrain_graph.json``), each a ``ranker step NAME`` call in the
project environment (``$RANKER_BIN``), so the same command runs locally, in a container or in a
pod. Deployment settings come from ``RANKER_*`` environment variables (``ranker_dags/settings.py``)
and the pipeline config (``<home>/ranker.toml`` or ``$RANKER_CONFIG``, read by the steps
themselves); run parameters from the validated Params, which the steps get as ``--params`` (a
layer above the config; an empty Param leaves the config's value). docs/orchestration.md explains
both.
"""

from __future__ import annotations

from datetime import timedelta

from airflow.sdk import DAG, AssetOrTimeSchedule, CronDataIntervalTimetable, dag
from airflow.sdk.timezone import datetime
from ranker_dags import retrain_tasks
from ranker_dags.assets import BASE
from ranker_dags.callbacks import make_failure_callback
from ranker_dags.params import retrain_params
from ranker_dags.retrain_tasks import RetrainSteps
from ranker_dags.settings import OrchestrationSettings


def build_retrain_dag(settings: OrchestrationSettings) -> DAG:
    steps = RetrainSteps(settings)

    @dag(
        dag_id="ranker_retrain",
        # daily, and when ranker_pretrain publishes a new base model (a recipe warm-started from
        # the base then uses it at once; the run's eval day is the day before, as for a manual run)
        schedule=AssetOrTimeSchedule(
            timetable=CronDataIntervalTimetable(settings.cron, timezone="UTC"), assets=[BASE]
        ),
        start_date=datetime(2026, 1, 1),
        catchup=False,
        max_active_runs=1,
        dagrun_timeout=timedelta(hours=12),
        params=retrain_params(),
        default_args={
            "owner": "ml-platform",
            "retry_delay": settings.retry_delay,
            "retry_exponential_backoff": 2.0,
            "max_retry_delay": settings.max_retry_delay,
            "on_failure_callback": make_failure_callback(settings),
        },
        tags=["ranker", "training"],
        doc_md=__doc__,
    )
    def ranker_retrain() -> None:
        retrain_tasks.build_tasks(steps)

    retrain = ranker_retrain()
    retrain_tasks.watch_every_task(retrain)  # the watcher leaf (fail_run_if_a_step_failed)
    return retrain


ranker_retrain = build_retrain_dag(OrchestrationSettings.from_env())
