"""A recipe review in MLflow (docs/tracking.md): ``ranker review`` (and the ranker_recipe_review
DAG) as one parent run of ``ranker-review`` with its recipes' replayed days as children.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ranking.backtest.day import DayRecord
from ranking.backtest.tracking import _days_of, _series, day_records
from ranking.tracking.builders import REVIEW_EXPERIMENT, _clip, _point, metric_key
from ranking.tracking.hooks import _ms, send_family, settings_for
from ranking.tracking.records import MAX_PARAM_VALUE_CHARS, MAX_TAG_VALUE_CHARS, MetricPoint, TrackingRecord

if TYPE_CHECKING:
    from ranking.config.loader import EffectiveConfig
    from ranking.core.workspace import Workspace
    from ranking.review.summary import Review
    from ranking.tracking.client import TrackingRef

log = logging.getLogger(__name__)


def review_record(
    review: Review,
    *,
    days: Mapping[str, Sequence[DayRecord]] | None = None,
    artifacts: Sequence[str] = (),
    code_version: str | None = None,
    start_ms: int | None = None,
    end_ms: int | None = None,
) -> TrackingRecord:
    """``ranker review`` (``review:<id>``, experiment ``ranker-review``): what was reviewed and
    how as params, each recipe's lifts (served, candidate) with their CIs, the verdict and the
    switch as tags."""
    params = {
        "start": review.start,
        "end": review.end,
        "days": str(review.days),
        "min_days": str(review.min_days),
        "baseline": review.baseline,
        "candidate_only": str(review.candidate_only).lower(),
        "cost_weight": str(review.cost_weight),
        "min_promotion_rate": str(review.min_promotion_rate),
        "mode": review.mode,
        "rule": _clip(review.rule, MAX_PARAM_VALUE_CHARS),
    }
    metrics: list[MetricPoint] = []
    for name, w in sorted(review.recipes.items()):
        metrics += _point(metric_key(name, "seconds_per_day"), w.seconds_per_day)
        metrics += _point(metric_key(name, "promotion_rate"), w.promotion_rate)
        metrics += _point(metric_key(name, "failed_days"), len(w.failed_days))
        for who, lift in (("served", w.served), ("candidate", w.candidate)):
            if lift is not None:
                metrics += _point(metric_key(name, who, "lift"), lift.lift)
                metrics += _point(metric_key(name, who, "ci_low"), lift.ci[0] if lift.ci else None)
                metrics += _point(metric_key(name, who, "ci_high"), lift.ci[-1] if lift.ci else None)
                metrics += _point(metric_key(name, who, "days"), lift.days)
    metrics += _series(days or {})
    metrics += _point("days_compared", review.days_compared)
    metrics += _point("wall_seconds", review.wall_seconds)
    metrics += _point("base_pretrains", review.base_pretrains)
    tags = {
        "ranker.kind": "review",
        "ranker.review": review.review_id,
        "ranker.decision": review.status or "-",
        "ranker.reason": _clip(review.error or review.reason or "-", MAX_TAG_VALUE_CHARS),
        "ranker.baseline": review.baseline,
        "ranker.window": f"{review.start}..{review.end}",
        "ranker.recipes": ", ".join(sorted(review.recipes)),
        "ranker.running": review.running or "(none)",
    }
    if review.recommended:
        tags["ranker.recipe"] = review.recommended
    if review.best:
        tags["ranker.best"] = review.best
    if review.switch is not None:
        tags["ranker.switch"] = ("switched to " if review.switch.switched else "kept; ") + (
            review.switch.recipe or "-"
        )
    if code_version:
        tags["ranker.code_version"] = code_version
    return TrackingRecord(
        record_id=f"review:{review.review_id}",
        experiment=REVIEW_EXPERIMENT,
        run_name=review.review_id,
        params=params,
        metrics=metrics,
        tags=tags,
        artifacts=list(artifacts),
        status="FAILED" if review.status == "failed" else "FINISHED",
        start_ms=start_ms,
        end_ms=end_ms,
    )


def track_review(
    ws: Workspace,
    effective: EffectiveConfig | None,
    review: Review,
    recipe_folders: Iterable[tuple[str, Path]],
    *,
    started: float,
    code_version: str | None = None,
    run_id: str | None = None,
) -> TrackingRef | None:
    """``ranker review`` (and the ranker_recipe_review DAG): the review as a parent run, its
    recipes' replayed days as children (experiment ranker-review); ``run_id`` (``--run-id``, the
    DAG's) tags the parent, so the DAG's task can link to it."""
    try:
        settings = settings_for(ws.root, effective)
        days = _days_of(recipe_folders)
        parent = review_record(
            review,
            days=days,
            artifacts=[str(Path(p).resolve()) for p in review.report.values() if Path(p).is_file()],
            code_version=code_version,
            start_ms=_ms(started),
            end_ms=_ms(time.time()),
        )
        if run_id:
            parent.tags["ranker.run_id"] = run_id
        children = day_records(days, parent_id=parent.record_id, experiment=REVIEW_EXPERIMENT)
    except Exception as exc:  # as in track_retrain: never the review's failure
        log.warning("MLflow: review %s not tracked: %s", review.review_id, exc)
        return None
    return send_family(parent, children, settings)
