"""The review's figures as Prometheus series (pure), delivered like the retrain's metrics: to the
Pushgateway under its own job (``ranker_recipe_review``: a review never replaces the retrain's
group), else to ``<home>/metrics/review.prom`` for the textfile collector."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ranking.monitoring.catalogue import CATALOGUE, PREFIX, REVIEW_MODELS, REVIEW_STATUSES
from ranking.monitoring.delivery import Delivered, deliver_samples
from ranking.monitoring.samples import Sample

REVIEW_JOB = "ranker_recipe_review"
TEXTFILE = "review.prom"


def _sample(short: str, value: float | None, **labels: str) -> list[Sample]:
    name = PREFIX + short
    if tuple(labels) != CATALOGUE[name].labels:
        raise AssertionError(f"{name}: labels {tuple(labels)} != {CATALOGUE[name].labels}")
    return [] if value is None else [Sample(name, float(value), tuple(labels.items()))]


def review_samples(review: Mapping[str, Any], now: float) -> list[Sample]:
    """Series of a review summary (``ranking.review.run``'s ``review.json``)."""
    out = _sample("review_timestamp_seconds", now)
    for status in REVIEW_STATUSES:
        out += _sample("review_status", 1.0 if review["status"] == status else 0.0, status=status)
    out += _sample("review_days", review.get("days_compared"))
    if review.get("basis") is not None:
        out += _sample("review_decided_on_candidates", float(review["basis"] == "candidate"))
    for name, recipe in (review.get("recipes") or {}).items():
        for model in REVIEW_MODELS:
            lift = _part(recipe.get(model))
            ci = lift.get("ci") or [None, None]
            out += _sample("review_relative_change", lift.get("lift"), recipe=name, model=model)
            out += _sample("review_relative_change_ci_lower", ci[0], recipe=name, model=model)
            out += _sample("review_relative_change_ci_upper", ci[1], recipe=name, model=model)
            out += _sample("review_minimum_detectable_effect", lift.get("mde"), recipe=name, model=model)
            over = _part((recipe.get("vs_heuristic") or {}).get(model))
            out += _sample("review_heuristic_relative_change", over.get("lift"), recipe=name, model=model)
            low = (over.get("ci") or [None])[0]
            out += _sample("review_heuristic_relative_change_ci_lower", low, recipe=name, model=model)
        out += _sample("review_train_seconds_per_day", recipe.get("seconds_per_day"), recipe=name)
        out += _sample("review_recommended", float(review.get("recommended") == name), recipe=name)
        out += _sample("review_running", float(review.get("running") == name), recipe=name)
    for pair in review.get("delayed_update") or []:
        labels = {"recipe": pair["with"], "reference": pair["without"]}
        for model in REVIEW_MODELS:
            lift = _part(pair.get(model))
            ci = lift.get("ci") or [None, None]
            out += _sample("review_delayed_update_relative_change", lift.get("lift"), **labels, model=model)
            out += _sample("review_delayed_update_relative_change_ci_lower", ci[0], **labels, model=model)
            out += _sample("review_delayed_update_relative_change_ci_upper", ci[1], **labels, model=model)
    return out


def _part(found: Any) -> Mapping[str, Any]:
    return found if isinstance(found, dict) else {}


def deliver(samples: list[Sample], pushgateway: str | None, metrics_dir: Path) -> Delivered:
    """Push when a Pushgateway is configured (falling back to the textfile when the push fails)."""
    return deliver_samples(samples, pushgateway, metrics_dir / TEXTFILE, REVIEW_JOB)
