"""What the one-step DAGs' tasks do: ``ranker_pretrain``'s ``pretrain``, ``ranker_recipe_review``'s
``review`` and ``ranker_rollback``'s ``rollback``, each one ``ranker`` CLI call in a run folder of
its own. The DAG files only declare them."""

from __future__ import annotations

from airflow.sdk import get_current_context
from airflow.sdk.exceptions import AirflowFailException

from ranker_dags.assets import BASE, CHAMPION
from ranker_dags.json_values import Summary
from ranker_dags.params import ranker_run_id
from ranker_dags.ranker_cli import ranker_argv, run_ranker
from ranker_dags.run_context import triggering_user, window_end
from ranker_dags.settings import OrchestrationSettings

# what was reviewed (the Params, else the config's: a manual run shows they took effect) and why it
# recommends what it does (error: why a too_few_days review recommends none)
REVIEW_FIELDS = (
    "review_id",
    "status",
    "recommended",
    "reason",
    "error",
    "start",
    "end",
    "days",
    "min_days",
    "days_compared",
    "candidate_only",
    "running",
    "switch",
    "report",
)


def pretrain_args(window_end: str, reason: str | None) -> list[str]:
    args = ["pretrain", "--end", window_end]
    if reason and reason.strip():
        args += ["--reason", reason.strip()]
    return args


def review_args(end: str, days: int | None, candidate_only: bool) -> list[str]:
    args = ["review", "--end", end]
    if days is not None:
        args += ["--days", str(int(days))]
    if candidate_only:
        args.append("--candidate-only")
    return args


def rollback_args(to_version: str | None, reason: str) -> list[str]:
    reason = (reason or "").strip()
    if not reason:
        raise AirflowFailException("a rollback needs a reason")
    args = ["rollback", "--reason", reason]
    if to_version:
        args += ["--to", to_version]
    return args


def pretrain(settings: OrchestrationSettings) -> Summary:
    """``ranker pretrain`` for the run's window end; an event on the base Asset names the new base."""
    context = get_current_context()
    dag_run, params = context["dag_run"], context["params"]
    end = window_end(dag_run, params.get("window_end"))
    actor = triggering_user(dag_run) or "airflow"
    argv = ranker_argv(
        settings.ranker_bin,
        pretrain_args(end, params.get("reason")),
        home=settings.home,
        # its own run folder: a pretrain and a retrain scheduled at the same time share the Airflow
        # run id (scheduled__<time>)
        run_id=ranker_run_id(f"pretrain__{dag_run.run_id}"),
    )
    summary = run_ranker(argv, extra_env={"RANKER_ACTOR": actor}).summary
    context["outlet_events"][BASE].extra = {
        "version": summary.get("version"),
        "previous": summary.get("previous_base"),
        "base_range": summary.get("base_range"),
        "for_end": summary.get("for_end"),
    }
    return summary


def review(settings: OrchestrationSettings) -> Summary:
    """``ranker review`` up to the run's last eval day; the XCom keeps the recommendation's fields."""
    context = get_current_context()
    dag_run, params = context["dag_run"], context["params"]
    end = window_end(dag_run, params.get("end"))
    argv = ranker_argv(
        settings.ranker_bin,
        review_args(end, params.get("days"), bool(params.get("candidate_only"))),
        home=settings.home,
        run_id=ranker_run_id(f"review__{dag_run.run_id}"),
    )
    summary = run_ranker(argv).summary
    return {k: summary.get(k) for k in REVIEW_FIELDS}


def rollback(settings: OrchestrationSettings) -> Summary:
    """``ranker rollback`` as the triggering user; an event on the champion Asset names the model."""
    context = get_current_context()
    dag_run, params = context["dag_run"], context["params"]
    actor = triggering_user(dag_run) or "airflow:manual"
    argv = ranker_argv(
        settings.ranker_bin,
        rollback_args(params.get("to_version"), params["reason"]),
        home=settings.home,
        run_id=ranker_run_id(dag_run.run_id),
    )
    summary = run_ranker(argv, extra_env={"RANKER_ACTOR": actor}).summary
    context["outlet_events"][CHAMPION].extra = {
        "version": summary.get("version"),
        "previous": summary.get("previous"),
        "action": "rollback",
        "who": actor,
    }
    return summary
