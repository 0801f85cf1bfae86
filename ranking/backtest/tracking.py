"""A backtest in MLflow (docs/tracking.md): ``ranker backtest`` as one parent run of
``ranker-backtest`` with a child per recipe and replayed day, and the gate suite (``--inject``) as
one run. The records are built from the backtest's own report (pure); sending them, or queueing
them when MLflow is down, is ``ranking.tracking``'s.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ranking.backtest.day import DayRecord
from ranking.backtest.suite import GateBrief
from ranking.tracking.builders import (
    BACKTEST_EXPERIMENT,
    _clip,
    _point,
    metric_key,
)
from ranking.tracking.hooks import _ms, send, send_family, settings_for
from ranking.tracking.records import MAX_PARAM_VALUE_CHARS, MAX_TAG_VALUE_CHARS, MetricPoint, TrackingRecord

if TYPE_CHECKING:
    from ranking.backtest.report import BacktestReport
    from ranking.backtest.suite import SuiteSummary
    from ranking.config.loader import EffectiveConfig
    from ranking.core.workspace import Workspace
    from ranking.tracking.client import TrackingRef

log = logging.getLogger(__name__)

_DAY_METRICS = ("save_hit_at_3", "auc", "ne")


def day_record(day: DayRecord, recipe: str, *, parent_id: str, experiment: str) -> TrackingRecord:
    """One replayed day of one recipe (``<parent>:day:<date>:<recipe>``): the served model's and
    the candidate's metrics, the gate's call, the champion before and after."""
    metrics: list[MetricPoint] = []
    for who, model in (("served", day.served), ("candidate", day.candidate)):
        recorded = model.metrics if model is not None else None
        if recorded is not None:
            metrics += [p for m in _DAY_METRICS for p in _point(f"{who}_{m}", recorded.value(m))]
    metrics += _point("gate_relative_change", day.relative_change)
    if day.gate_ci:
        metrics += _point("gate_ci_low", day.gate_ci[0]) + _point("gate_ci_high", day.gate_ci[-1])
    metrics += _point("promoted", 1.0 if day.promoted else 0.0)
    metrics += _point("train_seconds", day.train_seconds) + _point("run_seconds", day.run_seconds)
    metrics += _point("pretrain_seconds", day.pretrain_seconds)
    if day.served is not None:
        metrics += _point("served_age_days", day.served.age_days)
    tags = {
        "ranker.kind": "day",
        "ranker.recipe": recipe,
        "ranker.day": day.day,
        "ranker.decision": day.decision or ("failed" if day.failed else "-"),
        "ranker.champion_before": day.champion_before or "(none)",
        "ranker.champion": day.champion_after or "(none)",
    }
    if day.run_id:
        tags["ranker.run_id"] = day.run_id
    if day.candidate is not None:
        tags["ranker.version"] = day.candidate.version
    if day.gate_decision:
        tags["ranker.gate"] = day.gate_decision
    if day.failed_checks:
        tags["ranker.failed_checks"] = ", ".join(day.failed_checks)
    if day.error:
        tags["ranker.reason"] = _clip(day.error, MAX_TAG_VALUE_CHARS)
    return TrackingRecord(
        record_id=f"{parent_id}:day:{day.day}:{recipe}",
        experiment=experiment,
        run_name=f"{day.day} {recipe}",
        parent_record_id=parent_id,
        metrics=metrics,
        tags=tags,
        status="FAILED" if day.failed else "FINISHED",
    )


def day_records(
    days: Mapping[str, Sequence[DayRecord]], *, parent_id: str, experiment: str
) -> list[TrackingRecord]:
    """Every replayed day of every recipe, by day then recipe, as children of ``parent_id``."""
    found = [(d.day, recipe, d) for recipe, recorded in days.items() for d in recorded]
    return [
        day_record(d, recipe, parent_id=parent_id, experiment=experiment)
        for _, recipe, d in sorted(found, key=lambda x: (x[0], x[1]))
    ]


def _lift_points(prefix: str, change: Mapping[str, float], ci: Mapping[str, Any]) -> list[MetricPoint]:
    points: list[MetricPoint] = []
    for metric in _DAY_METRICS:
        points += _point(metric_key(prefix, metric), change.get(metric))
        bounds = ci.get(metric)
        if bounds:
            points += _point(metric_key(prefix, metric, "ci_low"), bounds[0])
            points += _point(metric_key(prefix, metric, "ci_high"), bounds[-1])
    return points


def _series(days: Mapping[str, Sequence[DayRecord]]) -> list[MetricPoint]:
    """Each recipe's save HIT@3 day by day on the parent (step = the day's index): a chart of
    the recipes across days in one run."""
    points: list[MetricPoint] = []
    for recipe, recorded in sorted(days.items()):
        for i, d in enumerate(sorted(recorded, key=lambda r: r.day)):
            for who, model in (("served", d.served), ("candidate", d.candidate)):
                recorded_metrics = model.metrics if model is not None else None
                if recorded_metrics is not None:
                    value = recorded_metrics.value("save_hit_at_3")
                    points += _point(metric_key(f"{who}_save_hit_at_3", recipe), value, i)
    return points


def backtest_record(
    report: BacktestReport,
    backtest_id: str,
    *,
    artifacts: Sequence[str] = (),
    code_version: str | None = None,
    start_ms: int | None = None,
    end_ms: int | None = None,
) -> TrackingRecord:
    """``ranker backtest`` (``backtest:<id>``, experiment ``ranker-backtest``): the spec as params,
    each recipe's summary and its lift over the baseline with the CI, the days as a series."""
    spec = report.spec
    params = {
        "start": spec.start.isoformat(),
        "days": str(spec.days),
        "baseline": spec.baseline,
        "bootstrap_samples": str(spec.bootstrap_samples),
        "ci_level": str(spec.ci_level),
        "seed": str(spec.seed),
        **{metric_key("recipe", r.name): _clip(str(r.path), MAX_PARAM_VALUE_CHARS) for r in spec.recipes},
    }
    metrics: list[MetricPoint] = []
    for name, s in sorted(report.recipes.items()):
        metrics += _point(metric_key(name, "served_save_hit_at_3"), s.served_mean.get("save_hit_at_3"))
        metrics += _point(metric_key(name, "candidate_save_hit_at_3"), s.candidate_mean.get("save_hit_at_3"))
        metrics += _point(metric_key(name, "promotions"), s.promotions)
        metrics += _point(metric_key(name, "promotion_rate"), s.promotion_rate)
        metrics += _point(metric_key(name, "failed_days"), len(s.failed_days))
        metrics += _point(metric_key(name, "train_seconds"), float(s.total_train_seconds))
        metrics += _point(metric_key(name, "longest_staleness_days"), s.longest_staleness_days)
    for who, found in (
        ("vs_baseline", report.vs_baseline),
        ("candidates_vs_baseline", report.candidates_vs_baseline),
    ):
        for name, c in sorted(found.items()):
            if c is not None:
                metrics += _lift_points(metric_key(name, who), c.relative_change, c.ci)
    metrics += _series(report.days)
    metrics += _point("wall_seconds", report.wall_seconds)
    failed = sum(len(s.failed_days) for s in report.recipes.values())
    end = spec.eval_days[-1]
    tags = {
        "ranker.kind": "backtest",
        "ranker.backtest": backtest_id,
        "ranker.baseline": spec.baseline,
        "ranker.recipes": ", ".join(r.name for r in spec.recipes),
        "ranker.window": f"{spec.start.isoformat()}..{end.isoformat()}",
        "ranker.decision": "failed-days" if failed else "complete",
    }
    if code_version:
        tags["ranker.code_version"] = code_version
    return TrackingRecord(
        record_id=f"backtest:{backtest_id}",
        experiment=BACKTEST_EXPERIMENT,
        run_name=backtest_id,
        params=params,
        metrics=metrics,
        tags=tags,
        artifacts=list(artifacts),
        status="FAILED" if failed else "FINISHED",
        start_ms=start_ms,
        end_ms=end_ms,
    )


def suite_record(
    summary: SuiteSummary,
    backtest_id: str,
    injections: Sequence[str],
    *,
    artifacts: Sequence[str] = (),
    code_version: str | None = None,
    start_ms: int | None = None,
    end_ms: int | None = None,
) -> TrackingRecord:
    """``ranker backtest --inject`` (``gate-suite:<id>``, experiment ``ranker-backtest``): the
    gates replayed over the same days with bad candidates planted. Per recipe and gate: its regret
    against the oracle and against always promoting, the staleness of what it served, and how
    many planted bad candidates it promoted; which kinds it stopped as tags."""
    params = {
        "injections": _clip(", ".join(injections) or "-", MAX_PARAM_VALUE_CHARS),
        "recipes": ", ".join(sorted(summary.recipes)),
    }
    metrics: list[MetricPoint] = []
    tags = {"ranker.kind": "gate-suite", "ranker.backtest": backtest_id}
    for recipe, briefs in sorted(summary.recipes.items()):
        for gate, brief in sorted(briefs.items()):
            if not isinstance(brief, GateBrief):
                continue  # the recipe's report files
            g = brief.regret
            metrics += _point(metric_key(recipe, gate, "regret_vs_oracle"), g.regret_vs_oracle)
            metrics += _point(metric_key(recipe, gate, "vs_always_promote"), g.vs_always_promote)
            metrics += _point(metric_key(recipe, gate, "served_mean"), g.served_mean)
            metrics += _point(metric_key(recipe, gate, "staleness_median_days"), g.staleness_median_days)
            metrics += _point(metric_key(recipe, gate, "bad_promoted"), brief.bad_promoted)
            metrics += _point(metric_key(recipe, gate, "rejected_a_better"), g.rejected_a_better_candidate)
            metrics += _point(metric_key(recipe, gate, "promoted_a_worse"), g.promoted_a_worse_one)
            if brief.stopped:
                stopped = ", ".join(f"{kind} {n}" for kind, n in sorted(brief.stopped.items()))
                tags[f"ranker.stopped.{metric_key(recipe, gate)}"] = _clip(stopped, MAX_TAG_VALUE_CHARS)
    if code_version:
        tags["ranker.code_version"] = code_version
    return TrackingRecord(
        record_id=f"gate-suite:{backtest_id}",
        experiment=BACKTEST_EXPERIMENT,
        run_name=f"gate-suite {backtest_id}",
        params=params,
        metrics=metrics,
        tags=tags,
        artifacts=list(artifacts),
        start_ms=start_ms,
        end_ms=end_ms,
    )


def _days_of(folders: Iterable[tuple[str, Path]]) -> dict[str, list[DayRecord]]:
    """Each recipe's recorded days (``<recipe folder>/days/<date>.json``)."""
    found: dict[str, list[DayRecord]] = {}
    for recipe, folder in folders:
        days = []
        for path in sorted((folder / "days").glob("*.json")):
            try:
                days.append(DayRecord.read(path))
            except (OSError, ValueError) as exc:
                log.warning("MLflow: %s left out (%s)", path, str(exc).splitlines()[0])
        found[recipe] = days
    return found


def track_backtest(
    ws: Workspace,
    effective: EffectiveConfig | None,
    report: BacktestReport,
    backtest_id: str,
    paths: Mapping[str, str],
    *,
    started: float,
    code_version: str | None = None,
) -> TrackingRef | None:
    """``ranker backtest``: one parent run, a child per recipe and day (experiment ranker-backtest)."""
    try:
        settings = settings_for(ws.root, effective)
        parent = backtest_record(
            report,
            backtest_id,
            artifacts=[str(Path(p).resolve()) for p in paths.values() if Path(p).is_file()],
            code_version=code_version,
            start_ms=_ms(started),
            end_ms=_ms(time.time()),
        )
        children = day_records(report.days, parent_id=parent.record_id, experiment=BACKTEST_EXPERIMENT)
    except Exception as exc:  # as in track_retrain: never the backtest's failure
        log.warning("MLflow: backtest %s not tracked: %s", backtest_id, exc)
        return None
    return send_family(parent, children, settings)


def track_suite(
    ws: Workspace,
    effective: EffectiveConfig | None,
    summary: SuiteSummary,
    backtest_id: str,
    injections: Sequence[str],
    *,
    started: float,
    code_version: str | None = None,
) -> TrackingRef | None:
    """``ranker backtest --inject``: the gate suite as one run of ranker-backtest."""
    try:
        settings = settings_for(ws.root, effective)
        files = [p for brief in summary.recipes.values() for p in _report_files(brief)]
        record = suite_record(
            summary,
            backtest_id,
            injections,
            artifacts=files,
            code_version=code_version,
            start_ms=_ms(started),
            end_ms=_ms(time.time()),
        )
    except Exception as exc:  # as in track_retrain: never the suite's failure
        log.warning("MLflow: gate suite %s not tracked: %s", backtest_id, exc)
        return None
    return send(record, settings)


def _report_files(brief: Mapping[str, object]) -> list[str]:
    report = brief.get("report")
    paths = report.values() if isinstance(report, dict) else []
    return [str(Path(p).resolve()) for p in paths if isinstance(p, str) and Path(p).is_file()]
