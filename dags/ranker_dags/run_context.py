"""What a task reads from the Airflow run it belongs to: the run type, the window end, who triggered
it. Run parameters that cannot be resolved fail the task at once (``AirflowFailException``, no
retries: retrying cannot fix them)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from airflow.sdk.exceptions import AirflowFailException

from ranker_dags.params import PlanError, resolve_window_end

if TYPE_CHECKING:
    from airflow.sdk.types import DagRunProtocol


@contextmanager
def failing_on_plan_errors() -> Iterator[None]:
    """A ``PlanError`` raised inside becomes a task failure without retries."""
    try:
        yield
    except PlanError as exc:
        raise AirflowFailException(f"invalid run parameters: {exc}") from None


def run_type(dag_run: DagRunProtocol) -> str:
    """``scheduled``, ``manual``, ``backfill``, ``asset_triggered``: the run type's value."""
    return str(getattr(dag_run.run_type, "value", dag_run.run_type))


def window_end(dag_run: DagRunProtocol, requested: str | None) -> str:
    """The run's eval day (ISO date) by the window end rule (``ranker_dags/params.py``)."""
    with failing_on_plan_errors():
        end = resolve_window_end(
            requested=requested,
            run_type=run_type(dag_run),
            data_interval_end=dag_run.data_interval_end,
            logical_date=dag_run.logical_date,
            run_after=dag_run.run_after,
        )
    return end.isoformat()


def triggering_user(dag_run: DagRunProtocol) -> str | None:
    """Who triggered the run (None for a scheduled run)."""
    return getattr(dag_run, "triggering_user_name", None)
