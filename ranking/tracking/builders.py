"""What each run logs to MLflow, as pure functions: typed step summaries in, one
:class:`~ranking.tracking.records.TrackingRecord` out (docs/tracking.md "Runs from the pipeline").

Nothing here reads a file or talks to MLflow: :mod:`ranking.tracking.hooks` reads a run folder
into the inputs below and sends the record. Experiments: a retrain pipeline run (``ranker run`` or
the DAG) is ``ranker-retrain``, a ``ranker train`` of its own ``ranker-train``, a base model
``ranker-pretrain``, a backtest ``ranker-backtest`` (one parent, a child per day) and a review
``ranker-review`` (the same shape).

Params: the effective config flattened to ``section.key`` (about 130 keys), plus
``section.key.source`` for each key not at its default (the whole ``sources`` map is in the
``effective_config.json`` artifact): MLflow caps a param's value at 6000 characters, and a run with
hundreds of params is slow to open in the UI.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, JsonValue

from ranking.core.summaries import (
    DecideSummary,
    EvalSummary,
    GateSummary,
    PromoteSummary,
    RejectSummary,
    StepError,
    TrainSummary,
    ValidationSummary,
    WindowSummary,
)
from ranking.tracking.records import MAX_PARAM_VALUE_CHARS, MAX_TAG_VALUE_CHARS, MetricPoint, TrackingRecord
from ranking.trainer.reports.curve_data import TrainingCurve

RETRAIN_EXPERIMENT = "ranker-retrain"
TRAIN_EXPERIMENT = "ranker-train"
PRETRAIN_EXPERIMENT = "ranker-pretrain"
BACKTEST_EXPERIMENT = "ranker-backtest"
REVIEW_EXPERIMENT = "ranker-review"

Decision = Literal[
    "promoted",
    "promoted-forced",
    "rejected",
    "dry-run-kept",
    "kept",
    "validation-stopped",
    "failed",
    "in-progress",
]

_NOT_KEY = re.compile(r"[^A-Za-z0-9_\-. :/]")
_EVAL_METRICS = ("save_hit_at_3", "auc", "ne", "log_loss", "calibration", "base_rate")


def metric_key(*parts: str) -> str:
    """``parts`` joined by dots, each made an MLflow key (a check named ``lift>x`` -> ``lift_x``)."""
    return ".".join(_NOT_KEY.sub("_", p).strip(".") or "_" for p in parts)


def _text(value: JsonValue | object) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _point(key: str, value: float | int | None, step: int = 0) -> list[MetricPoint]:
    """One metric point, none for a missing or non-finite value (NaN would plot as a gap anyway)."""
    if value is None:
        return []
    number = float(value)
    return [MetricPoint(key=key, value=number, step=step)] if math.isfinite(number) else []


# ------------------------------------------------------------------------------------------
# the effective config
# ------------------------------------------------------------------------------------------


def config_params(effective: Mapping[str, Any] | None) -> dict[str, str]:
    """``effective_config.json`` (``{config, sources, files}``) as MLflow params: each
    ``section.key`` -> its value (JSON for lists and tables), and ``section.key.source`` -> the
    layer it came from for each key not at its default."""
    if not effective:
        return {}
    params: dict[str, str] = {}
    config = effective.get("config") or {}
    for section, values in sorted(config.items()) if isinstance(config, Mapping) else ():
        if isinstance(values, Mapping):
            for key, value in sorted(values.items()):
                params[metric_key(section, key)] = _clip(_text(value), MAX_PARAM_VALUE_CHARS)
        else:
            params[metric_key(section)] = _clip(_text(values), MAX_PARAM_VALUE_CHARS)
    sources = effective.get("sources") or {}
    for key, source in sorted(sources.items()) if isinstance(sources, Mapping) else ():
        if source != "default":
            params[metric_key(*str(key).split("."), "source")] = _clip(str(source), MAX_PARAM_VALUE_CHARS)
    return params


def review_of(effective: Mapping[str, Any] | None) -> str | None:
    """The review that chose the recipe (``review:<id>:<recipe>``, the source of its ``[recipe]``
    keys under ``[review] recipe = "auto"``; None: none)."""
    sources = (effective or {}).get("sources") or {}
    found = sorted(
        {str(v) for k, v in sources.items() if str(k).startswith("recipe.") and str(v).startswith("review:")}
    )
    return found[0] if found else None


def recipe_name(effective: Mapping[str, Any] | None, train: TrainSummary | None) -> str | None:
    """What names the recipe trained: the review's recipe, else the config file(s) its keys came
    from, else its schedule (None: nothing trained)."""
    review = review_of(effective)
    if review is not None:
        return review.rsplit(":", 1)[-1]
    sources = (effective or {}).get("sources") or {}
    files = sorted(
        {
            str(s).removeprefix("file:").rsplit("/", 1)[-1]
            for k, s in sources.items()
            if str(k).startswith("recipe.") and str(s).startswith("file:")
        }
    )
    if files:
        return ", ".join(files)
    return f"schedule {train.schedule_spec}" if train is not None else None


def partitions_sha(partitions: Iterable[tuple[dt.date, str | None]]) -> str | None:
    """One hash of a window's partitions (each day's examples file as its manifest records it):
    equal hashes, equal training data. None when a partition records no sha256 (an old build)."""
    pairs = sorted(partitions)
    if not pairs or any(sha is None for _, sha in pairs):
        return None
    text = "\n".join(f"{day.isoformat()} {sha}" for day, sha in pairs)
    return hashlib.sha256(text.encode()).hexdigest()


# ------------------------------------------------------------------------------------------
# training, eval and the gate
# ------------------------------------------------------------------------------------------


def eval_metrics(ev: EvalSummary | None, prefix: str = "eval", step: int = 0) -> list[MetricPoint]:
    if ev is None:
        return []
    points = [p for name in _EVAL_METRICS for p in _point(f"{prefix}_{name}", getattr(ev, name), step)]
    return points + _point(f"{prefix}_rows", ev.rows, step)


def train_metrics(train: TrainSummary, curve: TrainingCurve | None) -> list[MetricPoint]:
    """The training curve (``train_loss`` per global step: the per-step curve, else each epoch's
    loss at the step it ended on), per-epoch loss and eval (step = epoch), the final eval, the
    embedding lookups' share of training time and the throughput."""
    points: list[MetricPoint] = []
    if curve is not None and curve.points:
        points += [p for c in curve.points for p in _point("train_loss", c.loss, c.step)]
    else:
        done = 0
        for e in train.epochs:
            done += e.steps
            points += _point("train_loss", e.loss, done or e.epoch)
    for e in train.epochs:
        points += _point("train_loss_epoch", e.loss, e.epoch)
        points += _point("lookup_share", e.lookup_ratio, e.epoch)
        points += _point("exposed_lookup_share", e.exposed_lookup_ratio, e.epoch)
        points += _point("samples_per_second_epoch", e.samples_per_second, e.epoch)
        if e.eval is not None:
            points += _point("eval_save_hit_at_3", e.eval.save_hit_at_3, e.epoch)
            points += _point("eval_auc", e.eval.auc, e.epoch)
            points += _point("eval_ne", e.eval.ne, e.epoch)
    points += eval_metrics(train.eval, "final")
    for phase, share in sorted(train.lookup_ratio_by_phase.items()):
        points += _point(metric_key("lookup_share", phase), share)
    for phase, share in sorted(train.exposed_lookup_ratio_by_phase.items()):
        points += _point(metric_key("exposed_lookup_share", phase), share)
    for phase, seconds in sorted(train.wall_seconds_by_phase.items()):
        points += _point(metric_key("train_seconds", phase), seconds)
    points += _point("samples_per_second", train.samples_per_second)
    points += _point("train_seconds", train.duration_seconds)
    points += _point("rows_train", train.window.rows_train)
    points += _point("rows_eval", train.window.rows_eval)
    return points


def gate_metrics(gate: GateSummary) -> list[MetricPoint]:
    """Each check's value and threshold (``gate.<check>.value``, ``.threshold`` or
    ``.threshold_low``/``.threshold_high`` for a range, ``.passed`` 0/1, ``.ci_low``/``.ci_high``),
    the candidate vs the champion on the eval day (``gate_*``, ``candidate_*``, ``champion_*``)."""
    points: list[MetricPoint] = []
    for check in gate.checks:
        points += _point(metric_key("gate", check.name, "value"), check.value)
        if isinstance(check.threshold, tuple):
            points += _point(metric_key("gate", check.name, "threshold_low"), check.threshold[0])
            points += _point(metric_key("gate", check.name, "threshold_high"), check.threshold[1])
        else:
            points += _point(metric_key("gate", check.name, "threshold"), check.threshold)
        points += _point(metric_key("gate", check.name, "passed"), 1.0 if check.passed else 0.0)
        if check.ci is not None:
            points += _point(metric_key("gate", check.name, "ci_low"), check.ci[0])
            points += _point(metric_key("gate", check.name, "ci_high"), check.ci[1])
    points += _point("gate_passed", 1.0 if gate.decision == "pass" else 0.0)
    points += _point("gate_failed_checks", len(gate.failed_checks))
    points += eval_metrics(gate.candidate, "candidate")
    if gate.champion is not None:
        points += eval_metrics(gate.champion, "champion")
    points += _point("gate_relative_change", gate.relative_change)
    if gate.ci is not None:
        points += _point("gate_ci_low", gate.ci[0]) + _point("gate_ci_high", gate.ci[1])
    if gate.heuristic is not None:
        points += _point("heuristic_save_hit_at_3", gate.heuristic.save_hit_at_3)
    return points


def train_tags(train: TrainSummary) -> dict[str, str]:
    """Lineage a training run records of itself: window, code, warm start, base."""
    window = train.window
    start = min(window.train_dates) if window.train_dates else window.end - dt.timedelta(days=window.days)
    tags = {
        "ranker.window": f"{start.isoformat()}..{window.end.isoformat()}",
        "ranker.window_id": window.window_id,
        "ranker.feature_version": window.feature_version,
        "ranker.code_version": train.code_version,
        "ranker.schedule": train.schedule_spec,
        "ranker.warm_start": train.warm_start.source or "none",
    }
    source = (train.warm_start.source or "").split()
    if len(source) >= 2 and source[0] == "base" and source[1].startswith("v"):
        tags["ranker.base"] = source[1]
    if train.lineage is not None:
        tags["ranker.lineage"] = train.lineage.kind + (
            f" of {train.lineage.parent}" if train.lineage.parent else ""
        )
    if train.version:
        tags["ranker.version"] = train.version
    return tags


# ------------------------------------------------------------------------------------------
# a retrain pipeline run
# ------------------------------------------------------------------------------------------


class RetrainFolder(BaseModel):
    """A pipeline run folder (``<home>/pipeline/<run id>/``) as typed values: what a retrain's
    record is built from (:func:`ranking.tracking.hooks.read_retrain_folder` reads it)."""

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    run_id: str
    status: Literal["success", "failed"]
    """the run's outcome as the metrics publish took it"""
    failed_step: str | None = None
    window: WindowSummary | None = None
    validate_: ValidationSummary | None = None
    train: TrainSummary | None = None
    gate: GateSummary | None = None
    decide: DecideSummary | None = None
    promote: PromoteSummary | None = None
    reject: RejectSummary | None = None
    errors: dict[str, StepError] = {}
    """step -> the record of a step that failed before it had a summary"""
    curve: TrainingCurve | None = None
    effective: dict[str, JsonValue] | None = None
    """``effective_config.json`` (config, sources, files)"""
    partitions_sha: str | None = None
    artifacts: list[str] = []
    start_ms: int | None = None
    end_ms: int | None = None


def retrain_decision(f: RetrainFolder) -> tuple[Decision, str]:
    """What the run decided, and why, in one line."""
    failed = f.failed_step or next(iter(f.errors), None)
    if f.status == "failed" or failed is not None:
        if f.validate_ is not None and f.validate_.verdict == "fail":
            failing = sorted({a.kind for a in f.validate_.anomalies if a.policy == "fail"})
            return "validation-stopped", f"data validation failed: {', '.join(failing) or 'see its report'}"
        error = f.errors.get(failed or "")
        return "failed", f"step {failed or '?'} failed" + (f": {error.error}" if error is not None else "")
    decide = f.decide
    if f.promote is not None:
        reason = f.promote.reason if not decide else decide.reason
        return ("promoted-forced" if f.promote.forced else "promoted"), reason
    if f.reject is not None:
        return "rejected", f.reject.reason
    if decide is not None and decide.branch == "keep_champion":
        gate = f"gate {decide.decision}" + (
            f" ({', '.join(decide.failed_checks)})" if decide.failed_checks else ""
        )
        return ("dry-run-kept" if decide.dry_run else "kept"), f"{decide.reason}; {gate}"
    return "in-progress", "no decision recorded yet"


def _steps_part(f: RetrainFolder) -> tuple[dict[str, str], list[MetricPoint]]:
    """What the window, validation, training and gate steps say: tags and metrics."""
    tags: dict[str, str] = {}
    metrics: list[MetricPoint] = []
    if f.window is not None:
        start = f.window.end - dt.timedelta(days=f.window.days)
        tags["ranker.window"] = f"{start.isoformat()}..{f.window.end.isoformat()}"
        metrics += _point("window_rows_train", f.window.rows_train)
        metrics += _point("window_rows_eval", f.window.rows_eval)
        metrics += _point("window_label_rate", f.window.label_rate)
        metrics += _point("window_seconds", f.window.duration_seconds)
    if f.validate_ is not None:
        tags["ranker.validation"] = f.validate_.verdict
        for kind, n in sorted(f.validate_.counts.items()):
            metrics += _point(metric_key("validation", kind), n)
    if f.train is not None:
        tags.update(train_tags(f.train))
        metrics += train_metrics(f.train, f.curve)
    if f.gate is not None:
        tags["ranker.gate"] = f.gate.decision
        if f.gate.failed_checks:
            tags["ranker.failed_checks"] = ", ".join(f.gate.failed_checks)
        metrics += gate_metrics(f.gate)
        metrics += _point("gate_seconds", f.gate.duration_seconds)
    if f.start_ms is not None and f.end_ms is not None and f.end_ms >= f.start_ms:
        metrics += _point("wall_seconds", (f.end_ms - f.start_ms) / 1000)
    return tags, metrics


def _lineage_tags(f: RetrainFolder) -> dict[str, str]:
    """The candidate, the champion before and after, the data, the review and the recipe."""
    tags: dict[str, str] = {}
    before = f.decide.champion if f.decide is not None else None
    if before is None and f.gate is not None and f.gate.champion is not None:
        before = f.gate.champion.version
    if f.decide is not None:
        tags["ranker.version"] = f.decide.version
        tags["ranker.dry_run"] = str(f.decide.dry_run).lower()
    if before is not None or f.decide is not None:
        after = f.promote.version if f.promote is not None else before
        tags["ranker.champion_before"] = before or "(none)"
        tags["ranker.champion"] = after or "(none)"
    if f.partitions_sha:
        tags["ranker.partitions_sha"] = f.partitions_sha
    review = review_of(f.effective)
    if review is not None:
        tags["ranker.review"] = review
    recipe = recipe_name(f.effective, f.train)
    if recipe is not None:
        tags["ranker.recipe"] = recipe
    return tags


def retrain_record(f: RetrainFolder) -> TrackingRecord:
    """One MLflow run for one retrain pipeline run (experiment ``ranker-retrain``)."""
    decision, reason = retrain_decision(f)
    steps_tags, metrics = _steps_part(f)
    tags = {
        "ranker.kind": "retrain",
        "ranker.run_id": f.run_id,
        "ranker.decision": decision,
        "ranker.reason": _clip(reason, MAX_TAG_VALUE_CHARS),
        **steps_tags,
        **_lineage_tags(f),
    }
    failed = f.failed_step or next(iter(f.errors), None)
    if failed is not None and (f.status == "failed" or decision == "failed"):
        tags["ranker.failed_step"] = failed
    return TrackingRecord(
        record_id=f"retrain:{f.run_id}",
        experiment=RETRAIN_EXPERIMENT,
        run_name=f.run_id,
        params=config_params(f.effective),
        metrics=metrics,
        tags=tags,
        artifacts=list(f.artifacts),
        status="FAILED"
        if f.status == "failed" or decision in ("failed", "validation-stopped")
        else "FINISHED",
        start_ms=f.start_ms,
        end_ms=f.end_ms,
    )


# ------------------------------------------------------------------------------------------
# a training run of its own, a base model
# ------------------------------------------------------------------------------------------


def train_record(
    train: TrainSummary,
    *,
    run_name: str,
    curve: TrainingCurve | None = None,
    effective: Mapping[str, Any] | None = None,
    partitions: str | None = None,
    artifacts: Sequence[str] = (),
    experiment: str = TRAIN_EXPERIMENT,
    record_id: str | None = None,
    start_ms: int | None = None,
    end_ms: int | None = None,
    extra_tags: Mapping[str, str] | None = None,
) -> TrackingRecord:
    """``ranker train`` on its own (``train:<run folder name>``), or a base model (``pretrain``)."""
    tags = {
        "ranker.kind": "pretrain" if experiment == PRETRAIN_EXPERIMENT else "train",
        **train_tags(train),
        **(extra_tags or {}),
    }
    if partitions:
        tags["ranker.partitions_sha"] = partitions
    review = review_of(effective)
    if review is not None:
        tags["ranker.review"] = review
    recipe = recipe_name(effective, train)
    if recipe is not None:
        tags["ranker.recipe"] = recipe
    if train.error:
        tags["ranker.reason"] = _clip(train.error, MAX_TAG_VALUE_CHARS)
    metrics = train_metrics(train, curve)
    if start_ms is not None and end_ms is not None and end_ms >= start_ms:
        metrics += _point("wall_seconds", (end_ms - start_ms) / 1000)
    return TrackingRecord(
        record_id=record_id or f"train:{run_name}",
        experiment=experiment,
        run_name=run_name,
        params=config_params(effective),
        metrics=metrics,
        tags=tags,
        artifacts=list(artifacts),
        status="FAILED" if train.exit_code >= 2 else "FINISHED",
        start_ms=start_ms,
        end_ms=end_ms,
    )


class PretrainFacts(Protocol):
    """What a pretrain's record reads of its summary (``ranking.pipeline.pretrain.PretrainSummary``,
    above this package: read by shape, not imported)."""

    run_id: str | None
    exit_code: int
    error: str | None
    moved: bool
    for_end: dt.date
    previous_base: str | None
    base_range: tuple[dt.date, dt.date]
    version: str | None
    failed_step: str | None
    duration_seconds: float


def pretrain_record(
    pretrain: PretrainFacts,
    train: TrainSummary | None,
    *,
    curve: TrainingCurve | None = None,
    effective: Mapping[str, Any] | None = None,
    partitions: str | None = None,
    artifacts: Sequence[str] = (),
    start_ms: int | None = None,
    end_ms: int | None = None,
) -> TrackingRecord:
    """``ranker pretrain`` (``pretrain:<run id>``, experiment ``ranker-pretrain``): the base model's
    training, ``ranker.version`` the base, whether the ``base`` alias moved to it."""
    run_id = pretrain.run_id or "pretrain"
    failed = pretrain.exit_code >= 2 or pretrain.error is not None
    tags = {
        "ranker.run_id": run_id,
        "ranker.decision": "failed" if failed else ("base-moved" if pretrain.moved else "base-kept"),
        "ranker.reason": _clip(
            pretrain.error or f"base for windows from {pretrain.for_end}", MAX_TAG_VALUE_CHARS
        ),
        "ranker.base_before": pretrain.previous_base or "(none)",
        "ranker.base_range": f"{pretrain.base_range[0].isoformat()}..{pretrain.base_range[1].isoformat()}",
    }
    if pretrain.version:
        tags["ranker.version"] = pretrain.version
    if pretrain.failed_step:
        tags["ranker.failed_step"] = pretrain.failed_step
    record_id = f"pretrain:{run_id}"
    if train is not None:
        record = train_record(
            train,
            run_name=run_id,
            curve=curve,
            effective=effective,
            partitions=partitions,
            artifacts=artifacts,
            experiment=PRETRAIN_EXPERIMENT,
            record_id=record_id,
            start_ms=start_ms,
            end_ms=end_ms,
            extra_tags=tags,
        )
        return record.model_copy(update={"status": "FAILED" if failed else record.status})
    return TrackingRecord(
        record_id=record_id,
        experiment=PRETRAIN_EXPERIMENT,
        run_name=run_id,
        params=config_params(effective),
        metrics=_point("wall_seconds", pretrain.duration_seconds),
        tags={"ranker.kind": "pretrain", **tags},
        artifacts=list(artifacts),
        status="FAILED" if failed else "FINISHED",
        start_ms=start_ms,
        end_ms=end_ms,
    )
