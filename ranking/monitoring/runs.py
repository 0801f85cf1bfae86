"""A pipeline run as the metrics see it: its step summaries and failure records, read from
``<home>/pipeline/<run id>/`` (docs/architecture.md, "Step summaries"), and the facts derived from
them (status, the step that failed, promotion, gate decision, stage durations)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ConfigDict, JsonValue, StrictFloat, ValidationError

from ranking.core.atomic import atomic_write_json
from ranking.core.errors import RankerError
from ranking.core.summaries import (
    DecideSummary,
    GateSummary,
    PromoteSummary,
    RunSummary,
    StepSummary,
    parse_summary,
)
from ranking.core.workspace import Workspace, validate_run_id
from ranking.monitoring.catalogue import KNOWN_STEPS, STATUSES
from ranking.monitoring.fields import MetricsInputError, as_float, label

# Summaries that are not pipeline stages: this command's own summary and the whole-run summary.
OWN_STEPS = frozenset({"metrics", "metrics-show"})
NOT_A_STAGE = OWN_STEPS | {"run"}


class FailureRecord(BaseModel):
    """``failures/<step>.json``: a step that failed (:func:`record_failure`, e.g. from a DAG's
    failure callback). Only the timestamp is read: the earliest failure is the run's cause."""

    model_config = ConfigDict(extra="allow")

    step: str | None = None
    error: str | None = None
    timestamp: StrictFloat | None = None


@dataclass(frozen=True)
class RunRecord:
    run_id: str
    summaries: Mapping[str, StepSummary]  # step -> its summary, typed (ranking.core.summaries)
    failures: Mapping[str, FailureRecord]  # step -> its failure record
    status: str  # success | failed
    failed_step: str | None  # a KNOWN_STEPS value when status is failed


def failures_dir(ws: Workspace, run_id: str) -> Path:
    """Failure records of a run: ``<home>/pipeline/<run id>/failures/<step>.json``."""
    return ws.pipeline / validate_run_id(run_id) / "failures"


def record_failure(ws: Workspace, run_id: str, step: str, error: str, now: float | None = None) -> Path:
    """Write a failure record (what a DAG failure callback or a wrapper calls when a step fails)."""
    path = failures_dir(ws, run_id) / f"{validate_run_id(step)}.json"
    record = FailureRecord(step=step, error=error, timestamp=time.time() if now is None else now)
    atomic_write_json(path, record.model_dump(mode="json"))
    return path


def read_json_object(path: Path) -> dict[str, JsonValue]:
    """A JSON object from ``path``, for a model to validate (the JSON edge); anything else is a
    :class:`MetricsInputError` naming the file."""
    try:
        obj = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise MetricsInputError(f"cannot read {path}: {exc}") from None
    if not isinstance(obj, dict):
        raise MetricsInputError(f"{path}: expected a JSON object, got {type(obj).__name__}")
    return obj


Parsed = TypeVar("Parsed")


def _read_folder(
    folder: Path, parse: Callable[[str, dict[str, JsonValue], Path], Parsed]
) -> dict[str, Parsed]:
    """Each ``<step>.json`` of ``folder`` as ``parse`` makes it, by step."""
    if not folder.is_dir():
        return {}
    # dot-files are temp files of an atomic write in progress
    return {
        p.stem: parse(p.stem, read_json_object(p), p)
        for p in sorted(folder.glob("*.json"))
        if not p.name.startswith(".") and p.is_file()
    }


def _problems(exc: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(p) for p in e['loc']) or '(summary)'}: {e['msg']}"
        + ("" if e["type"] == "missing" else f" (got {e['input']!r:.80})")
        for e in exc.errors()
    )


def parse_failure_record(step: str, data: dict[str, JsonValue], path: Path) -> FailureRecord:
    try:
        return FailureRecord.model_validate(data)
    except ValidationError as exc:
        raise MetricsInputError(f"failure record {step} {path}: {_problems(exc)}") from None


def parse_step_summary(step: str, data: dict[str, JsonValue], path: Path) -> StepSummary:
    """``data`` (read from ``path``) as ``step``'s summary model; a field that does not fit is a
    :class:`MetricsInputError` naming the file, the field and the value."""
    try:
        return parse_summary(data, step)
    except ValidationError as exc:
        raise MetricsInputError(f"{step} summary {path}: {_problems(exc)}") from None


def step_failed(summary: StepSummary) -> bool:
    """Exit code 0 is success and 1 a negative decision (gate rejected); 2 and above failed."""
    return summary.exit_code >= 2 or bool(summary.error)


def promoted(run: RunRecord) -> tuple[bool, bool]:
    """(the champion moved in this run, it was a forced promotion). A no-op promote is no move."""
    promote = run.summaries.get("promote")
    if not isinstance(promote, PromoteSummary) or step_failed(promote) or promote.noop:
        return False, False
    return True, promote.forced


def gate_decision(run: RunRecord) -> str | None:
    """``pass`` or ``reject`` as the run's gate (or reject step) recorded it; None without one."""
    gate = run.summaries.get("gate")
    if gate is None:
        reject = run.summaries.get("reject")
        return "reject" if reject is not None and not step_failed(reject) else None
    if not isinstance(gate, GateSummary) or step_failed(gate):
        return None
    return gate.decision


def dry_run(run: RunRecord) -> bool:
    """The run was a dry run (its decide step or ``ranker run`` recorded so): it trains and gates
    but never moves the champion, so its gate's verdict is neither a rejection nor a pass of the
    daily candidates (the rejection counters and streak leave it out)."""
    for step, model in (("decide", DecideSummary), ("run", RunSummary)):
        summary = run.summaries.get(step)
        if isinstance(summary, model) and summary.dry_run:
            return True
    return False


def stage_durations(run: RunRecord) -> dict[str, float]:
    """Wall time of each pipeline stage the run recorded (not this command's or the whole run's)."""
    out = {}
    for step, summary in run.summaries.items():
        if step in NOT_A_STAGE:
            continue
        seconds = getattr(summary, "duration_seconds", None)
        if seconds is None and summary.model_extra:  # a step without a model of its own
            seconds = as_float(
                summary.model_extra.get("duration_seconds"), "duration_seconds", f"{step} summary"
            )
        if seconds is not None:
            out[label(step, "stage")] = float(seconds)
    return out


def _first_failure(failures: Mapping[str, FailureRecord], errored: list[str]) -> str | None:
    """The step that caused the failure: the earliest failure record, else the errored step
    earliest in the pipeline (a `run` summary's error only repeats its step's)."""
    if failures:
        return min(failures, key=lambda s: failures[s].timestamp or 0.0)
    order = {step: i for i, step in enumerate(KNOWN_STEPS)}
    return min(errored, key=lambda s: order.get(s, len(order)), default=None)


def failure_step_label(step: str | None) -> str:
    return step if step in KNOWN_STEPS else "other"


def load_run(
    ws: Workspace, run_id: str, status: str | None = None, failed_step: str | None = None
) -> RunRecord:
    """Read a run's step summaries and failure records; decide its status.

    Without an explicit ``status`` a run is failed when it has failure records or a step summary
    that records an error (exit code >= 2), else successful.
    A successful run must have at least one summary (a run that wrote nothing did not run).
    """
    run_id = validate_run_id(run_id)
    if status is not None and status not in STATUSES:
        raise RankerError(f"invalid status {status!r}: use one of {', '.join(STATUSES)}")
    if failed_step is not None:
        validate_run_id(failed_step)
    folder = ws.pipeline / run_id
    summaries = _read_folder(folder, parse_step_summary)
    failures = _read_folder(folder / "failures", parse_failure_record)
    # a step that ended in an error still records a summary with its exit code (`ranker run`);
    # a failed publish of this command's own is not a failure of the retrain
    errored = [s for s, summ in summaries.items() if s not in OWN_STEPS and step_failed(summ)]
    if status is None:
        status = "failed" if (failures or errored or failed_step) else "success"
    if status == "success" and not any(step not in NOT_A_STAGE for step in summaries):
        raise MetricsInputError(
            f"run {run_id!r} has no step summaries in {folder} "
            "(pass --status failed for a run that failed before its first step finished)"
        )
    if status == "failed" and failed_step is None:
        failed_step = _first_failure(failures, errored)
    return RunRecord(
        run_id=run_id,
        summaries=summaries,
        failures=failures,
        status=status,
        failed_step=failure_step_label(failed_step) if status == "failed" else None,
    )
