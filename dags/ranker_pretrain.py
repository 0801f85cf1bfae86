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
from typing import Any

from airflow.sdk import DAG, CronDataIntervalTimetable, Param, dag, get_current_context, task
from airflow.sdk.exceptions import AirflowFailException
from airflow.sdk.timezone import datetime
from ranker_dags.assets import BASE
from ranker_dags.callbacks import make_failure_callback
from ranker_dags.params import REASON_MAX, PlanError, ranker_run_id, resolve_window_end
from ranker_dags.ranker_cli import ranker_argv, run_ranker
from ranker_dags.settings import OrchestrationSettings


def pretrain_args(window_end: str, reason: str | None) -> list[str]:
    args = ["pretrain", "--end", window_end]
    if reason and reason.strip():
        args += ["--reason", reason.strip()]
    return args


def build_pretrain_dag(settings: OrchestrationSettings) -> DAG:
    @dag(
        dag_id="ranker_pretrain",
        schedule=CronDataIntervalTimetable(settings.pretrain_cron, timezone="UTC"),
        start_date=datetime(2026, 1, 1),
        catchup=False,
        max_active_runs=1,
        dagrun_timeout=timedelta(hours=12),
        params={
            "window_end": Param(
                None,
                type=["null", "string"],
                format="date",
                title="Daily window end",
                description="Eval day of the daily window the base is for (YYYY-MM-DD). Empty: yesterday.",
            ),
            "reason": Param(
                None,
                type=["null", "string"],
                maxLength=REASON_MAX,
                title="Reason",
                description="Recorded with the base's move (default: the range it was trained on).",
            ),
        },
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
        def pretrain() -> dict[str, Any]:
            context = get_current_context()
            dag_run = context["dag_run"]
            params = context["params"]
            try:
                end = resolve_window_end(
                    requested=params.get("window_end"),
                    run_type=str(getattr(dag_run.run_type, "value", dag_run.run_type)),
                    data_interval_end=dag_run.data_interval_end,
                    logical_date=dag_run.logical_date,
                    run_after=dag_run.run_after,
                )
            except PlanError as exc:
                raise AirflowFailException(f"invalid run parameters: {exc}") from None
            actor = getattr(dag_run, "triggering_user_name", None) or "airflow"
            argv = ranker_argv(
                settings.ranker_bin,
                pretrain_args(end.isoformat(), params.get("reason")),
                home=settings.home,
                run_id=ranker_run_id(dag_run.run_id),
            )
            summary: dict[str, Any] = run_ranker(argv, extra_env={"RANKER_ACTOR": actor}).summary
            context["outlet_events"][BASE].extra = {
                "version": summary.get("version"),
                "previous": summary.get("previous_base"),
                "base_range": summary.get("base_range"),
                "for_end": summary.get("for_end"),
            }
            return summary

        pretrain()

    return ranker_pretrain()


ranker_pretrain = build_pretrain_dag(OrchestrationSettings.from_env())
