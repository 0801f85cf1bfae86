"""The non-learned ranker every model is scored beside (issue 31)."""

from __future__ import annotations

import pandas as pd
import pytest

from ranking.core.errors import RankerError
from ranking.evaluation.heuristic import HeuristicConfig, heuristic_scores


def test_the_pin_save_rate_is_smoothed_towards_the_days_prior() -> None:
    examples = pd.DataFrame(
        {
            "request_id": ["r1", "r1", "r1"],
            "pin_id": [1, 2, 3],
            "saved": [0, 1, 0],
            "pin_stats__saves_28d": [10.0, 0.0, None],  # a pin without a snapshot counts 0
            "pin_stats__impressions_28d": [100.0, 0.0, None],
        }
    )
    scores = heuristic_scores(examples, HeuristicConfig(smoothing=10.0))
    prior = 10 / 100
    assert list(scores.columns) == ["request_id", "pin_id", "saved", "score"]
    assert scores["score"].tolist() == pytest.approx([(10 + 10 * prior) / 110, prior, prior])


@pytest.mark.parametrize(
    ("knobs", "says"),
    [
        ({"name": "popularity"}, "name must be one of pin_save_rate"),
        ({"smoothing": 0.0}, "smoothing must be a finite number > 0"),
        ({"policy": "ignore"}, "policy must be warn or fail"),
    ],
)
def test_a_bad_heuristic_config_is_one_error(knobs: dict[str, object], says: str) -> None:
    with pytest.raises(RankerError, match=says):
        HeuristicConfig(**knobs)  # type: ignore[arg-type]


def test_the_heuristic_needs_its_columns() -> None:
    with pytest.raises(RankerError, match="needs the eval day's columns"):
        heuristic_scores(pd.DataFrame({"request_id": ["r"], "pin_id": [1], "saved": [1]}), HeuristicConfig())
