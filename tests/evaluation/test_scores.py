"""Score frames: the columns every reader needs, their metrics, and the atomic parquet write."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scoresets import make_eval_day, noisy, with_scores

from ranking.evaluation.metrics import compute_metrics
from ranking.evaluation.scores import SCORE_COLUMNS, metrics_of, write_scores


def test_metrics_of_a_frame_are_the_metrics_of_its_columns() -> None:
    frame, p = make_eval_day(requests=200, slate=8, seed=3)
    scores = with_scores(frame, noisy(p, 0.5, 1))
    direct = compute_metrics(scores["request_id"], scores["saved"], scores["score"])
    assert metrics_of(scores) == direct
    # rows in another order: the same requests, the same metrics
    shuffled = scores.sample(frac=1.0, random_state=0)
    assert metrics_of(shuffled).save_hit_at_3 == pytest.approx(direct.save_hit_at_3)


def test_write_scores_round_trips_and_leaves_no_temp_file(tmp_path: Path) -> None:
    frame, p = make_eval_day(requests=20, slate=5, seed=1)
    scores = with_scores(frame, p)[list(SCORE_COLUMNS)]
    path = tmp_path / "run" / "eval_scores.parquet"
    path.parent.mkdir()
    write_scores(path, scores)
    back = pd.read_parquet(path)
    assert tuple(back.columns) == SCORE_COLUMNS
    pd.testing.assert_frame_equal(back, scores)
    assert [x.name for x in path.parent.iterdir()] == ["eval_scores.parquet"]
    write_scores(path, scores.assign(score=np.zeros(len(scores))))  # replaced whole
    assert (pd.read_parquet(path)["score"] == 0).all()
