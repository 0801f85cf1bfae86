"""Send a :class:`TrackingRecord` to MLflow: :func:`track`.

Tracking must never fail or hold up the step it describes: any trouble reaching or writing to
MLflow (connection refused, a 5xx, a locked SQLite file, a timeout) queues the record on disk
(``<home>/mlflow/queue``, :mod:`ranking.tracking.queue`) for ``ranker tracking replay``, and the
step goes on with a one-line note. MLflow's own HTTP client retries for minutes; our calls make
one try each, bounded by ``[tracking] timeout_seconds``.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from ranking.core.noise import debug_wanted
from ranking.tracking.records import (
    MAX_PARAM_VALUE_CHARS,
    MAX_TAG_VALUE_CHARS,
    PARENT_RECORD_ID_TAG,
    RECORD_ID_TAG,
    MetricPoint,
    TrackingRecord,
)
from ranking.tracking.settings import TrackingSettings, tracking_settings

if TYPE_CHECKING:
    from mlflow import MlflowClient
    from mlflow.entities import Param, Run

__all__ = [
    "TrackingRecord",
    "TrackingRef",
    "TrackingSettings",
    "mlflow_client",
    "one_line",
    "send_record",
    "tracking_settings",
]

log = logging.getLogger(__name__)

# a changed param (MLflow params are immutable) is kept as this tag, the first value stays the param
CHANGED_PARAM_TAG = "ranker.param_changed."
# MLflow's log_batch limits (mlflow.utils.validation): 1000 metrics, 100 params, 100 tags, 1000 in all
_BATCH_METRICS, _BATCH_PARAMS, _BATCH_TAGS = 1000, 100, 100
_MAX_MESSAGE_CHARS = 160


class TrackingRef(BaseModel):
    """Where a record went: its MLflow run, or the queue."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    record_id: str
    run_id: str | None
    experiment_id: str | None
    queued: bool
    url: str | None
    message: str
    """one line for the operator"""

    @classmethod
    def unsent(cls, record_id: str, message: str, *, queued: bool = False) -> TrackingRef:
        """A record that has no MLflow run (yet): queued, or not tracked at all."""
        return cls(
            record_id=record_id, run_id=None, experiment_id=None, queued=queued, url=None, message=message
        )


def one_line(exc: BaseException | str, limit: int = _MAX_MESSAGE_CHARS) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    if isinstance(exc, BaseException):
        text = f"{type(exc).__name__}: {text}"
    return text if len(text) <= limit else text[: limit - 1] + "…"


@contextlib.contextmanager
def bounded_calls(settings: TrackingSettings) -> Iterator[None]:
    """MLflow's HTTP calls in this block: one try each, at most ``timeout_seconds`` (its defaults,
    7 retries with backoff and a 120 s timeout, would hold a run for minutes on a down server).
    MLflow reads these variables on every request; the previous values are restored after.
    What MLflow prints goes to stderr."""
    values = {
        "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0",
        "MLFLOW_HTTP_REQUEST_TIMEOUT": str(max(1, math.ceil(settings.timeout_seconds))),
        # stdout is the command's JSON summary: not MLflow's "View run at" lines
        "MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT": "true",
    }
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    # MLflow logs a store error with its traceback (a full disk, a locked database) before it
    # raises; the caller says it in one line (queued, or why not), so MLflow's own log is kept
    # for --log-level DEBUG only
    import mlflow  # noqa: F401  # it sets its loggers' levels on import: import before quieting them

    mlflow_log = logging.getLogger("mlflow")
    level = mlflow_log.level
    if not debug_wanted():
        mlflow_log.setLevel(logging.CRITICAL + 1)
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        mlflow_log.setLevel(level)
        for key, old in saved.items():
            if old is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = old


@contextlib.contextmanager
def store_lock(settings: TrackingSettings) -> Iterator[None]:
    """One writer at a time on a local store (backtest days are tracked from parallel processes;
    SQLite would answer the others 'database is locked'). A server serialises its own writes."""
    if not settings.local:
        yield
        return
    from filelock import FileLock

    settings.store_lock.parent.mkdir(parents=True, exist_ok=True)
    # waits: a writer holds it for one record's calls; past this, the record is queued
    with FileLock(settings.store_lock, timeout=max(30.0, 6 * settings.timeout_seconds)):
        yield


def mlflow_client(settings: TrackingSettings) -> MlflowClient:
    from mlflow import MlflowClient

    if settings.local and settings.uri.startswith("sqlite:///"):
        from ranking.tracking.settings import local_path

        Path(local_path(settings.uri)).parent.mkdir(parents=True, exist_ok=True)
    return MlflowClient(tracking_uri=settings.uri, registry_uri=settings.uri)


def experiment_id(client: MlflowClient, name: str, settings: TrackingSettings) -> str:
    """The experiment's id, created (or restored) when needed."""
    from mlflow.exceptions import MlflowException

    exp = client.get_experiment_by_name(name)
    if exp is not None:
        if exp.lifecycle_stage == "deleted":
            client.restore_experiment(exp.experiment_id)
        return str(exp.experiment_id)
    location = Path(settings.artifacts, name).as_uri() if settings.artifacts else None
    try:
        return str(client.create_experiment(name, artifact_location=location))
    except MlflowException as exc:  # another process created it first
        if exc.error_code != "RESOURCE_ALREADY_EXISTS":
            raise
        found = client.get_experiment_by_name(name)
        if found is None:
            raise
        return str(found.experiment_id)


def find_run(client: MlflowClient, experiment_ids: list[str], record_id: str) -> Run | None:
    """The active run tagged with ``record_id`` (the oldest when a race made two)."""
    runs = client.search_runs(
        experiment_ids,
        filter_string=f"tags.`{RECORD_ID_TAG}` = '{record_id}'",
        order_by=["attributes.start_time ASC"],
        max_results=2,
    )
    return runs[0] if runs else None


def _chunks(items: list[Any], size: int) -> Iterator[list[Any]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


def _metric_timestamp(record: TrackingRecord) -> int:
    # fixed by the record, so a record sent twice logs the same (key, step, value, timestamp) rows,
    # which the store keeps once
    return record.end_ms or record.start_ms or 0


def _metrics(points: list[MetricPoint], timestamp: int) -> list[Any]:
    from mlflow.entities import Metric

    return [Metric(p.key, p.value, timestamp, p.step) for p in points]


def _run_tags(client: MlflowClient, exp_id: str, record: TrackingRecord, notes: list[str]) -> dict[str, str]:
    tags = {k: v[:MAX_TAG_VALUE_CHARS] for k, v in record.tags.items()}
    tags[RECORD_ID_TAG] = record.record_id
    tags["mlflow.runName"] = record.run_name
    if record.parent_record_id is not None:
        tags[PARENT_RECORD_ID_TAG] = record.parent_record_id
        parent = find_run(client, [exp_id], record.parent_record_id)
        if parent is None:
            notes.append(f"parent {record.parent_record_id} is not in MLflow: logged without it")
        else:
            tags["mlflow.parentRunId"] = parent.info.run_id
    return tags


def _new_params(record: TrackingRecord, logged: dict[str, str], tags: dict[str, str]) -> list[Param]:
    """The params the run lacks; a value that differs from the logged one (a rerun with another
    config) cannot replace it (MLflow params are immutable): it goes in a tag beside it."""
    from mlflow.entities import Param

    params: list[Param] = []
    for key, value in record.params.items():
        value = value[:MAX_PARAM_VALUE_CHARS]
        if key not in logged:
            params.append(Param(key, value))
        elif logged[key] != value:
            tags[f"{CHANGED_PARAM_TAG}{key}"[:250]] = value
    return params


def _upload(client: MlflowClient, run_id: str, paths: list[str], notes: list[str]) -> None:
    missing = [p for p in paths if not Path(p).is_file()]
    for path in paths:
        if path not in missing:
            client.log_artifact(run_id, path)
    if missing:
        notes.append(f"{len(missing)} artifact(s) no longer on disk, not uploaded: {missing[0]}")


def send_record(record: TrackingRecord, settings: TrackingSettings) -> tuple[str, str, list[str]]:
    """Log ``record`` as its MLflow run (created, or the existing one updated); (run id,
    experiment id, notes). Raises whatever MLflow raises: :func:`track` decides what to do."""
    from mlflow.entities import RunTag

    notes: list[str] = []
    with bounded_calls(settings), store_lock(settings):
        client = mlflow_client(settings)
        exp_id = experiment_id(client, record.experiment, settings)
        tags = _run_tags(client, exp_id, record, notes)
        run = find_run(client, [exp_id], record.record_id)
        if run is None:
            run = client.create_run(exp_id, start_time=record.start_ms, run_name=record.run_name)
        run_id = run.info.run_id
        params = _new_params(record, run.data.params, tags)
        if any(k.startswith(CHANGED_PARAM_TAG) for k in tags):
            notes.append("changed params kept as ranker.param_changed.* tags (MLflow params are immutable)")
        for batch in _chunks(params, _BATCH_PARAMS):
            client.log_batch(run_id, params=batch, synchronous=True)
        for tag_batch in _chunks([RunTag(k, v) for k, v in tags.items()], _BATCH_TAGS):
            client.log_batch(run_id, tags=tag_batch, synchronous=True)
        for metric_batch in _chunks(_metrics(record.metrics, _metric_timestamp(record)), _BATCH_METRICS):
            client.log_batch(run_id, metrics=metric_batch, synchronous=True)
        _upload(client, run_id, record.artifacts, notes)
        client.set_terminated(run_id, status=record.status, end_time=record.end_ms)
    return run_id, exp_id, notes
