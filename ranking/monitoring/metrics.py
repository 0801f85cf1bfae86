"""Prometheus metrics of a pipeline run, built from its step summaries.

Each pipeline step records a JSON summary in ``<home>/pipeline/<run id>/<step>.json`` (see
docs/architecture.md, "Step summaries"). ``ranker metrics publish`` reads them, folds the run into
the workspace's persistent metrics state (counters and "last ..." timestamps must survive the
fresh process of every CLI call), and delivers the full set of series:

- to a Pushgateway when one is configured (PUT on the group ``job=<job>``: the group always holds
  the complete current state, so a series never lingers from an older run), retried with backoff;
- otherwise, or when every push attempt failed, atomically to a textfile-collector file.

The layers: :func:`load_run` (I/O: summaries → :class:`RunRecord`), :func:`advance_state` and
:func:`build_samples` (pure), :func:`render` / :func:`push_with_retries` / :func:`publish` (edge).
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import fcntl
import json
import logging
import os
import re
import statistics
import time
import urllib.parse
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ranking.core.atomic import atomic_write_json, atomic_write_text
from ranking.core.errors import RankerError
from ranking.core.workspace import Workspace, validate_run_id

log = logging.getLogger(__name__)

PREFIX = "ranker_"
DEFAULT_JOB = "ranker_retrain"
PUSHGATEWAY_ENV = "RANKER_PUSHGATEWAY_URL"
STATUSES = ("success", "failed")
PHASES = ("frozen", "joint")
MODELS = ("candidate", "champion")
# Steps a failure can be attributed to; anything else is counted as "other" (bounded label values).
KNOWN_STEPS = (
    "freshness",
    "window",
    "validate",
    "train",
    "evaluate",
    "gate",
    "promote",
    "reject",
    "materialize",
    "metrics",
    "run",  # `ranker run` failed between steps
    "other",
)
# Summaries that are not pipeline stages: this command's own summary and the whole-run summary.
_OWN_STEPS = frozenset({"metrics", "metrics-show"})
_NOT_A_STAGE = _OWN_STEPS | {"run"}
DURATION_HISTORY = 7  # previous runs the duration baseline (median) is taken over
COUNTED_RUNS_KEPT = 500  # run ids remembered so that re-publishing a run never double-counts
_LABEL_VALUE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:,+-]{0,63}$")
MAX_GATE_CHECKS = 64


class MetricsInputError(RankerError):
    """A step summary or failure record cannot be turned into metrics (malformed field)."""


# --------------------------------------------------------------------------------------------
# The catalogue: every series this module can emit (name, type, help, label names).
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MetricSpec:
    name: str
    kind: str  # gauge | counter
    help: str
    labels: tuple[str, ...] = ()


def _g(name: str, help_: str, *labels: str) -> MetricSpec:
    return MetricSpec(PREFIX + name, "gauge", help_, labels)


def _c(name: str, help_: str, *labels: str) -> MetricSpec:
    return MetricSpec(PREFIX + name, "counter", help_, labels)


CATALOGUE: dict[str, MetricSpec] = {
    s.name: s
    for s in (
        # run status and history
        _g("last_run_timestamp_seconds", "When the last pipeline run published its metrics."),
        _g("last_success_timestamp_seconds", "When the last successful pipeline run published."),
        _g("last_failure_timestamp_seconds", "When the last failed pipeline run published."),
        _g("last_run_status", "1 for the status of the last run, 0 for the others.", "status"),
        _g("last_run_promoted", "1 if the last run promoted its candidate to champion, else 0."),
        _g("run_duration_seconds", "Wall time of the last run (its 'run' summary, else the sum of stages)."),
        _c("runs_total", "Pipeline runs published, by final status.", "status"),
        _c("run_failures_total", "Failed pipeline runs, by the step that failed.", "step"),
        # stages
        _g("stage_duration_seconds", "Wall time of each stage in the last run.", "stage"),
        _g(
            "stage_duration_baseline_seconds",
            f"Median stage wall time over the previous {DURATION_HISTORY} runs that ran the stage.",
            "stage",
        ),
        # training
        _g("train_info", "Training configuration of the last run (value 1).", "schedule", "pipeline"),
        _g("train_epochs", "Epochs trained in the last run."),
        _g("train_samples_per_second", "Training throughput of the last run over all epochs."),
        _g("train_epoch_samples_per_second", "Training throughput by epoch.", "epoch", "phase"),
        _g("train_epoch_loss", "Mean training loss by epoch.", "epoch", "phase"),
        _g("train_epoch_duration_seconds", "Wall time by epoch.", "epoch", "phase"),
        _g(
            "embedding_lookup_ratio",
            "Share of step time in embedding lookups (forward+backward+distribution), by phase.",
            "phase",
        ),
        _g(
            "embedding_lookup_exposed_ratio",
            "Share of step time in embedding lookups left on the critical path (after prefetch), by phase.",
            "phase",
        ),
        # offline evaluation and gate
        _g("eval_save_hit_at_3_ratio", "Save HIT@3 on the eval day.", "model"),
        _g("eval_auc_ratio", "ROC AUC on the eval day.", "model"),
        _g("eval_normalized_entropy", "Normalized entropy on the eval day (lower is better).", "model"),
        _g("gate_passed", "1 if the last gate passed the candidate, 0 if it rejected it."),
        _g("gate_check_passed", "1 if the gate check passed in the last gate, else 0.", "check"),
        _g("gate_check_value", "The value a gate check measured.", "check"),
        _g("gate_check_threshold", "The threshold a gate check compared against.", "check"),
        _g("gate_relative_change", "Candidate vs champion relative change in save HIT@3."),
        _g("gate_relative_change_ci_lower", "Lower bound of the bootstrap interval of the relative change."),
        _g("gate_relative_change_ci_upper", "Upper bound of the bootstrap interval of the relative change."),
        _g("gate_consecutive_rejections", "Gate rejections since the last passing gate."),
        _c("promotions_total", "Candidates promoted to champion (forced: promoted with --force).", "forced"),
        _c("rejections_total", "Candidates rejected by the gate."),
        _g("last_promotion_timestamp_seconds", "When the champion last moved."),
        # data
        _g("window_rows", "Examples in the last run's window, by split.", "split"),
        _g("window_length_days", "Training days of the last run's window."),
        _g("window_days", "Window day partitions built or reused by the last run.", "state"),
        _g("window_label_rate_ratio", "Save (label) rate of the last run's training window."),
        _g("window_end_timestamp_seconds", "Exclusive end of the last run's window (its eval day)."),
        _g("feature_freshness_lag_seconds", "Lag of the newest source data when the run checked it."),
        _g(
            "feature_source_end_timestamp_seconds",
            "End of the newest complete day of source data (its next midnight, UTC).",
        ),
        _g("materialize_end_timestamp_seconds", "End of the last online-store materialization."),
        # delivery
        _c("metrics_push_failures_total", "Publishes whose Pushgateway push failed after all retries."),
    )
}


@dataclass(frozen=True)
class Sample:
    name: str
    value: float
    labels: tuple[tuple[str, str], ...] = ()

    @property
    def key(self) -> str:
        inner = ",".join(f'{k}="{v}"' for k, v in sorted(self.labels))
        return f"{self.name}{{{inner}}}" if inner else self.name


# --------------------------------------------------------------------------------------------
# Reading a run: summaries (+ failure records) -> RunRecord
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RunRecord:
    run_id: str
    summaries: Mapping[str, Mapping[str, Any]]  # step -> summary
    failures: Mapping[str, Mapping[str, Any]]  # step -> failure record
    status: str  # success | failed
    failed_step: str | None  # a KNOWN_STEPS value when status is failed


def failures_dir(ws: Workspace, run_id: str) -> Path:
    """Failure records of a run: ``<home>/pipeline/<run id>/failures/<step>.json``."""
    return ws.pipeline / validate_run_id(run_id) / "failures"


def record_failure(ws: Workspace, run_id: str, step: str, error: str, now: float | None = None) -> Path:
    """Write a failure record (what a DAG failure callback or a wrapper calls when a step fails)."""
    path = failures_dir(ws, run_id) / f"{validate_run_id(step)}.json"
    atomic_write_json(
        path,
        {"step": step, "error": error, "timestamp": time.time() if now is None else now},
    )
    return path


def _read_json_object(path: Path) -> dict[str, Any]:
    try:
        obj = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise MetricsInputError(f"cannot read {path}: {exc}") from None
    if not isinstance(obj, dict):
        raise MetricsInputError(f"{path}: expected a JSON object, got {type(obj).__name__}")
    return obj


def _read_folder(folder: Path) -> dict[str, dict[str, Any]]:
    if not folder.is_dir():
        return {}
    # dot-files are temp files of an atomic write in progress
    return {
        p.stem: _read_json_object(p)
        for p in sorted(folder.glob("*.json"))
        if not p.name.startswith(".") and p.is_file()
    }


def step_failed(summary: Mapping[str, Any]) -> bool:
    """Exit code 0 is success and 1 a negative decision (gate rejected); 2 and above failed."""
    code = summary.get("exit_code", 0)
    return (isinstance(code, int) and not isinstance(code, bool) and code >= 2) or bool(summary.get("error"))


def promoted(run: RunRecord) -> tuple[bool, bool]:
    """(the champion moved in this run, it was a forced promotion). A no-op promote is no move."""
    promote = run.summaries.get("promote")
    if promote is None or step_failed(promote) or promote.get("noop"):
        return False, False
    return True, bool(promote.get("forced", False))


def _first_failure(failures: Mapping[str, Mapping[str, Any]], errored: list[str]) -> str | None:
    """The step that caused the failure: the earliest failure record, else the errored step
    earliest in the pipeline (a `run` summary's error only repeats its step's)."""
    if failures:
        return min(failures, key=lambda s: _as_float(failures[s], "timestamp", f"failure record {s}") or 0.0)
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
    summaries = _read_folder(folder)
    failures = _read_folder(folder / "failures")
    # a step that ended in an error still records a summary with its exit code (`ranker run`);
    # a failed publish of this command's own is not a failure of the retrain
    errored = [s for s, summ in summaries.items() if s not in _OWN_STEPS and step_failed(summ)]
    if status is None:
        status = "failed" if (failures or errored or failed_step) else "success"
    if status == "success" and not any(step not in _NOT_A_STAGE for step in summaries):
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


# --------------------------------------------------------------------------------------------
# Field access with clear errors
# --------------------------------------------------------------------------------------------


def _as_float(obj: Mapping[str, Any], key: str, where: str) -> float | None:
    """A numeric field, or None when absent/null. Booleans count as 0/1."""
    value = obj.get(key)
    if value is None:
        return None
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, int | float):
        return float(value)
    raise MetricsInputError(f"{where}: field {key!r} must be a number, got {value!r}")


def _as_dict(obj: Mapping[str, Any], key: str, where: str) -> Mapping[str, Any] | None:
    value = obj.get(key)
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise MetricsInputError(f"{where}: field {key!r} must be an object, got {value!r}")
    return value


def _as_list(obj: Mapping[str, Any], key: str, where: str) -> list[Any]:
    value = obj.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise MetricsInputError(f"{where}: field {key!r} must be a list, got {value!r}")
    return value


def _label(value: Any, what: str) -> str:
    text = str(value)
    if not _LABEL_VALUE.match(text):
        raise MetricsInputError(f"{what} {text!r} is not a safe label value (letters, digits, _.:,+-)")
    return text


def _date_timestamp(value: Any, where: str, plus_days: int = 0) -> float | None:
    """UTC epoch seconds of a YYYY-MM-DD date (midnight) or an ISO datetime (naive = UTC)."""
    if value is None:
        return None
    text = str(value)
    try:
        if len(text) == 10:
            day = dt.date.fromisoformat(text)
            moment = dt.datetime(day.year, day.month, day.day, tzinfo=dt.UTC)
        else:
            moment = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
            if moment.tzinfo is None:
                moment = moment.replace(tzinfo=dt.UTC)
    except ValueError:
        raise MetricsInputError(f"{where}: {value!r} is not an ISO date or datetime") from None
    return (moment + dt.timedelta(days=plus_days)).timestamp()


# --------------------------------------------------------------------------------------------
# Persistent state: what must outlive one CLI process
# --------------------------------------------------------------------------------------------


@dataclass
class MetricsState:
    runs_total: dict[str, float] = field(default_factory=lambda: dict.fromkeys(STATUSES, 0.0))
    run_failures_total: dict[str, float] = field(default_factory=lambda: dict.fromkeys(KNOWN_STEPS, 0.0))
    promotions_total: dict[str, float] = field(default_factory=lambda: {"false": 0.0, "true": 0.0})
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
    duration_history: dict[str, list[list[Any]]] = field(default_factory=dict)
    # run id -> outcomes already counted for it (so a re-publish never counts them twice)
    counted: dict[str, list[str]] = field(default_factory=dict)
    last_publish: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> MetricsState:
        known = {f.name for f in dataclasses.fields(cls)}
        state = cls(**{k: v for k, v in obj.items() if k in known})
        # new label values added in later versions start at 0
        for status in STATUSES:
            state.runs_total.setdefault(status, 0.0)
        for step in KNOWN_STEPS:
            state.run_failures_total.setdefault(step, 0.0)
        return state

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def state_path(ws: Workspace) -> Path:
    return ws.metrics / "state.json"


def textfile_path(ws: Workspace) -> Path:
    return ws.metrics / "ranker.prom"


def load_state(ws: Workspace) -> MetricsState:
    path = state_path(ws)
    if not path.exists():
        return MetricsState()
    return MetricsState.from_json(_read_json_object(path))


@contextlib.contextmanager
def state_lock(ws: Workspace) -> Iterator[None]:
    """Serialise publishes of one workspace (read-modify-write of the state file)."""
    ws.metrics.mkdir(parents=True, exist_ok=True)
    with open(ws.metrics / ".state.lock", "a") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


def _gate_decision(run: RunRecord) -> str | None:
    gate = run.summaries.get("gate")
    if gate is None:
        reject = run.summaries.get("reject")
        return "reject" if reject is not None and not step_failed(reject) else None
    if step_failed(gate):
        return None
    decision = gate.get("decision")
    if decision is None:
        return "reject" if _as_list(gate, "failed_checks", "gate summary") else "pass"
    if decision not in ("pass", "reject"):
        raise MetricsInputError(f"gate summary: decision must be 'pass' or 'reject', got {decision!r}")
    return str(decision)


def stage_durations(run: RunRecord) -> dict[str, float]:
    out = {}
    for step, summary in run.summaries.items():
        if step in _NOT_A_STAGE:
            continue
        seconds = _as_float(summary, "duration_seconds", f"{step} summary")
        if seconds is not None:
            out[_label(step, "stage")] = seconds
    return out


def advance_state(state: MetricsState, run: RunRecord, now: float) -> MetricsState:
    """Fold one run into the persistent state (pure: returns a new state).

    Counters grow once per (run id, outcome): publishing the same run again (an Airflow retry)
    updates gauges but adds only outcomes not counted before.
    """
    new = MetricsState.from_json(json.loads(json.dumps(state.to_json())))
    done = set(new.counted.get(run.run_id, []))
    outcomes: list[str] = [f"status:{run.status}"]
    if run.status == "failed":
        outcomes.append(f"failure:{run.failed_step}")
    moved, forced = promoted(run)
    decision = _gate_decision(run)
    if moved:
        outcomes.append(f"promotion:{'true' if forced else 'false'}")
    if decision == "reject":
        outcomes.append("rejection")

    for outcome in outcomes:
        if outcome in done:
            continue
        done.add(outcome)
        kind, _, value = outcome.partition(":")
        if kind == "status":
            new.runs_total[value] = new.runs_total.get(value, 0.0) + 1
        elif kind == "failure":
            new.run_failures_total[value] = new.run_failures_total.get(value, 0.0) + 1
        elif kind == "promotion":
            new.promotions_total[value] = new.promotions_total.get(value, 0.0) + 1
        elif kind == "rejection":
            new.rejections_total += 1
        if kind == "promotion":
            new.last_promotion_timestamp = now
        if kind == "rejection":
            new.consecutive_rejections += 1
    if decision == "pass" or moved:
        new.consecutive_rejections = 0.0

    if run.status == "success":
        new.last_success_timestamp = now
    else:
        new.last_failure_timestamp = now

    freshness = run.summaries.get("freshness")
    if freshness is not None:
        source_end = _date_timestamp(
            freshness.get("latest_source_date"), "freshness summary latest_source_date", plus_days=1
        )
        if source_end is not None:
            new.feature_source_end_timestamp = source_end
    materialize = run.summaries.get("materialize")
    if materialize is not None:
        end = _date_timestamp(materialize.get("end"), "materialize summary end")
        if end is not None:
            new.materialize_end_timestamp = end

    if run.status == "success":
        for stage, seconds in stage_durations(run).items():
            history = [h for h in new.duration_history.get(stage, []) if h[0] != run.run_id]
            history.append([run.run_id, seconds])
            new.duration_history[stage] = history[-(DURATION_HISTORY + 1) :]

    new.counted[run.run_id] = sorted(done)
    if len(new.counted) > COUNTED_RUNS_KEPT:  # dicts keep insertion order: drop the oldest
        for old in list(new.counted)[: len(new.counted) - COUNTED_RUNS_KEPT]:
            del new.counted[old]
    return new


def duration_baselines(state: MetricsState, exclude_run: str) -> dict[str, float]:
    """Median wall time per stage over the latest previous runs (not counting ``exclude_run``)."""
    out = {}
    for stage, history in state.duration_history.items():
        previous = [float(s) for rid, s in history if rid != exclude_run][-DURATION_HISTORY:]
        if previous:
            out[stage] = statistics.median(previous)
    return out


# --------------------------------------------------------------------------------------------
# Samples (pure)
# --------------------------------------------------------------------------------------------


class _Samples:
    def __init__(self) -> None:
        self.items: list[Sample] = []

    def add(self, short_name: str, value: float | None, **labels: str) -> None:
        name = PREFIX + short_name
        spec = CATALOGUE[name]
        if tuple(labels) != spec.labels:
            raise AssertionError(f"{name}: labels {tuple(labels)} != {spec.labels}")
        if value is None:
            return
        self.items.append(Sample(name, float(value), tuple(labels.items())))


def _weighted_mean(pairs: list[tuple[float, float | None]]) -> float | None:
    """Mean of values weighted by durations (plain mean when a duration is missing)."""
    if not pairs:
        return None
    if all(w is not None and w > 0 for _, w in pairs):
        total = sum(w for _, w in pairs if w is not None)
        return sum(v * w for v, w in pairs if w is not None) / total
    return sum(v for v, _ in pairs) / len(pairs)


def _add_train(out: _Samples, train: Mapping[str, Any]) -> None:
    where = "train summary"
    schedule, pipeline = train.get("schedule"), train.get("pipeline")
    if schedule is not None or pipeline is not None:
        out.add(
            "train_info",
            1,
            schedule=_label(schedule if schedule is not None else "unknown", "schedule"),
            pipeline=_label(pipeline if pipeline is not None else "unknown", "pipeline"),
        )
    out.add("train_samples_per_second", _as_float(train, "samples_per_second", where))
    epochs = _as_list(train, "epochs", where)
    out.add("train_epochs", len(epochs) if epochs else None)
    lookup: dict[str, list[tuple[float, float | None]]] = {p: [] for p in PHASES}
    exposed: dict[str, list[tuple[float, float | None]]] = {p: [] for p in PHASES}
    for i, epoch in enumerate(epochs):
        ewhere = f"{where} epochs[{i}]"
        if not isinstance(epoch, Mapping):
            raise MetricsInputError(f"{ewhere}: expected an object, got {epoch!r}")
        phase = epoch.get("phase")
        if phase not in PHASES:
            raise MetricsInputError(f"{ewhere}: phase must be one of {PHASES}, got {phase!r}")
        number = epoch.get("epoch", i + 1)
        if isinstance(number, bool) or not isinstance(number, int) or not 0 <= number < 1000:
            raise MetricsInputError(f"{ewhere}: epoch must be an integer in [0, 1000), got {number!r}")
        labels = {"epoch": str(number), "phase": phase}
        seconds = _as_float(epoch, "duration_seconds", ewhere)
        out.add("train_epoch_loss", _as_float(epoch, "loss", ewhere), **labels)
        out.add("train_epoch_samples_per_second", _as_float(epoch, "samples_per_second", ewhere), **labels)
        out.add("train_epoch_duration_seconds", seconds, **labels)
        ratio = _as_float(epoch, "lookup_ratio", ewhere)
        if ratio is not None:
            lookup[phase].append((ratio, seconds))
        exposed_ratio = _as_float(epoch, "exposed_lookup_ratio", ewhere)
        if exposed_ratio is None and pipeline == "sync":
            exposed_ratio = ratio  # without prefetch every lookup is on the critical path
        if exposed_ratio is not None:
            exposed[phase].append((exposed_ratio, seconds))
    for phase in PHASES:
        out.add("embedding_lookup_ratio", _weighted_mean(lookup[phase]), phase=phase)
        out.add("embedding_lookup_exposed_ratio", _weighted_mean(exposed[phase]), phase=phase)


def _add_eval(out: _Samples, model: str, metrics: Mapping[str, Any] | None, where: str) -> None:
    if metrics is None:
        return
    nested = _as_dict(metrics, "metrics", where)  # {"version": ..., "metrics": {...}} or flat
    if nested is not None:
        metrics = nested
    out.add("eval_save_hit_at_3_ratio", _as_float(metrics, "save_hit_at_3", where), model=model)
    out.add("eval_auc_ratio", _as_float(metrics, "auc", where), model=model)
    out.add("eval_normalized_entropy", _as_float(metrics, "ne", where), model=model)


def _add_gate(out: _Samples, gate: Mapping[str, Any]) -> None:
    where = "gate summary"
    checks = _as_list(gate, "checks", where)
    if len(checks) > MAX_GATE_CHECKS:
        raise MetricsInputError(f"{where}: {len(checks)} checks (more than {MAX_GATE_CHECKS})")
    failed = {
        str(c.get("name") if isinstance(c, Mapping) else c) for c in _as_list(gate, "failed_checks", where)
    }
    seen = set()
    for i, check in enumerate(checks):
        cwhere = f"{where} checks[{i}]"
        if not isinstance(check, Mapping):
            raise MetricsInputError(f"{cwhere}: expected an object, got {check!r}")
        name = _label(check.get("name"), f"{cwhere} name")
        if name in seen:
            raise MetricsInputError(f"{cwhere}: duplicate check name {name!r}")
        seen.add(name)
        passed = check.get("passed")
        if passed is None:
            passed = name not in failed
        out.add("gate_check_passed", 1.0 if passed else 0.0, check=name)
        # values may be non-numeric (a reason text): only numbers become series
        for key, metric in (("value", "gate_check_value"), ("threshold", "gate_check_threshold")):
            v = check.get(key)
            if isinstance(v, int | float) and not isinstance(v, bool):
                out.add(metric, float(v), check=name)
    for name in sorted(failed - seen):  # a failed check listed without its record
        out.add("gate_check_passed", 0.0, check=_label(name, f"{where} failed check"))
    out.add("gate_relative_change", _as_float(gate, "relative_change", where))
    ci = gate.get("ci")
    if ci is not None:
        if (
            not isinstance(ci, list | tuple)
            or len(ci) != 2
            or not all(c is None or (isinstance(c, int | float) and not isinstance(c, bool)) for c in ci)
        ):
            raise MetricsInputError(f"{where}: ci must be [lower, upper], got {ci!r}")
        out.add("gate_relative_change_ci_lower", ci[0])
        out.add("gate_relative_change_ci_upper", ci[1])


def _add_window(out: _Samples, window: Mapping[str, Any]) -> None:
    where = "window summary"
    out.add("window_rows", _as_float(window, "rows_train", where), split="train")
    out.add("window_rows", _as_float(window, "rows_eval", where), split="eval")
    out.add("window_length_days", _as_float(window, "days", where))
    out.add("window_days", _as_float(window, "days_built", where), state="built")
    out.add("window_days", _as_float(window, "days_reused", where), state="reused")
    out.add("window_label_rate_ratio", _as_float(window, "label_rate", where))
    out.add("window_end_timestamp_seconds", _date_timestamp(window.get("end"), f"{where} end"))


def build_samples(run: RunRecord, state: MetricsState, now: float) -> list[Sample]:
    """Every series for ``run``; ``state`` must already include the run (see advance_state)."""
    out = _Samples()
    s = run.summaries

    out.add("last_run_timestamp_seconds", now)
    out.add("last_success_timestamp_seconds", state.last_success_timestamp)
    out.add("last_failure_timestamp_seconds", state.last_failure_timestamp)
    for status in STATUSES:
        out.add("last_run_status", 1.0 if status == run.status else 0.0, status=status)
    out.add("last_run_promoted", 1.0 if promoted(run)[0] else 0.0)
    for status in STATUSES:
        out.add("runs_total", state.runs_total.get(status, 0.0), status=status)
    for step in KNOWN_STEPS:
        out.add("run_failures_total", state.run_failures_total.get(step, 0.0), step=step)

    durations = stage_durations(run)
    for stage, seconds in sorted(durations.items()):
        out.add("stage_duration_seconds", seconds, stage=stage)
    for stage, seconds in sorted(duration_baselines(state, run.run_id).items()):
        out.add("stage_duration_baseline_seconds", seconds, stage=stage)
    whole = s.get("run")
    total = _as_float(whole, "duration_seconds", "run summary") if whole is not None else None
    out.add("run_duration_seconds", total if total is not None else (sum(durations.values()) or None))

    train = s.get("train")
    if train is not None:
        _add_train(out, train)

    gate = s.get("gate")
    candidate = _as_dict(gate, "candidate", "gate summary") if gate is not None else None
    if candidate is None:
        evaluate = s.get("evaluate")
        if train is not None:
            candidate = _as_dict(train, "eval", "train summary")
        if candidate is None and evaluate is not None:
            candidate = evaluate
    _add_eval(out, "candidate", candidate, "candidate metrics")
    if gate is not None:
        _add_eval(out, "champion", _as_dict(gate, "champion", "gate summary"), "champion metrics")
        _add_gate(out, gate)
    decision = _gate_decision(run)
    if decision is not None:
        out.add("gate_passed", 1.0 if decision == "pass" else 0.0)
    out.add("gate_consecutive_rejections", state.consecutive_rejections)
    for forced in ("false", "true"):
        out.add("promotions_total", state.promotions_total.get(forced, 0.0), forced=forced)
    out.add("rejections_total", state.rejections_total)
    out.add("last_promotion_timestamp_seconds", state.last_promotion_timestamp)

    window = s.get("window")
    if window is not None:
        _add_window(out, window)
    freshness = s.get("freshness")
    if freshness is not None:
        out.add("feature_freshness_lag_seconds", _as_float(freshness, "lag_seconds", "freshness summary"))
    out.add("feature_source_end_timestamp_seconds", state.feature_source_end_timestamp)
    out.add("materialize_end_timestamp_seconds", state.materialize_end_timestamp)
    out.add("metrics_push_failures_total", state.push_failures_total)
    return out.items


# --------------------------------------------------------------------------------------------
# Rendering and delivery
# --------------------------------------------------------------------------------------------


def build_registry(samples: list[Sample]) -> Any:
    """A dedicated CollectorRegistry holding exactly ``samples`` (no process/_created series)."""
    from prometheus_client import CollectorRegistry
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

    class _Collector:
        def collect(self) -> Iterator[Any]:
            by_name: dict[str, list[Sample]] = {}
            for sample in samples:
                by_name.setdefault(sample.name, []).append(sample)
            for name, group in by_name.items():
                spec = CATALOGUE[name]
                family_cls = CounterMetricFamily if spec.kind == "counter" else GaugeMetricFamily
                family = family_cls(name, spec.help, labels=list(spec.labels))
                for sample in group:
                    family.add_metric([v for _, v in sample.labels], sample.value)
                yield family

    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Collector())
    return registry


def render(samples: list[Sample]) -> str:
    """Prometheus text exposition format (what the textfile collector and Pushgateway read)."""
    from prometheus_client import generate_latest

    return generate_latest(build_registry(samples)).decode()


def validate_pushgateway_url(url: str) -> str:
    """A Pushgateway base URL: http(s), a host, no credentials, query or fragment."""
    parsed = urllib.parse.urlsplit(url)
    if (
        parsed.scheme not in ("http", "https")
        or not parsed.hostname
        or parsed.username is not None
        or parsed.query
        or parsed.fragment
        or any(c.isspace() or ord(c) < 32 for c in url)
    ):
        raise RankerError(
            f"invalid Pushgateway URL {url!r}: expected http(s)://host[:port][/path] "
            "(no credentials, query or fragment)"
        )
    try:
        parsed.port  # noqa: B018 - raises on a bad port
    except ValueError:
        raise RankerError(f"invalid Pushgateway URL {url!r}: bad port") from None
    return url.rstrip("/")


def validate_job(job: str) -> str:
    if not re.match(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$", job):
        raise RankerError(f"invalid job name {job!r}: use letters, digits and _")
    return job


@dataclass(frozen=True)
class PushConfig:
    url: str
    job: str = DEFAULT_JOB
    attempts: int = 3
    backoff_seconds: float = 1.0  # doubled after each failed attempt
    timeout_seconds: float = 10.0

    def __post_init__(self) -> None:
        validate_pushgateway_url(self.url)
        validate_job(self.job)
        if self.attempts < 1:
            raise RankerError(f"push attempts must be >= 1, got {self.attempts}")
        if self.backoff_seconds < 0 or self.timeout_seconds <= 0:
            raise RankerError("push backoff must be >= 0 and timeout > 0")


@dataclass(frozen=True)
class PushResult:
    ok: bool
    attempts: int
    error: str | None = None


def push_with_retries(
    samples: list[Sample], config: PushConfig, sleep: Callable[[float], None] = time.sleep
) -> PushResult:
    """PUT the samples on the Pushgateway group ``job=<job>``; retry with exponential backoff."""
    from prometheus_client import push_to_gateway

    registry = build_registry(samples)
    delay = config.backoff_seconds
    error = None
    for attempt in range(1, config.attempts + 1):
        try:
            push_to_gateway(
                validate_pushgateway_url(config.url),
                job=config.job,
                registry=registry,
                timeout=config.timeout_seconds,
            )
            return PushResult(ok=True, attempts=attempt)
        except Exception as exc:  # any transport/HTTP failure: a push must never fail the retrain
            error = f"{type(exc).__name__}: {exc}"
            log.warning("push to %s failed (attempt %d/%d): %s", config.url, attempt, config.attempts, error)
            if attempt < config.attempts:
                sleep(delay)
                delay *= 2
    return PushResult(ok=False, attempts=config.attempts, error=error)


def resolve_pushgateway(cli_value: str | None) -> str | None:
    """--pushgateway wins; else $RANKER_PUSHGATEWAY_URL; an empty value means "not configured"."""
    url = cli_value if cli_value is not None else os.environ.get(PUSHGATEWAY_ENV)
    if not url:
        return None
    return validate_pushgateway_url(url)


@dataclass(frozen=True)
class PublishResult:
    run_id: str
    status: str
    failed_step: str | None
    delivery: str  # pushgateway | textfile
    target: str
    push: PushResult | None
    samples: list[Sample]
    steps: list[str]

    def summary(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "status": self.status,
            "failed_step": self.failed_step,
            "delivery": self.delivery,
            "target": self.target,
            "push_ok": None if self.push is None else self.push.ok,
            "push_attempts": None if self.push is None else self.push.attempts,
            "push_error": None if self.push is None else self.push.error,
            "steps": self.steps,
            "series": len(self.samples),
        }


def publish(
    ws: Workspace,
    run_id: str,
    *,
    status: str | None = None,
    failed_step: str | None = None,
    push: PushConfig | None = None,
    textfile: Path | None = None,
    now: float | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> PublishResult:
    """Turn a run's summaries into metrics and deliver them (Pushgateway, else textfile)."""
    run = load_run(ws, run_id, status=status, failed_step=failed_step)
    now = time.time() if now is None else now
    target_file = textfile or textfile_path(ws)
    with state_lock(ws):
        state = advance_state(load_state(ws), run, now)
        samples = build_samples(run, state, now)
        push_result = None
        delivery, target = "textfile", str(target_file)
        if push is not None:
            push_result = push_with_retries(samples, push, sleep=sleep)
            if push_result.ok:
                delivery, target = "pushgateway", f"{push.url} job={push.job}"
            else:
                log.error(
                    "metrics push failed after %d attempts (%s); falling back to %s",
                    push_result.attempts,
                    push_result.error,
                    target_file,
                )
                state.push_failures_total += 1
                samples = build_samples(run, state, now)
        exposition = render(samples)
        if delivery == "textfile":
            try:
                atomic_write_text(target_file, exposition)
            except OSError as exc:
                raise RankerError(f"cannot write the metrics textfile {target_file}: {exc}") from None
        state.last_publish = {
            "run_id": run.run_id,
            "timestamp": now,
            "delivery": delivery,
            "target": target,
            "exposition": exposition,
        }
        atomic_write_json(state_path(ws), state.to_json())
    return PublishResult(
        run_id=run.run_id,
        status=run.status,
        failed_step=run.failed_step,
        delivery=delivery,
        target=target,
        push=push_result,
        samples=samples,
        steps=sorted(run.summaries),
    )


def parse_exposition(text: str) -> dict[str, float]:
    """``{'name{label="v",...}': value}`` of a text exposition (for `metrics show --json`, tests)."""
    from prometheus_client.parser import text_string_to_metric_families

    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            key = Sample(s.name, s.value, tuple(s.labels.items())).key
            out[key] = s.value
    return out
