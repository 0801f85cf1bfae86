"""The review's figures as Prometheus series (pure), delivered like the retrain's metrics: to the
Pushgateway under its own job (``ranker_recipe_review``: a review never replaces the retrain's
group), else to ``<home>/metrics/review.prom`` for the textfile collector."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ranking.monitoring.catalogue import CATALOGUE, PREFIX, REVIEW_MODELS, REVIEW_STATUSES
from ranking.monitoring.delivery import Delivered, deliver_samples
from ranking.monitoring.samples import Sample

if TYPE_CHECKING:
    from ranking.review.summary import Lift, Review

REVIEW_JOB = "ranker_recipe_review"
TEXTFILE = "review.prom"


def _sample(short: str, value: float | None, **labels: str) -> list[Sample]:
    name = PREFIX + short
    if tuple(labels) != CATALOGUE[name].labels:
        raise AssertionError(f"{name}: labels {tuple(labels)} != {CATALOGUE[name].labels}")
    return [] if value is None else [Sample(name, float(value), tuple(labels.items()))]


def review_samples(review: Review, now: float) -> list[Sample]:
    """Series of a review summary (``ranking.review.run``'s ``review.json``)."""
    out = _sample("review_timestamp_seconds", now)
    for status in REVIEW_STATUSES:
        out += _sample("review_status", 1.0 if review.status == status else 0.0, status=status)
    out += _sample("review_days", review.days_compared)
    if review.basis is not None:
        out += _sample("review_decided_on_candidates", float(review.basis == "candidate"))
    for name, recipe in review.recipes.items():
        for model in REVIEW_MODELS:
            lift, low, high, mde = _figures(recipe.served if model == "served" else recipe.candidate)
            out += _sample("review_relative_change", lift, recipe=name, model=model)
            out += _sample("review_relative_change_ci_lower", low, recipe=name, model=model)
            out += _sample("review_relative_change_ci_upper", high, recipe=name, model=model)
            out += _sample("review_minimum_detectable_effect", mde, recipe=name, model=model)
            lift, low, _, _ = _figures(recipe.vs_heuristic.get(model))
            out += _sample("review_heuristic_relative_change", lift, recipe=name, model=model)
            out += _sample("review_heuristic_relative_change_ci_lower", low, recipe=name, model=model)
        out += _sample("review_train_seconds_per_day", recipe.seconds_per_day, recipe=name)
        out += _sample("review_recommended", float(review.recommended == name), recipe=name)
        out += _sample("review_running", float(review.running == name), recipe=name)
    for pair in review.delayed_update:
        labels = {"recipe": pair.with_frozen, "reference": pair.without}
        for model in REVIEW_MODELS:
            lift, low, high, _ = _figures(pair.served if model == "served" else pair.candidate)
            out += _sample("review_delayed_update_relative_change", lift, **labels, model=model)
            out += _sample("review_delayed_update_relative_change_ci_lower", low, **labels, model=model)
            out += _sample("review_delayed_update_relative_change_ci_upper", high, **labels, model=model)
    return out


def _figures(lift: Lift | None) -> tuple[float | None, float | None, float | None, float | None]:
    """(lift, CI lower, CI upper, MDE); None each where nothing was measured."""
    if lift is None:
        return None, None, None, None
    return lift.lift, lift.ci[0], lift.ci[1], lift.mde


def deliver(samples: list[Sample], pushgateway: str | None, metrics_dir: Path) -> Delivered:
    """Push when a Pushgateway is configured (falling back to the textfile when the push fails)."""
    return deliver_samples(samples, pushgateway, metrics_dir / TEXTFILE, REVIEW_JOB)
