"""Failure callbacks: record a failed step for monitoring, never raise."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from ranker_dags.decisions import STEP_OF_TASK
from ranker_dags.params import ranker_run_id
from ranker_dags.ranker_cli import ranker_argv, run_ranker
from ranker_dags.settings import OrchestrationSettings

if TYPE_CHECKING:
    from airflow.sdk import Context

log = logging.getLogger(__name__)


def failure_publish_args(task_id: str) -> list[str]:
    step = STEP_OF_TASK.get(task_id, "other")
    return ["metrics", "publish", "--status", "failed", "--failed-step", step]


def make_failure_callback(settings: OrchestrationSettings) -> Callable[[Context], None]:
    """A task ``on_failure_callback`` that publishes the run as failed (naming the task) right
    away, so the failure reaches Prometheus even if the run never gets to ``publish_metrics``."""

    def record_failure(context: Context) -> None:
        ti = context.get("ti") or context.get("task_instance")
        task_id = getattr(ti, "task_id", "unknown")
        try:
            run_id = ranker_run_id(context["dag_run"].run_id)
            argv = ranker_argv(
                settings.ranker_bin, failure_publish_args(task_id), home=settings.home, run_id=run_id
            )
            run_ranker(argv)
        except Exception:  # a callback must never mask the task's own failure
            log.exception("could not record the failure of %s for monitoring", task_id)

    return record_failure
