"""Airflow DAG ``ranker_recipe_review``: the weekly recipe review.

One task, ``ranker review``: replays the last ``[review] days`` eval days for each of the
``[review] recipes`` with the backtest engine, recommends one (the cheapest recipe whose served
lift's CI is not below the best recipe's lower bound; no significant gain -> the cheapest), writes
``<home>/reviews/<end>/review.{md,json,png}`` and exports its figures to Prometheus (job
``ranker_recipe_review``). With ``[review] recipe = "auto"`` in the workspace config the daily
``ranker_retrain`` then trains the recommended recipe (a failed review, or one with too few days,
keeps the current one); with ``fixed`` (the default) the review only reports (docs/backtest.md
"Recipe review"). Manual runs take ``end`` (the last eval day; default: yesterday), ``days`` and
``candidate_only``; values the review would refuse are refused when the run is created.

The run's state is the review's outcome: a review that recommends, or one with fewer paired days
than ``[review] min_days`` (``too_few_days``: it reports and recommends none; a manual ``days``
below min_days is such a review), succeeds; a failed review (``ranker review`` exits 2) fails the
task, and so the run.
"""

from __future__ import annotations

from datetime import timedelta

from airflow.sdk import DAG, CronDataIntervalTimetable, dag, task
from airflow.sdk.timezone import datetime
from ranker_dags import one_step_tasks
from ranker_dags.json_values import Summary
from ranker_dags.params import review_params
from ranker_dags.settings import OrchestrationSettings


def build_review_dag(settings: OrchestrationSettings) -> DAG:
    @dag(
        dag_id="ranker_recipe_review",
        schedule=CronDataIntervalTimetable(settings.review_cron, timezone="UTC"),
        start_date=datetime(2026, 1, 1),
        catchup=False,
        max_active_runs=1,
        dagrun_timeout=timedelta(hours=12),
        params=review_params(),
        # no retrain failure callback: `ranker review` records and exports its own outcome (job
        # ranker_recipe_review, a failed review too, then exits 2); publishing it as a failed
        # retrain step ("other") counted a review as a failed retrain (issue 32)
        default_args={"owner": "ml-platform", "retry_delay": settings.retry_delay},
        tags=["ranker", "review"],
        doc_md=__doc__,
    )
    def ranker_recipe_review() -> None:
        @task(execution_timeout=timedelta(hours=8), pool=settings.training_pool, retries=0)
        def review() -> Summary:
            return one_step_tasks.review(settings)

        review()

    return ranker_recipe_review()


ranker_recipe_review = build_review_dag(OrchestrationSettings.from_env())
