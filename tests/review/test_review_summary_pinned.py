"""A review's summary pinned (issue 22: run_review split without a change): for a review that
switches, one with too few days, one whose baseline failed, one whose replay raised and one that
switches back, the summary's fields in the same order, the same verdict and switch, and
``latest.json`` holding the summary as returned."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

from test_review_run import END, SECONDS, Replayer, _review

from ranking.review.run import ReviewFailed

# the fields each review's summary holds, in order
KEYS = [
    [
        "review_id",
        "start",
        "end",
        "days",
        "min_days",
        "baseline",
        "candidate_only",
        "cost_weight",
        "min_promotion_rate",
        "mode",
        "rule",
        "backtest_dir",
        "running",
        "recipes",
        "delayed_update",
        "recommended",
        "basis",
        "reason",
        "error",
        "days_compared",
        "status",
        "best",
        "switch",
        "wall_seconds",
        "base_pretrains",
        "report",
    ],
    [
        "review_id",
        "start",
        "end",
        "days",
        "min_days",
        "baseline",
        "candidate_only",
        "cost_weight",
        "min_promotion_rate",
        "mode",
        "rule",
        "backtest_dir",
        "running",
        "recipes",
        "delayed_update",
        "recommended",
        "basis",
        "reason",
        "error",
        "days_compared",
        "status",
        "switch",
        "wall_seconds",
        "base_pretrains",
        "report",
    ],
    [
        "review_id",
        "start",
        "end",
        "days",
        "min_days",
        "baseline",
        "candidate_only",
        "cost_weight",
        "min_promotion_rate",
        "mode",
        "rule",
        "backtest_dir",
        "running",
        "recipes",
        "delayed_update",
        "recommended",
        "basis",
        "reason",
        "error",
        "days_compared",
        "status",
        "switch",
        "wall_seconds",
        "base_pretrains",
        "report",
    ],
    [
        "review_id",
        "start",
        "end",
        "days",
        "min_days",
        "baseline",
        "candidate_only",
        "cost_weight",
        "min_promotion_rate",
        "mode",
        "rule",
        "backtest_dir",
        "running",
        "recipes",
        "delayed_update",
        "recommended",
        "basis",
        "reason",
        "error",
        "status",
        "switch",
        "wall_seconds",
        "base_pretrains",
        "report",
    ],
    [
        "review_id",
        "start",
        "end",
        "days",
        "min_days",
        "baseline",
        "candidate_only",
        "cost_weight",
        "min_promotion_rate",
        "mode",
        "rule",
        "backtest_dir",
        "running",
        "recipes",
        "delayed_update",
        "recommended",
        "basis",
        "reason",
        "error",
        "days_compared",
        "status",
        "best",
        "switch",
        "wall_seconds",
        "base_pretrains",
        "report",
    ],
]

# what each review decided (a field the summary lacks: "<absent>")
DECIDED = [
    {
        "status": "ok",
        "error": None,
        "recommended": "default",
        "best": "default",
        "reason": "default is best (+22.87% [+13.80%, +34.05%]) and no cheaper recipe's CI reaches its lower bound",
        "running": "default",
        "days_compared": 5,
        "switch": {
            "switched": True,
            "recipe": "default",
            "reason": "review 2026-03-08 recommends default (was the configured [recipe])",
        },
        "base_pretrains": 0,
    },
    {
        "status": "too_few_days",
        "error": "2 paired days < min_days 3",
        "recommended": None,
        "best": "<absent>",
        "reason": None,
        "running": None,
        "days_compared": 2,
        "switch": {
            "switched": False,
            "recipe": "default",
            "reason": "review 2026-03-15 is too_few_days: the current recipe stays",
        },
        "base_pretrains": 0,
    },
    {
        "status": "failed",
        "error": "the baseline naive has no evidence (failed days: ['2026-03-17', '2026-03-18', '2026-03-19', '2026-03-20', '2026-03-21', '2026-03-22'])",
        "recommended": None,
        "best": "<absent>",
        "reason": None,
        "running": None,
        "days_compared": 0,
        "switch": {
            "switched": False,
            "recipe": "default",
            "reason": "review 2026-03-22 is failed: the current recipe stays",
        },
        "base_pretrains": 0,
    },
    {
        "status": "failed",
        "error": "default: the replay broke",
        "recommended": None,
        "best": "<absent>",
        "reason": None,
        "running": None,
        "days_compared": "<absent>",
        "switch": {
            "switched": False,
            "recipe": "default",
            "reason": "review 2026-03-29 is failed: the current recipe stays",
        },
        "base_pretrains": 0,
    },
    {
        "status": "ok",
        "error": None,
        "recommended": "naive",
        "best": "naive",
        "reason": "no significant gain: the best recipe, naive, has +0.00% [+0.00%, +0.00%]; keep the baseline, naive",
        "running": "naive",
        "days_compared": 5,
        "switch": {
            "switched": True,
            "recipe": "naive",
            "reason": "review 2026-04-05 recommends naive (was default)",
        },
        "base_pretrains": 0,
    },
]

FIELDS = (
    "status",
    "error",
    "recommended",
    "best",
    "reason",
    "running",
    "days_compared",
    "switch",
    "base_pretrains",
)


def _reviews(home: Path) -> list[dict[str, Any]]:
    out = [
        _review(home, Replayer({"naive": 1.5, "default": 0.2}, SECONDS)),
        _review(
            home,
            Replayer({"naive": 0.8, "default": 0.8}, SECONDS),
            days=3,
            min_days=3,
            end=END + dt.timedelta(days=7),
        ),
        _review(
            home,
            Replayer({"naive": 0.8, "default": 0.8}, SECONDS, fail="naive"),
            end=END + dt.timedelta(days=14),
        ),
    ]
    try:
        _review(
            home,
            Replayer({"naive": 1.5, "default": 0.2}, SECONDS, raise_on="default"),
            end=END + dt.timedelta(days=21),
        )
    except ReviewFailed as exc:
        out.append(exc.review.body())
    out.append(
        _review(home, Replayer({"naive": 0.8, "default": 0.8}, SECONDS), end=END + dt.timedelta(days=28))
    )
    return out


def test_each_reviews_summary_is_as_pinned(tmp_path: Path) -> None:
    home = tmp_path / "home"
    reviews = _reviews(home)
    assert [list(r) for r in reviews] == KEYS
    assert [{f: r.get(f, "<absent>") for f in FIELDS} for r in reviews] == DECIDED
    latest = json.loads((home / "reviews" / "latest.json").read_text())
    assert latest == reviews[-1]
    assert reviews[0]["backtest_dir"] == str(home / "backtests" / f"review-{END.isoformat()}")
