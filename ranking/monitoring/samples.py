"""Samples: a run's step summaries and the folded state turned into the catalogue's series (pure).

Every value comes from a documented summary field (docs/architecture.md, "Step summaries") or from
the persistent state; a field that is absent gives no series rather than a made-up value.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import ValidationError

from features.validation.anomalies import KINDS as ANOMALY_KINDS
from ranking.core.summaries import (
    EvalSummary,
    FreshnessSummary,
    GateSummary,
    RunSummary,
    StepSummary,
    TrainSummary,
    ValidationSummary,
    WindowSummary,
)
from ranking.monitoring.catalogue import (
    CATALOGUE,
    KNOWN_STEPS,
    MAX_SLICES,
    PHASES,
    PREFIX,
    STATUSES,
    VALIDATION_POLICIES,
)
from ranking.monitoring.fields import MetricsInputError, day_timestamp, free_label, label
from ranking.monitoring.runs import RunRecord, gate_decision, promoted, stage_durations, step_failed
from ranking.monitoring.state import MetricsState, duration_baselines

MAX_GATE_CHECKS = 64
MAX_FEATURES = 256  # drift scores per comparison: the feature service's columns, bounded


@dataclass(frozen=True)
class Sample:
    """One series' value; ``key`` is how the text format names it (``name{a="x",b="y"}``)."""

    name: str
    value: float
    labels: tuple[tuple[str, str], ...] = ()

    @property
    def key(self) -> str:
        inner = ",".join(f'{k}="{v}"' for k, v in sorted(self.labels))
        return f"{self.name}{{{inner}}}" if inner else self.name


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


def _add_train(out: _Samples, train: TrainSummary) -> None:
    out.add(
        "train_info",
        1,
        schedule=label(train.schedule, "schedule"),
        pipeline=label(train.pipeline, "pipeline"),
    )
    out.add("train_samples_per_second", train.samples_per_second)
    out.add("train_epochs", len(train.epochs) if train.epochs else None)
    lookup: dict[str, list[tuple[float, float | None]]] = {p: [] for p in PHASES}
    exposed: dict[str, list[tuple[float, float | None]]] = {p: [] for p in PHASES}
    for i, epoch in enumerate(train.epochs):
        if not 0 <= epoch.epoch < 1000:
            raise MetricsInputError(
                f"train summary epochs[{i}]: epoch must be in [0, 1000), got {epoch.epoch}"
            )
        labels = {"epoch": str(epoch.epoch), "phase": epoch.phase}
        seconds = epoch.duration_seconds
        out.add("train_epoch_loss", epoch.loss, **labels)
        out.add("train_epoch_samples_per_second", epoch.samples_per_second, **labels)
        out.add("train_epoch_duration_seconds", seconds, **labels)
        if epoch.lookup_ratio is not None:
            lookup[epoch.phase].append((epoch.lookup_ratio, seconds))
        # exported only as measured: a summary without it (timing off, an older trainer) has none
        if epoch.exposed_lookup_ratio is not None:
            exposed[epoch.phase].append((epoch.exposed_lookup_ratio, seconds))
    for phase in PHASES:
        out.add("embedding_lookup_ratio", _weighted_mean(lookup[phase]), phase=phase)
        out.add("embedding_lookup_exposed_ratio", _weighted_mean(exposed[phase]), phase=phase)


def _add_eval(out: _Samples, model: str, metrics: EvalSummary | None) -> None:
    if metrics is None:
        return
    out.add("eval_save_hit_at_3_ratio", metrics.save_hit_at_3, model=model)
    out.add("eval_auc_ratio", metrics.auc, model=model)
    out.add("eval_normalized_entropy", metrics.ne, model=model)


def _evaluated(evaluate: StepSummary | None) -> EvalSummary | None:
    """The metrics of a ``ranker evaluate`` summary (a step without a model of its own: its
    ``metrics`` object, typed here)."""
    if evaluate is None or step_failed(evaluate) or not evaluate.model_extra:
        return None
    metrics = evaluate.model_extra.get("metrics")
    if metrics is None:
        return None
    if not isinstance(metrics, dict):
        raise MetricsInputError(f"evaluate summary: field 'metrics' must be an object, got {metrics!r}")
    try:
        return EvalSummary.model_validate(metrics, extra="ignore")
    except ValidationError as exc:
        raise MetricsInputError(f"evaluate summary metrics: {exc.errors()[0]['msg']}") from None


def _add_gate(out: _Samples, gate: GateSummary) -> None:
    where = "gate summary"
    if len(gate.checks) > MAX_GATE_CHECKS:
        raise MetricsInputError(f"{where}: {len(gate.checks)} checks (more than {MAX_GATE_CHECKS})")
    seen = set()
    for i, check in enumerate(gate.checks):
        name = label(check.name, f"{where} checks[{i}] name")
        if name in seen:
            raise MetricsInputError(f"{where} checks[{i}]: duplicate check name {name!r}")
        seen.add(name)
        out.add("gate_check_passed", 1.0 if check.passed else 0.0, check=name)
        out.add("gate_check_value", check.value, check=name)
        out.add("gate_check_warning", 1.0 if check.warning else 0.0, check=name)
        # a [low, high] threshold is not one number: no series rather than a wrong one
        if not isinstance(check.threshold, tuple):
            out.add("gate_check_threshold", check.threshold, check=name)
    for name in sorted(set(gate.failed_checks) - seen):  # a failed check listed without its record
        out.add("gate_check_passed", 0.0, check=label(name, f"{where} failed check"))
    out.add("gate_relative_change", gate.relative_change)
    if gate.ci is not None:
        out.add("gate_relative_change_ci_lower", gate.ci[0])
        out.add("gate_relative_change_ci_upper", gate.ci[1])


def _add_window(out: _Samples, window: WindowSummary) -> None:
    out.add("window_rows", window.rows_train, split="train")
    out.add("window_rows", window.rows_eval, split="eval")
    out.add("window_length_days", window.days)
    out.add("window_days", window.days_built, state="built")
    out.add("window_days", window.days_reused, state="reused")
    out.add("window_label_rate_ratio", window.label_rate)
    out.add("window_end_timestamp_seconds", day_timestamp(window.end))


def _add_validation(out: _Samples, validation: ValidationSummary) -> None:
    """The data validation's outcome, its anomalies by policy and kind, its drift scores."""
    where = "validate summary"
    out.add("validation_passed", 0.0 if validation.verdict == "fail" else 1.0)
    for policy in VALIDATION_POLICIES:
        out.add(
            "validation_anomalies", sum(1 for a in validation.anomalies if a.policy == policy), policy=policy
        )
    for kind in ANOMALY_KINDS:
        found = sum(1 for a in validation.anomalies if a.kind == kind and a.policy != "accepted")
        out.add("validation_anomalies_by_kind", found, kind=kind)
    for comparison, scores in (("drift", validation.drift), ("skew", validation.skew)):
        if len(scores) > MAX_FEATURES:
            raise MetricsInputError(f"{where}: {len(scores)} {comparison} scores (more than {MAX_FEATURES})")
        for feature, score in sorted(scores.items()):
            out.add(
                "validation_drift_score",
                score,
                feature=label(feature, f"{where} {comparison}"),
                comparison=comparison,
            )


def build_samples(run: RunRecord, state: MetricsState, now: float) -> list[Sample]:
    """Every series for ``run``; ``state`` must already include the run (see advance_state)."""
    out = _Samples()
    _add_run_status(out, run, state, now)
    _add_durations(out, run, state)
    train = run.summaries.get("train")
    if isinstance(train, TrainSummary):
        _add_train(out, train)
    _add_models(out, run)
    _add_decisions(out, run, state)
    _add_data(out, run, state)
    out.add("metrics_push_failures_total", state.push_failures_total)
    return out.items


def _add_run_status(out: _Samples, run: RunRecord, state: MetricsState, now: float) -> None:
    """When runs last ran, succeeded and failed; this run's status; the run counters."""
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


def _add_durations(out: _Samples, run: RunRecord, state: MetricsState) -> None:
    """Each stage's wall time and baseline; the whole run's (its own summary's, else the stages')."""
    durations = stage_durations(run)
    for stage, seconds in sorted(durations.items()):
        out.add("stage_duration_seconds", seconds, stage=stage)
    for stage, seconds in sorted(duration_baselines(state, run.run_id).items()):
        out.add("stage_duration_baseline_seconds", seconds, stage=stage)
    whole = run.summaries.get("run")
    total = whole.duration_seconds if isinstance(whole, RunSummary) else None
    out.add("run_duration_seconds", total if total is not None else (sum(durations.values()) or None))


def _candidate(run: RunRecord) -> EvalSummary | None:
    """The candidate's offline metrics: the gate's, else the train step's, else ``ranker evaluate``'s."""
    gate = run.summaries.get("gate")
    if isinstance(gate, GateSummary):
        return gate.candidate
    train = run.summaries.get("train")
    if isinstance(train, TrainSummary):
        return train.eval
    return _evaluated(run.summaries.get("evaluate"))


def _add_models(out: _Samples, run: RunRecord) -> None:
    """The candidate's metrics; with a gate, the champion's, the heuristic's and the gate's checks."""
    _add_eval(out, "candidate", _candidate(run))
    gate = run.summaries.get("gate")
    if isinstance(gate, GateSummary):
        _add_eval(out, "champion", gate.champion)
        if gate.heuristic is not None:
            _add_eval(out, "heuristic", gate.heuristic)
            out.add("heuristic_relative_change", gate.heuristic.relative_change, model="candidate")
            out.add("heuristic_relative_change", gate.heuristic.champion_relative_change, model="champion")
            if gate.heuristic.ci is not None:
                out.add("heuristic_relative_change_ci_lower", gate.heuristic.ci[0])
        _add_slices(out, gate)
        _add_gate(out, gate)


def _add_slices(out: _Samples, gate: GateSummary) -> None:
    """Each slice's save HIT@3 by model and the candidate's change vs the champion."""
    slices = gate.slices or []
    if len(slices) > MAX_SLICES:
        raise MetricsInputError(f"gate summary: {len(slices)} slices (more than {MAX_SLICES})")
    names = [free_label(s.name) for s in slices]
    if len(set(names)) != len(names):
        raise MetricsInputError("gate summary: two slices have the same label value")
    for name, found in zip(names, slices, strict=True):
        out.add("slice_requests_with_save", found.requests_with_save, slice=name)
        for model, hit in (
            ("candidate", found.candidate),
            ("champion", found.champion),
            ("heuristic", found.heuristic),
        ):
            out.add("slice_save_hit_at_3_ratio", hit, slice=name, model=model)
        out.add("slice_relative_change", found.relative_change, slice=name)
        if found.ci is not None:
            out.add("slice_relative_change_ci_lower", found.ci[0], slice=name)
            out.add("slice_relative_change_ci_upper", found.ci[1], slice=name)


def _add_decisions(out: _Samples, run: RunRecord, state: MetricsState) -> None:
    """The gate's decision, the rejection streak and the promotion and rejection counters."""
    decision = gate_decision(run)
    if decision is not None:
        out.add("gate_passed", 1.0 if decision == "pass" else 0.0)
    out.add("gate_consecutive_rejections", state.consecutive_rejections)
    for forced in ("false", "true"):
        out.add("promotions_total", state.promotions_total.get(forced, 0.0), forced=forced)
    out.add("rejections_total", state.rejections_total)
    out.add("last_promotion_timestamp_seconds", state.last_promotion_timestamp)


def _add_data(out: _Samples, run: RunRecord, state: MetricsState) -> None:
    """The window, the features' freshness and the data facts kept in the state."""
    window = run.summaries.get("window")
    if isinstance(window, WindowSummary):
        _add_window(out, window)
    validation = run.summaries.get("validate")
    if isinstance(validation, ValidationSummary):
        _add_validation(out, validation)
    freshness = run.summaries.get("freshness")
    if isinstance(freshness, FreshnessSummary):
        out.add("feature_freshness_lag_seconds", freshness.lag_seconds)
    out.add("feature_source_end_timestamp_seconds", state.feature_source_end_timestamp)
    out.add("materialize_end_timestamp_seconds", state.materialize_end_timestamp)
