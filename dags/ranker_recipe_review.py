"""Airflow DAG ``ranker_recipe_review``: the weekly recipe review.

One task, ``ranker review``: replays the last ``[review] days`` eval days for each of the
``[review] recipes`` with the backtest engine, recommends one (the cheapest recipe whose served
lift's CI is not below the best recipe's lower bound; no significant gain -> the cheapest), writes
``<home>/reviews/<end>/review.{md,json,png}`` and exports its figures to Prometheus (job
``ranker_recipe_review``). With ``[review] recipe = "auto"`` in the workspace config the daily
``ranker_retrain`` then trains the recommended recipe (a failed review, or one with too few days,
keeps the current one); with ``fixed`` (the default) the review only reports (docs/backtest.md
"Recipe review"). Manual runs take ``end`` (the last eval day; default: yesterday), ``days`` and
``candidate_only``.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from airflow.sdk import DAG, CronDataIntervalTimetable, Param, dag, get_current_context, task
from airflow.sdk.exceptions import AirflowFailException
from airflow.sdk.timezone import datetime
from ranker_dags.callbacks import make_failure_callback
from ranker_dags.params import PlanError, ranker_run_id, resolve_window_end
from ranker_dags.ranker_cli import ranker_argv, run_ranker
from ranker_dags.settings import OrchestrationSettings


def review_args(end: str, days: int | None, candidate_only: bool) -> list[str]:
    args = ["review", "--end", end]
    if days is not None:
        args += ["--days", str(int(days))]
    if candidate_only:
        args.append("--candidate-only")
    return args


def build_review_dag(settings: OrchestrationSettings) -> DAG:
    @dag(
        dag_id="ranker_recipe_review",
        schedule=CronDataIntervalTimetable(settings.review_cron, timezone="UTC"),
        start_date=datetime(2026, 1, 1),
        catchup=False,
        max_active_runs=1,
        dagrun_timeout=timedelta(hours=12),
        params={
            "end": Param(
                None,
                type=["null", "string"],
                format="date",
                title="Last eval day",
                description="The last eval day replayed (YYYY-MM-DD). Empty: yesterday.",
            ),
            "days": Param(
                None,
                type=["null", "integer"],
                minimum=1,
                maximum=365,
                title="Eval days",
                description="Eval days replayed. Empty: the workspace config's [review] days.",
            ),
            "candidate_only": Param(
                False,
                type="boolean",
                title="Candidates only",
                description="Compare the recipes' fresh candidates only (no gate replay, no served models).",
            ),
        },
        default_args={
            "owner": "ml-platform",
            "retry_delay": settings.retry_delay,
            "on_failure_callback": make_failure_callback(settings),
        },
        tags=["ranker", "review"],
        doc_md=__doc__,
    )
    def ranker_recipe_review() -> None:
        @task(execution_timeout=timedelta(hours=8), pool=settings.training_pool, retries=0)
        def review() -> dict[str, Any]:
            context = get_current_context()
            dag_run = context["dag_run"]
            params = context["params"]
            try:
                end = resolve_window_end(
                    requested=params.get("end"),
                    run_type=str(getattr(dag_run.run_type, "value", dag_run.run_type)),
                    data_interval_end=dag_run.data_interval_end,
                    logical_date=dag_run.logical_date,
                    run_after=dag_run.run_after,
                )
            except PlanError as exc:
                raise AirflowFailException(f"invalid run parameters: {exc}") from None
            argv = ranker_argv(
                settings.ranker_bin,
                review_args(end.isoformat(), params.get("days"), bool(params.get("candidate_only"))),
                home=settings.home,
                run_id=ranker_run_id(f"review__{dag_run.run_id}"),
            )
            summary: dict[str, Any] = run_ranker(argv).summary
            return {
                k: summary.get(k)
                for k in ("review_id", "status", "recommended", "running", "switch", "report")
            }

        review()

    return ranker_recipe_review()


ranker_recipe_review = build_review_dag(OrchestrationSettings.from_env())
