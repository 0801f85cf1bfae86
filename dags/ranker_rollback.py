"""Airflow DAG ``ranker_rollback``: on-call's manual rollback of the champion model.

Trigger it with ``reason`` (required) and optionally ``to_version`` (default: the previous
champion, as the registry's alias history says). The registry records who (the triggering user)
and why; the champion Asset gets an event, so downstream serving DAGs reload.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from airflow.sdk import DAG, Param, dag, get_current_context, task
from airflow.sdk.exceptions import AirflowFailException
from ranker_dags.assets import CHAMPION
from ranker_dags.callbacks import make_failure_callback
from ranker_dags.params import REASON_MAX, ranker_run_id
from ranker_dags.ranker_cli import ranker_argv, run_ranker
from ranker_dags.settings import OrchestrationSettings

# the registry's version-id rule, the same string as VERSION_ID_PATTERN in ranking/core/ids.py (this
# environment cannot import `ranking`; tests/dags/test_id_patterns.py compares the two)
VERSION_PATTERN = r"\Av([0-9]{4,9})\Z"


def rollback_args(to_version: str | None, reason: str) -> list[str]:
    reason = (reason or "").strip()
    if not reason:
        raise AirflowFailException("a rollback needs a reason")
    args = ["rollback", "--reason", reason]
    if to_version:
        args += ["--to", to_version]
    return args


def build_rollback_dag(settings: OrchestrationSettings) -> DAG:
    @dag(
        dag_id="ranker_rollback",
        schedule=None,
        catchup=False,
        max_active_runs=1,
        params={
            "to_version": Param(
                None,
                type=["null", "string"],
                pattern=VERSION_PATTERN,
                title="Roll back to version",
                description="e.g. v0003. Empty: the previous champion.",
            ),
            "reason": Param(
                None,
                type="string",
                minLength=1,
                maxLength=REASON_MAX,
                title="Reason",
                description="Why (recorded in the registry history with who triggered it).",
            ),
        },
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
        def rollback() -> dict[str, Any]:
            context = get_current_context()
            dag_run = context["dag_run"]
            params = context["params"]
            actor = getattr(dag_run, "triggering_user_name", None) or "airflow:manual"
            argv = ranker_argv(
                settings.ranker_bin,
                rollback_args(params.get("to_version"), params["reason"]),
                home=settings.home,
                run_id=ranker_run_id(dag_run.run_id),
            )
            summary: dict[str, Any] = run_ranker(argv, extra_env={"RANKER_ACTOR": actor}).summary
            context["outlet_events"][CHAMPION].extra = {
                "version": summary.get("version"),
                "previous": summary.get("previous"),
                "action": "rollback",
                "who": actor,
            }
            return summary

        rollback()

    return ranker_rollback()


ranker_rollback = build_rollback_dag(OrchestrationSettings.from_env())
