"""Metric state that must outlive one CLI process: counters, "last ..." timestamps, the rejection
streak, recent stage durations and the outcomes already counted per run id.

It lives in ``<home>/metrics/state.json``; publishes of one workspace serialise their
read-modify-write under a file lock (``.state.lock``). :func:`advance_state` is pure.
"""

from __future__ import annotations

import contextlib
import statistics
from collections.abc import Iterator
from pathlib import Path

from filelock import FileLock
from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationError
from typing_extensions import TypedDict  # pydantic validates typing's TypedDict from Python 3.12 only

from ranking.core.atomic import atomic_write_json
from ranking.core.summaries import FreshnessSummary, MaterializeSummary
from ranking.core.workspace import Workspace
from ranking.monitoring.catalogue import DURATION_HISTORY, KNOWN_STEPS, STATUSES
from ranking.monitoring.fields import MetricsInputError, day_timestamp
from ranking.monitoring.runs import (
    RunRecord,
    dry_run,
    gate_decision,
    promoted,
    read_json_object,
    stage_durations,
)

COUNTED_RUNS_KEPT = 500  # run ids remembered so that re-publishing a run never double-counts


class PublishRecord(TypedDict, total=False):
    """What the last publish delivered (``ranker metrics show`` serves it); empty before the first."""

    run_id: str
    timestamp: float
    delivery: str  # pushgateway | textfile
    target: str
    exposition: str  # the text delivered


class MetricsState(BaseModel):
    """``state.json``; fields a later version dropped are ignored, ones it added start at their default."""

    model_config = ConfigDict(extra="ignore", ser_json_inf_nan="constants")

    runs_total: dict[str, float] = Field(default_factory=lambda: dict.fromkeys(STATUSES, 0.0))
    run_failures_total: dict[str, float] = Field(default_factory=lambda: dict.fromkeys(KNOWN_STEPS, 0.0))
    promotions_total: dict[str, float] = Field(default_factory=lambda: {"false": 0.0, "true": 0.0})
    rejections_total: float = 0.0
    push_failures_total: float = 0.0
    consecutive_rejections: float = 0.0
    last_success_timestamp: float | None = None
    last_failure_timestamp: float | None = None
    last_promotion_timestamp: float | None = None
    # data facts kept from the last run that reported them: a run that fails before its freshness
    # check must not make the stale-features alert lose its series
    feature_source_end_timestamp: float | None = None
    materialize_end_timestamp: float | None = None
    # stage -> [[run id, seconds], ...] of the latest runs, oldest first
    duration_history: dict[str, list[tuple[str, float]]] = Field(default_factory=dict)
    # run id -> outcomes already counted for it (so a re-publish never counts them twice)
    counted: dict[str, list[str]] = Field(default_factory=dict)
    last_publish: PublishRecord = Field(default_factory=lambda: PublishRecord())

    def model_post_init(self, context: object, /) -> None:
        # new label values added in later versions start at 0
        for status in STATUSES:
            self.runs_total.setdefault(status, 0.0)
        for step in KNOWN_STEPS:
            self.run_failures_total.setdefault(step, 0.0)

    def to_json(self) -> dict[str, JsonValue]:  # the JSON edge: what state.json holds
        return self.model_dump(mode="json")


def state_path(ws: Workspace) -> Path:
    return ws.metrics / "state.json"


def load_state(ws: Workspace) -> MetricsState:
    path = state_path(ws)
    if not path.exists():
        return MetricsState()
    try:
        return MetricsState.model_validate(read_json_object(path))
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(p) for p in error["loc"])
        raise MetricsInputError(f"{path}: {where}: {error['msg']}") from None


def save_state(ws: Workspace, state: MetricsState) -> None:
    atomic_write_json(state_path(ws), state.to_json())


@contextlib.contextmanager
def state_lock(ws: Workspace) -> Iterator[None]:
    """Serialise publishes of one workspace (read-modify-write of the state file)."""
    ws.metrics.mkdir(parents=True, exist_ok=True)
    # preserve_lock_file: a plain flock on a file that stays (no soft-lock fallback that unlinks it)
    with FileLock(ws.metrics / ".state.lock", preserve_lock_file=True):
        yield


def advance_state(state: MetricsState, run: RunRecord, now: float) -> MetricsState:
    """Fold one run into the persistent state (pure: returns a new state).

    Counters grow once per (run id, outcome): publishing the same run again (an Airflow retry)
    updates gauges but adds only outcomes not counted before.
    """
    new = state.model_copy(deep=True)
    done = set(new.counted.get(run.run_id, []))
    for outcome in run_outcomes(run):
        if outcome not in done:
            done.add(outcome)
            _count_outcome(new, outcome, now)
    moved, _ = promoted(run)
    # a dry run neither adds to the streak nor ends it: it judges no daily candidate. A run stopped
    # before its gate (data validation, a failure) has no verdict and leaves the streak as it is
    if (gate_decision(run) == "pass" and not dry_run(run)) or moved:
        new.consecutive_rejections = 0.0
    _record_last_run(new, run, now)
    _record_data_facts(new, run)
    if run.status == "success":
        _record_durations(new, run)
    _remember_counted(new, run.run_id, done)
    return new


def run_outcomes(run: RunRecord) -> list[str]:
    """What a run counts, as ``kind[:label value]``: its status, its failed step, a promotion
    (forced or not) and a gate rejection (never a dry run's: it rejects no daily candidate)."""
    outcomes: list[str] = [f"status:{run.status}"]
    if run.status == "failed":
        outcomes.append(f"failure:{run.failed_step}")
    moved, forced = promoted(run)
    if moved:
        outcomes.append(f"promotion:{'true' if forced else 'false'}")
    if gate_decision(run) == "reject" and not dry_run(run):
        outcomes.append("rejection")
    return outcomes


def _count_outcome(state: MetricsState, outcome: str, now: float) -> None:
    """Count one outcome not counted before (in place, on the fold's own copy)."""
    kind, _, value = outcome.partition(":")
    if kind == "status":
        state.runs_total[value] = state.runs_total.get(value, 0.0) + 1
    elif kind == "failure":
        state.run_failures_total[value] = state.run_failures_total.get(value, 0.0) + 1
    elif kind == "promotion":
        state.promotions_total[value] = state.promotions_total.get(value, 0.0) + 1
        state.last_promotion_timestamp = now
    elif kind == "rejection":
        state.rejections_total += 1
        state.consecutive_rejections += 1


def _record_last_run(state: MetricsState, run: RunRecord, now: float) -> None:
    if run.status == "success":
        state.last_success_timestamp = now
    else:
        state.last_failure_timestamp = now


def _record_data_facts(state: MetricsState, run: RunRecord) -> None:
    """The source data's and the materialization's end, from a run that reported them (kept
    otherwise)."""
    freshness = run.summaries.get("freshness")
    if isinstance(freshness, FreshnessSummary):
        state.feature_source_end_timestamp = day_timestamp(freshness.latest_source_date, plus_days=1)
    materialize = run.summaries.get("materialize")
    if isinstance(materialize, MaterializeSummary):
        state.materialize_end_timestamp = day_timestamp(materialize.end)


def _record_durations(state: MetricsState, run: RunRecord) -> None:
    """The run's stage durations, replacing its own earlier ones, keeping the latest runs only."""
    for stage, seconds in stage_durations(run).items():
        history = [h for h in state.duration_history.get(stage, []) if h[0] != run.run_id]
        history.append((run.run_id, seconds))
        state.duration_history[stage] = history[-(DURATION_HISTORY + 1) :]


def _remember_counted(state: MetricsState, run_id: str, done: set[str]) -> None:
    """The outcomes counted for ``run_id`` (a republished run keeps its place), dropping the
    oldest runs beyond COUNTED_RUNS_KEPT."""
    state.counted[run_id] = sorted(done)
    if len(state.counted) > COUNTED_RUNS_KEPT:  # dicts keep insertion order: drop the oldest
        for old in list(state.counted)[: len(state.counted) - COUNTED_RUNS_KEPT]:
            del state.counted[old]


def duration_baselines(state: MetricsState, exclude_run: str) -> dict[str, float]:
    """Median wall time per stage over the latest previous runs (not counting ``exclude_run``)."""
    out = {}
    for stage, history in state.duration_history.items():
        previous = [float(s) for rid, s in history if rid != exclude_run][-DURATION_HISTORY:]
        if previous:
            out[stage] = statistics.median(previous)
    return out
