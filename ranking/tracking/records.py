"""What a pipeline step sends to MLflow: one :class:`TrackingRecord` per logical run.

A record is plain data (no MLflow types), so it can be queued on disk as JSON when MLflow is down
and replayed later unchanged. ``record_id`` is the idempotency key: it becomes the run's tag
``ranker.record_id``, and a record sent twice (a rerun, a replay) updates that run instead of
making a second one.
"""

from __future__ import annotations

import math
import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

# the tag that names a run's record (the idempotency key) and its parent's
RECORD_ID_TAG = "ranker.record_id"
PARENT_RECORD_ID_TAG = "ranker.parent_record_id"
# a record id reaches a search filter (quoted) and a queue file's name: a closed alphabet, no quotes
RECORD_ID = re.compile(r"\A[A-Za-z0-9][A-Za-z0-9_.:+@=-]{0,249}\Z", re.ASCII)
# MLflow's own limits (mlflow.utils.validation): longer values are refused by the server
MAX_KEY_CHARS = 250
MAX_PARAM_VALUE_CHARS = 6000
MAX_TAG_VALUE_CHARS = 8000
EXPERIMENT_NAME = re.compile(r"\A[A-Za-z0-9][A-Za-z0-9_.+-]{0,99}\Z", re.ASCII)
# metric, param and tag keys: MLflow accepts alphanumerics, _ - . space : / (no "..", no leading /)
_KEY = re.compile(r"\A[A-Za-z0-9_\-. :/]{1,250}\Z")


def _check_key(key: str) -> str:
    if not _KEY.match(key) or ".." in key or key.startswith("/"):
        raise ValueError(f"{key[:60]!r} is not an MLflow key (letters, digits, _ - . space : /)")
    return key


class MetricPoint(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    key: str
    value: float
    step: int = 0

    @field_validator("key")
    @classmethod
    def _key(cls, value: str) -> str:
        return _check_key(value)

    @field_validator("value")
    @classmethod
    def _finite_or_nan(cls, value: float) -> float:
        # MLflow stores NaN and +-inf (as is_nan / clipped); JSON cannot carry inf, so keep NaN only
        return value if math.isfinite(value) else math.nan


class TrackingRecord(BaseModel):
    """One logical run: its params, metrics (with steps), lineage tags, artifacts and status."""

    model_config = ConfigDict(extra="forbid")

    record_id: str
    """idempotency key, e.g. "retrain:<pipeline run id>", "train:<run_dir name>", "backtest:<id>:day:<date>" """
    experiment: str
    """"ranker-retrain" | "ranker-train" | "ranker-pretrain" | "ranker-backtest" | "ranker-review" """
    run_name: str
    parent_record_id: str | None = None
    """a backtest/review day -> its parent (sent first: the queue keeps the order)"""
    params: dict[str, str] = Field(default_factory=dict)
    """flat "section.key" -> value (+ "<key>.source" where known)"""
    metrics: list[MetricPoint] = Field(default_factory=list)
    tags: dict[str, str] = Field(default_factory=dict)
    """lineage: "ranker.window", "ranker.base", "ranker.champion", "ranker.version", ..."""
    artifacts: list[str] = Field(default_factory=list)
    """absolute paths of files to upload (report.md, curve.png, the config)"""
    status: Literal["FINISHED", "FAILED", "KILLED"] = "FINISHED"
    start_ms: int | None = Field(default=None, ge=0)
    end_ms: int | None = Field(default=None, ge=0)

    @field_validator("record_id", "parent_record_id")
    @classmethod
    def _record_id(cls, value: str | None) -> str | None:
        if value is not None and not RECORD_ID.match(value):
            raise ValueError(f"{value[:60]!r} is not a record id (letters, digits, _ . : + @ = -; <= 250)")
        return value

    @field_validator("experiment")
    @classmethod
    def _experiment(cls, value: str) -> str:
        if not EXPERIMENT_NAME.match(value):
            raise ValueError(f"{value[:60]!r} is not an experiment name (letters, digits, _ . + -)")
        return value

    @field_validator("params", "tags")
    @classmethod
    def _keys(cls, value: dict[str, str]) -> dict[str, str]:
        for key in value:
            _check_key(key)
        return value

    @field_validator("artifacts")
    @classmethod
    def _absolute(cls, value: list[str]) -> list[str]:
        for path in value:
            if not path.startswith("/"):
                raise ValueError(f"{path[:80]!r}: artifact paths must be absolute")
        return value
