"""Samples: a run's step summaries and the folded state turned into the catalogue's series (pure).

Every value comes from a documented summary field (docs/architecture.md, "Step summaries") or from
the persistent state; a field that is absent gives no series rather than a made-up value.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ranking.monitoring.catalogue import CATALOGUE, KNOWN_STEPS, PHASES, PREFIX, STATUSES
from ranking.monitoring.fields import MetricsInputError, as_dict, as_float, as_list, date_timestamp, label
from ranking.monitoring.runs import RunRecord, gate_decision, promoted, stage_durations
from ranking.monitoring.state import MetricsState, duration_baselines

MAX_GATE_CHECKS = 64


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


def _add_train(out: _Samples, train: Mapping[str, Any]) -> None:
    where = "train summary"
    schedule, pipeline = train.get("schedule"), train.get("pipeline")
    if schedule is not None or pipeline is not None:
        out.add(
            "train_info",
            1,
            schedule=label(schedule if schedule is not None else "unknown", "schedule"),
            pipeline=label(pipeline if pipeline is not None else "unknown", "pipeline"),
        )
    out.add("train_samples_per_second", as_float(train, "samples_per_second", where))
    epochs = as_list(train, "epochs", where)
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
        seconds = as_float(epoch, "duration_seconds", ewhere)
        out.add("train_epoch_loss", as_float(epoch, "loss", ewhere), **labels)
        out.add("train_epoch_samples_per_second", as_float(epoch, "samples_per_second", ewhere), **labels)
        out.add("train_epoch_duration_seconds", seconds, **labels)
        ratio = as_float(epoch, "lookup_ratio", ewhere)
        if ratio is not None:
            lookup[phase].append((ratio, seconds))
        # exported only as measured: a summary without it (timing off, an older trainer) has none
        exposed_ratio = as_float(epoch, "exposed_lookup_ratio", ewhere)
        if exposed_ratio is not None:
            exposed[phase].append((exposed_ratio, seconds))
    for phase in PHASES:
        out.add("embedding_lookup_ratio", _weighted_mean(lookup[phase]), phase=phase)
        out.add("embedding_lookup_exposed_ratio", _weighted_mean(exposed[phase]), phase=phase)


def _add_eval(out: _Samples, model: str, metrics: Mapping[str, Any] | None, where: str) -> None:
    if metrics is None:
        return
    nested = as_dict(metrics, "metrics", where)  # {"version": ..., "metrics": {...}} or flat
    if nested is not None:
        metrics = nested
    out.add("eval_save_hit_at_3_ratio", as_float(metrics, "save_hit_at_3", where), model=model)
    out.add("eval_auc_ratio", as_float(metrics, "auc", where), model=model)
    out.add("eval_normalized_entropy", as_float(metrics, "ne", where), model=model)


def _add_gate(out: _Samples, gate: Mapping[str, Any]) -> None:
    where = "gate summary"
    checks = as_list(gate, "checks", where)
    if len(checks) > MAX_GATE_CHECKS:
        raise MetricsInputError(f"{where}: {len(checks)} checks (more than {MAX_GATE_CHECKS})")
    failed = {
        str(c.get("name") if isinstance(c, Mapping) else c) for c in as_list(gate, "failed_checks", where)
    }
    seen = set()
    for i, check in enumerate(checks):
        cwhere = f"{where} checks[{i}]"
        if not isinstance(check, Mapping):
            raise MetricsInputError(f"{cwhere}: expected an object, got {check!r}")
        name = label(check.get("name"), f"{cwhere} name")
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
        out.add("gate_check_passed", 0.0, check=label(name, f"{where} failed check"))
    out.add("gate_relative_change", as_float(gate, "relative_change", where))
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
    out.add("window_rows", as_float(window, "rows_train", where), split="train")
    out.add("window_rows", as_float(window, "rows_eval", where), split="eval")
    out.add("window_length_days", as_float(window, "days", where))
    out.add("window_days", as_float(window, "days_built", where), state="built")
    out.add("window_days", as_float(window, "days_reused", where), state="reused")
    out.add("window_label_rate_ratio", as_float(window, "label_rate", where))
    out.add("window_end_timestamp_seconds", date_timestamp(window.get("end"), f"{where} end"))


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
    total = as_float(whole, "duration_seconds", "run summary") if whole is not None else None
    out.add("run_duration_seconds", total if total is not None else (sum(durations.values()) or None))

    train = s.get("train")
    if train is not None:
        _add_train(out, train)

    gate = s.get("gate")
    candidate = as_dict(gate, "candidate", "gate summary") if gate is not None else None
    if candidate is None:
        evaluate = s.get("evaluate")
        if train is not None:
            candidate = as_dict(train, "eval", "train summary")
        if candidate is None and evaluate is not None:
            candidate = evaluate
    _add_eval(out, "candidate", candidate, "candidate metrics")
    if gate is not None:
        _add_eval(out, "champion", as_dict(gate, "champion", "gate summary"), "champion metrics")
        _add_gate(out, gate)
    decision = gate_decision(run)
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
        out.add("feature_freshness_lag_seconds", as_float(freshness, "lag_seconds", "freshness summary"))
    out.add("feature_source_end_timestamp_seconds", state.feature_source_end_timestamp)
    out.add("materialize_end_timestamp_seconds", state.materialize_end_timestamp)
    out.add("metrics_push_failures_total", state.push_failures_total)
    return out.items
