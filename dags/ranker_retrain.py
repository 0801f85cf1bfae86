"""Airflow DAG ``ranker_retrain``: the daily retrain of the home-feed save ranker.

plan → check_freshness → build_window → validate_window → train → gate → decide
  → promote | record_rejection | keep_champion → materialize_online → publish_metrics
  → collect_garbage

Every step is a ``ranker`` CLI call in the project environment (``$RANKER_BIN``), so the same
command runs locally, in a container or in a pod; this file only wires the steps (what each
does is ``ranker_dags/retrain_tasks.py``). Deployment settings come from ``RANKER_*`` environment
variables (``ranker_dags/settings.py``) and the pipeline config (``<home>/ranker.toml`` or ``$RANKER_CONFIG``, read by the steps themselves); run
parameters from the validated Params, which the steps get as ``--params`` (a layer above the
config; an empty Param leaves the config's value). docs/orchestration.md explains both.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from airflow.providers.standard.operators.empty import EmptyOperator
from airflow.sdk import DAG, AssetOrTimeSchedule, CronDataIntervalTimetable, XComArg, dag, task
from airflow.sdk.timezone import datetime
from ranker_dags import decisions, retrain_tasks
from ranker_dags.assets import BASE, CHAMPION
from ranker_dags.callbacks import make_failure_callback
from ranker_dags.params import retrain_params
from ranker_dags.retrain_tasks import WATCHER, RetrainSteps
from ranker_dags.settings import OrchestrationSettings

# A task called with an upstream's XComArg gets its value at run time; airflow.sdk types the call
# with the function's own parameters (Task.__call__), hence the arg-type ignores where tasks are
# wired (Airflow's fix is a mypy plugin it does not ship: apache/airflow#39514).


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
        run_plan, report = train_a_candidate(steps)
        serve_the_decision(steps, run_plan, report)

    retrain = ranker_retrain()
    retrain_tasks.watch_every_task(retrain)  # the watcher leaf (fail_run_if_a_step_failed)
    return retrain


def train_a_candidate(steps: RetrainSteps) -> tuple[XComArg, XComArg]:
    """plan → check_freshness → build_window → validate_window → train → gate: the run's plan and
    the gate's report on the candidate."""
    transient = steps.settings.task_retries  # the retries of a step that may fail for a while

    @task(execution_timeout=timedelta(minutes=2), retries=0)
    def plan() -> dict[str, Any]:
        return steps.plan()

    @task(execution_timeout=timedelta(minutes=10), retries=transient)
    def check_freshness(plan: dict[str, Any]) -> dict[str, Any]:
        return steps.check_freshness(plan)

    @task(execution_timeout=timedelta(hours=2), retries=transient)
    def build_window(plan: dict[str, Any], freshness: dict[str, Any]) -> dict[str, Any]:
        return steps.build_window(plan)

    @task(execution_timeout=timedelta(minutes=30), retries=0)
    def validate_window(plan: dict[str, Any], window: dict[str, Any]) -> dict[str, Any]:
        return steps.validate_window(plan)

    @task(execution_timeout=timedelta(hours=1), retries=0)
    def gate(plan: dict[str, Any], train_result: object) -> dict[str, Any]:
        return steps.gate(plan, train_result)

    run_plan = plan()
    freshness = check_freshness(run_plan)  # type: ignore[arg-type]  # XComArg: see the top
    window = validate_window(run_plan, build_window(run_plan, freshness))  # type: ignore[arg-type]
    report = gate(run_plan, retrain_tasks.train(steps, run_plan, window))  # type: ignore[arg-type]
    return run_plan, report


def serve_the_decision(steps: RetrainSteps, run_plan: XComArg, report: XComArg) -> None:
    """decide → promote | record_rejection | keep_champion → materialize_online → publish_metrics
    → collect_garbage, and the watcher leaf."""
    transient = steps.settings.task_retries

    @task.branch(execution_timeout=timedelta(minutes=2), retries=0)
    def decide(plan: dict[str, Any], report: dict[str, Any]) -> str:
        return steps.decide(plan, report)

    @task(
        execution_timeout=timedelta(minutes=10),
        retries=transient,
        outlets=[CHAMPION],
        task_display_name=decisions.DISPLAY_NAMES[decisions.PROMOTE],
    )
    def promote(plan: dict[str, Any]) -> dict[str, Any]:
        return steps.promote(plan)

    @task(
        execution_timeout=timedelta(minutes=10),
        retries=transient,
        task_display_name=decisions.DISPLAY_NAMES[decisions.RECORD_REJECTION],
    )
    def record_rejection(plan: dict[str, Any]) -> dict[str, Any]:
        return steps.record_rejection(plan)

    # a dry run, or a rerun of a date that already promoted its model
    keep_champion = EmptyOperator(
        task_id=decisions.KEEP_CHAMPION,
        task_display_name=decisions.DISPLAY_NAMES[decisions.KEEP_CHAMPION],
    )

    @task(
        execution_timeout=timedelta(hours=1),
        retries=transient,
        trigger_rule="none_failed_min_one_success",
    )
    def materialize_online(plan: dict[str, Any]) -> dict[str, Any]:
        return steps.materialize_online(plan)

    @task(execution_timeout=timedelta(minutes=10), retries=transient, trigger_rule="all_done")
    def publish_metrics() -> dict[str, Any]:
        return steps.publish_metrics()

    # `ranker gc`: what [retention] lets go, and the disk's series (job ranker_gc). Last, after the
    # run's own metrics and whatever happened: it never holds up a promotion. Its failure fails the
    # DagRun (the watcher) but is not the retrain's: no failure publish (RankerGcNotRunning says it)
    @task(
        execution_timeout=timedelta(minutes=30),
        retries=transient,
        trigger_rule="all_done",
        on_failure_callback=None,
    )
    def collect_garbage() -> dict[str, Any]:
        return steps.collect_garbage()

    @task(task_id=WATCHER, trigger_rule="one_failed", on_failure_callback=None, retries=0)
    def fail_run_if_a_step_failed() -> None:
        retrain_tasks.fail_run_if_a_step_failed()

    outcomes = [promote(run_plan), record_rejection(run_plan), keep_champion]  # type: ignore[arg-type]
    decide(run_plan, report) >> outcomes  # type: ignore[arg-type]  # XComArg: see the top
    materialized = materialize_online(run_plan)  # type: ignore[arg-type]  # XComArg: see the top
    outcomes >> materialized
    materialized >> publish_metrics() >> collect_garbage()
    fail_run_if_a_step_failed()


ranker_retrain = build_retrain_dag(OrchestrationSettings.from_env())
