"""The weekly recipe review's series reach a real Prometheus through a real Pushgateway (job
ranker_recipe_review, beside the retrain's group), and the dashboard's review row and the
RankerRunningRecipeWorse alert are run against Prometheus's HTTP API on them.

Two reviews, in file order, pushed by ``ranking.review.metrics`` (what ``ranker review`` does)
from review summaries of the shape ``ranking.review.run`` writes: a healthy one (the running
recipe's CI reaches the best lower bound: quiet) and one whose running recipe is significantly
worse than the baseline (the alert fires, in the expression and in Prometheus's own evaluation).
The servers are test_monitoring_integration's (started for this module; skipped without them).
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import pytest
from monitoring_fixtures import http_get_json, prom_query, wait_for_another_scrape
from test_monitoring_integration import (
    Published,
    Servers,
    alert_exprs,
    panel_exprs,
    reads_review,
    scraped_series,
    series_problems,
    servers,  # noqa: F401  # the module-scoped fixture
)

from ranking.review.metrics import REVIEW_JOB, deliver, review_samples
from ranking.review.rule import RULE, minimum_detectable_effect
from ranking.review.summary import Review

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ALERT = "RankerRunningRecipeWorse"
REVIEW_PANELS = [(w, e) for w, e in panel_exprs() if reads_review(e)]
REVIEW_ALERTS = {a: e for a, e in alert_exprs() if reads_review(e)}


def _lift(lift: float, low: float, high: float) -> dict[str, Any]:
    # the MDE as the review computes it from the CI (95 %, 80 % power)
    return {"lift": lift, "ci": [low, high], "days": 13, "mde": minimum_detectable_effect([low, high], 0.95)}


def review_summary(running: str, default_served: tuple[float, float, float]) -> Review:
    """A 14-day review of naive (the baseline), default and base-j, in ``review.json``'s shape."""
    return Review.model_validate(
        {
            **_REVIEWED,
            **_review_fields(running, default_served),
        }
    )


# what the review was asked (the series do not read it)
_REVIEWED = {
    "start": "2026-11-10",
    "end": "2026-11-23",
    "days": 14,
    "min_days": 7,
    "baseline": "naive",
    "candidate_only": False,
    "cost_weight": 0.0,
    "min_promotion_rate": 0.5,
    "mode": "auto",
    "rule": RULE,
    "backtest_dir": "backtests/review-2026-11-23",
}


def _review_fields(running: str, default_served: tuple[float, float, float]) -> dict[str, Any]:
    return {
        "review_id": "2026-11-23",
        "status": "ok",
        "days_compared": 13,
        "recommended": "naive",
        "basis": "served",
        "running": running,
        # log A's figures (issue 31): default vs base-j, the delayed update's own share
        "delayed_update": [
            {
                "with": "default",
                "without": "base-j",
                "served": _lift(0.003, -0.008, 0.014),
                "candidate": _lift(0.001, -0.007, 0.009),
            }
        ],
        "recipes": {
            "naive": {
                "served": _lift(0.0, 0.0, 0.0),
                "candidate": _lift(0.0, 0.0, 0.0),
                "vs_heuristic": {
                    "served": _lift(0.0006, -0.0059, 0.0073),
                    "candidate": _lift(0.001, -0.005, 0.008),
                },
                "seconds_per_day": 43.0,
                "failed_days": [],
                "promotion_rate": None,
            },
            "default": {
                "served": _lift(*default_served),
                "candidate": _lift(0.0035, -0.0061, 0.0127),
                "vs_heuristic": {
                    "served": _lift(-0.002, -0.011, 0.007),
                    "candidate": _lift(0.004, -0.004, 0.012),
                },
                "seconds_per_day": 96.5,
                "failed_days": [],
                "promotion_rate": None,
            },
            "base-j": {
                "served": _lift(-0.0014, -0.0117, 0.0087),
                "candidate": _lift(0.0026, -0.0047, 0.0103),
                "vs_heuristic": {
                    "served": _lift(-0.001, -0.01, 0.008),
                    "candidate": _lift(0.003, -0.004, 0.011),
                },
                "seconds_per_day": 91.3,
                "failed_days": [],
                "promotion_rate": None,
            },
        },
    }


def push_review(where: Servers, review: Review, tmp: Path) -> Published:
    samples = review_samples(review, time.time())
    delivered = deliver(samples, where.pushgateway, tmp / "metrics")
    assert delivered.delivery == "pushgateway", delivered
    stamp = next(s.value for s in samples if s.name == "ranker_review_timestamp_seconds")
    deadline = time.monotonic() + 90  # generous: the machine is shared
    while time.monotonic() < deadline:
        got = prom_query(where.prometheus, "ranker_review_timestamp_seconds")["result"]
        if got and math.isclose(float(got[0]["value"][1]), stamp):
            break
        time.sleep(0.2)
    else:
        pytest.fail("Prometheus did not scrape the pushed review within 90 s")
    wait_for_another_scrape(where.prometheus)  # every series of the group has the new values
    return Published(samples, where, job=REVIEW_JOB)


@pytest.fixture(scope="module")
def healthy_review(servers: Servers, tmp_path_factory: pytest.TempPathFactory) -> Published:  # noqa: F811
    # the real-log figures: default −0.30% [−1.53%, +0.91%] served vs naive, running default
    review = review_summary("default", (-0.0030, -0.0153, 0.0091))
    return push_review(servers, review, tmp_path_factory.mktemp("healthy"))


@pytest.fixture(scope="module")
def worse_review(servers: Servers, tmp_path_factory: pytest.TempPathFactory) -> Published:  # noqa: F811
    # running default, served CI entirely below 0 (naive's lower bound): significantly worse
    review = review_summary("default", (-0.025, -0.04, -0.01))
    return push_review(servers, review, tmp_path_factory.mktemp("worse"))


def test_the_dashboard_has_a_review_row_and_an_alert_reads_the_review() -> None:
    used = {e for _, e in REVIEW_PANELS}
    for name in (
        "ranker_review_status",
        "ranker_review_relative_change",
        "ranker_review_relative_change_ci_lower",
        "ranker_review_relative_change_ci_upper",
        "ranker_review_train_seconds_per_day",
        "ranker_review_recommended",
        "ranker_review_running",
        "ranker_review_minimum_detectable_effect",
        "ranker_review_heuristic_relative_change",
        "ranker_review_delayed_update_relative_change",
        "ranker_review_decided_on_candidates",
    ):
        assert any(name in e for e in used), f"no review panel shows {name}"
    assert set(REVIEW_ALERTS) == {ALERT}


@pytest.mark.parametrize(("where", "expr"), REVIEW_PANELS, ids=[f"{w}:{e[:40]}" for w, e in REVIEW_PANELS])
def test_every_review_panel_returns_the_reviews_values(
    healthy_review: Published, where: str, expr: str
) -> None:
    assert prom_query(healthy_review.servers.prometheus, expr)["result"], (
        f"panel {where!r}: {expr} returned no data"
    )
    assert series_problems(healthy_review, f"panel {where!r}", expr) == []


def test_the_panels_name_the_recommended_and_running_recipes(healthy_review: Published) -> None:
    base = healthy_review.servers.prometheus
    exprs = dict(REVIEW_PANELS)
    [recommended] = prom_query(base, exprs["Recommended recipe"])["result"]
    [running] = prom_query(base, exprs["Running recipe"])["result"]
    assert (recommended["metric"]["recipe"], running["metric"]["recipe"]) == ("naive", "default")
    [status] = prom_query(base, exprs["Last review"])["result"]
    assert status["metric"]["status"] == "ok"


def test_a_running_recipe_within_the_best_lower_bound_raises_no_alert(healthy_review: Published) -> None:
    base = healthy_review.servers.prometheus
    assert series_problems(healthy_review, ALERT, REVIEW_ALERTS[ALERT]) == []
    assert prom_query(base, REVIEW_ALERTS[ALERT])["result"] == []


def test_a_significantly_worse_running_recipe_fires_the_alert(worse_review: Published) -> None:
    base = worse_review.servers.prometheus
    assert series_problems(worse_review, ALERT, REVIEW_ALERTS[ALERT]) == []
    [worse] = prom_query(base, REVIEW_ALERTS[ALERT])["result"]
    assert {k: worse["metric"][k] for k in ("recipe", "model", "job")} == {
        "recipe": "default",
        "model": "served",
        "job": REVIEW_JOB,
    }
    assert float(worse["value"][1]) == -0.01  # the running recipe's upper bound
    deadline = time.monotonic() + 20
    active: set[str] = set()
    while time.monotonic() < deadline:
        alerts = http_get_json(f"{base}/api/v1/alerts")["data"]["alerts"]
        active = {a["labels"]["alertname"] for a in alerts if a["state"] in ("pending", "firing")}
        if ALERT in active:
            break
        time.sleep(0.5)
    assert ALERT in active
    # the review's group is its own: pushing it never replaced (or was replaced by) the retrain's
    groups = http_get_json(f"{worse_review.servers.pushgateway}/api/v1/metrics")["data"]
    assert {"job": REVIEW_JOB} in [g["labels"] for g in groups]
    assert scraped_series(base, "ranker_review_running", REVIEW_JOB)[(("recipe", "default"),)] == 1.0
