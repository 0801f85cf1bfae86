"""Airflow DAG ``ranker_retrain``: the daily retrain of the home-feed save ranker.

plan → check_freshness → build_window → validate_window → train → gate → decide
  → promote | record_rejection | keep_champion → materialize_online → publish_metrics

Every step is a ``ranker`` CLI call in the project environment (``$RANKER_BIN``), so the same
command runs locally, in a container or in a pod; this file only wires the steps. Deployment
settings come from ``RANKER_*`` environment variables (``ranker_dags/settings.py``) and the
pipeline config (``<home>/ranker.toml`` or ``$RANKER_CONFIG``, read by the steps themselves); run
parameters from the validated Params, which the steps get as ``--params`` (a layer above the
config; an empty Param leaves the config's value). docs/orchestration.md explains both.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from airflow.providers.standard.operators.empty import EmptyOperator
from airflow.sdk import DAG, AssetOrTimeSchedule, CronDataIntervalTimetable, dag, get_current_context, task
from airflow.sdk.exceptions import AirflowException, AirflowFailException
from airflow.sdk.timezone import datetime
from ranker_dags import decisions
from ranker_dags.assets import BASE, CHAMPION
from ranker_dags.callbacks import make_failure_callback
from ranker_dags.launchers import container_train_operator, params_arg, summary_from_xcom, train_step_args
from ranker_dags.params import PlanError, make_plan, ranker_run_id, retrain_params
from ranker_dags.ranker_cli import EXIT_NEGATIVE, EXIT_OK, ranker_argv, run_ranker
from ranker_dags.settings import OrchestrationSettings

log = logging.getLogger(__name__)
WATCHER = "fail_run_if_a_step_failed"
DECISION_KEY = "decision"  # XCom key of `ranker decide`'s answer, pushed by the decide task


class SourceNotReady(AirflowException):
    """The eval day's source data has not landed yet: retried with backoff."""


def build_retrain_dag(settings: OrchestrationSettings) -> DAG:
    on_failure = make_failure_callback(settings)

    def ranker(
        plan: dict[str, Any], args: list[str], allowed: tuple[int, ...] = (EXIT_OK,), record: bool = True
    ) -> Any:
        run_id = plan["run_id"] if record else None
        argv = ranker_argv(settings.ranker_bin, args, home=settings.home, run_id=run_id)
        return run_ranker(argv, allowed_exit_codes=allowed, extra_env={"RANKER_ACTOR": plan["actor"]})

    transient = {"retries": settings.task_retries}
    no_retry = {"retries": 0}

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
            "on_failure_callback": on_failure,
        },
        tags=["ranker", "training"],
        doc_md=__doc__,
    )
    def ranker_retrain() -> None:
        @task(execution_timeout=timedelta(minutes=2), **no_retry)
        def plan() -> dict[str, Any]:
            context = get_current_context()
            dag_run = context["dag_run"]
            try:
                run_plan = make_plan(
                    context["params"],
                    airflow_run_id=dag_run.run_id,
                    run_type=str(getattr(dag_run.run_type, "value", dag_run.run_type)),
                    data_interval_end=dag_run.data_interval_end,
                    logical_date=dag_run.logical_date,
                    run_after=dag_run.run_after,
                    actor=getattr(dag_run, "triggering_user_name", None),
                )
            except PlanError as exc:
                raise AirflowFailException(f"invalid run parameters: {exc}") from None
            return run_plan.to_dict()

        @task(execution_timeout=timedelta(minutes=10), **transient)
        def check_freshness(plan: dict[str, Any]) -> dict[str, Any]:
            summary = ranker(plan, ["features", "freshness"]).summary
            problem = decisions.freshness_problem(summary, plan["window_end"])
            if problem:
                raise SourceNotReady(problem)
            return summary

        @task(execution_timeout=timedelta(hours=2), **transient)
        def build_window(plan: dict[str, Any], freshness: dict[str, Any]) -> dict[str, Any]:
            args = ["features", "window", "--end", plan["window_end"], "--params", params_arg(plan)]
            return ranker(plan, args).summary

        @task(execution_timeout=timedelta(minutes=5), **no_retry)
        def validate_window(plan: dict[str, Any], window: dict[str, Any]) -> dict[str, Any]:
            problems = decisions.window_problems(window, plan)
            if problems:
                raise AirflowFailException("window failed validation: " + "; ".join(problems))
            return window

        train_kwargs: dict[str, Any] = {
            "task_id": "train",
            "pool": settings.training_pool,
            "execution_timeout": timedelta(hours=8),
            "retries": min(settings.task_retries, 1),
        }
        if settings.launcher == "local":

            @task(**train_kwargs)
            def train(plan: dict[str, Any], window: dict[str, Any]) -> dict[str, Any]:
                summary: dict[str, Any] = ranker(plan, train_step_args(plan, settings.train_nproc)).summary
                return summary

            plan_out = plan()
            window_ok = validate_window(plan_out, build_window(plan_out, check_freshness(plan_out)))
            train_out = train(plan_out, window_ok)
        else:
            plan_out = plan()
            window_ok = validate_window(plan_out, build_window(plan_out, check_freshness(plan_out)))
            train_op = container_train_operator(settings, **train_kwargs)
            window_ok >> train_op
            train_out = train_op.output

        @task(execution_timeout=timedelta(hours=1), **no_retry)
        def gate(plan: dict[str, Any], train_result: Any) -> dict[str, Any]:
            candidate = summary_from_xcom(train_result)["version"]
            args = ["gate", "--candidate", str(candidate), "--end", plan["window_end"]]
            args += ["--params", params_arg(plan)]
            result = ranker(plan, args, allowed=(EXIT_OK, EXIT_NEGATIVE))
            report = {**result.summary, "candidate_version": candidate}
            for line in decisions.gate_check_lines(report):
                log.info("%s", line)
            try:  # report.md + a labelled curve.png beside the model: for people, never fails the gate
                written = ranker(plan, ["report", "--run", plan["run_id"]], record=False).summary
                log.info("run report: %s (curve: %s)", written.get("report"), written.get("curve"))
            except AirflowException as exc:
                log.warning("no run report: %s", exc)
            return report

        @task.branch(execution_timeout=timedelta(minutes=2), **no_retry)
        def decide(plan: dict[str, Any], report: dict[str, Any]) -> str:
            # the promotion policy is `ranker decide`'s; the branch tasks read its answer from XCom
            decision = ranker(plan, decisions.decide_args(plan, report["candidate_version"])).summary
            get_current_context()["ti"].xcom_push(key=DECISION_KEY, value=decision)
            branch_task = decisions.branch_task(decision)
            log.info("decision: %s %s (%s)", branch_task, decision.get("version"), decision.get("reason"))
            return branch_task

        def decision() -> dict[str, Any]:
            answer: dict[str, Any] = get_current_context()["ti"].xcom_pull(
                task_ids="decide", key=DECISION_KEY
            )
            return answer

        @task(
            execution_timeout=timedelta(minutes=10),
            outlets=[CHAMPION],
            task_display_name=decisions.DISPLAY_NAMES[decisions.PROMOTE],
            **transient,
        )
        def promote(plan: dict[str, Any]) -> dict[str, Any]:
            summary: dict[str, Any] = ranker(plan, decisions.promote_args(decision())).summary
            get_current_context()["outlet_events"][CHAMPION].extra = {
                "version": summary.get("version"),
                "previous": summary.get("previous"),
                "window_end": plan["window_end"],
                "run_id": plan["run_id"],
            }
            return summary

        @task(
            execution_timeout=timedelta(minutes=10),
            task_display_name=decisions.DISPLAY_NAMES[decisions.RECORD_REJECTION],
            **transient,
        )
        def record_rejection(plan: dict[str, Any]) -> dict[str, Any]:
            result: dict[str, Any] = ranker(plan, decisions.reject_args(decision())).summary
            return result

        # a dry run, or a rerun of a date that already promoted its model
        keep_champion = EmptyOperator(
            task_id=decisions.KEEP_CHAMPION,
            task_display_name=decisions.DISPLAY_NAMES[decisions.KEEP_CHAMPION],
        )

        @task(
            execution_timeout=timedelta(hours=1),
            trigger_rule="none_failed_min_one_success",
            **transient,
        )
        def materialize_online(plan: dict[str, Any]) -> dict[str, Any]:
            summary: dict[str, Any] = ranker(
                plan, ["features", "materialize", "--end", plan["window_end"]]
            ).summary
            return summary

        @task(execution_timeout=timedelta(minutes=10), trigger_rule="all_done", **transient)
        def publish_metrics() -> dict[str, Any]:
            # Runs even when plan failed, so the run id comes from the Airflow run, not the plan.
            context = get_current_context()
            ti = context["ti"]
            states = ti.get_task_states(dag_id=ti.dag_id, run_ids=[ti.run_id])[ti.run_id]
            states = {task_id: state for task_id, state in states.items() if task_id != ti.task_id}
            outcome = decisions.run_outcome(states)
            args = decisions.publish_args(states)
            run = {"run_id": ranker_run_id(context["dag_run"].run_id), "actor": "airflow"}
            return {**ranker(run, args).summary, "outcome": outcome}

        @task(task_id=WATCHER, trigger_rule="one_failed", on_failure_callback=None, retries=0)
        def fail_run_if_a_step_failed() -> None:
            # publish_metrics (all_done) is a leaf that succeeds after failures; this leaf makes the
            # DagRun itself failed when any step failed (and is skipped when none did).
            raise AirflowFailException("a step of this retrain failed: see the failed task(s)")

        report = gate(plan_out, train_out)
        branch = decide(plan_out, report)
        outcomes = [promote(plan_out), record_rejection(plan_out), keep_champion]
        branch >> outcomes
        materialized = materialize_online(plan_out)
        outcomes >> materialized
        materialized >> publish_metrics()
        fail_run_if_a_step_failed()

    retrain = ranker_retrain()
    watcher = retrain.get_task(WATCHER)
    for step in retrain.tasks:
        if step is not watcher:
            step >> watcher
    return retrain


ranker_retrain = build_retrain_dag(OrchestrationSettings.from_env())
