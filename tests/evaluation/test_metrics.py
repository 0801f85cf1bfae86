"""Offline metrics on constructed cases: HIT@3 per request, the tie rule, AUC, NE."""

from __future__ import annotations

import numpy as np
import pytest

from ranking.evaluation.metrics import auc, compute_metrics, normalized_entropy, save_hit_at_k


def test_offline_metrics_on_a_constructed_case() -> None:
    req = np.array(["a"] * 5 + ["b"] * 4 + ["c"] * 3)
    saved = np.array([1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1, 1])
    score = np.array([0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1, 0.3, 0.2, 0.1])
    # a: saves at ranks 1 and 5 -> 1 of 2; b: no saves (ignored); c: ranks 2 and 3 -> 2 of 2
    assert save_hit_at_k(req, saved, score, k=3) == pytest.approx(3 / 4)
    m = compute_metrics(req, saved, score)
    assert m.requests_with_save == 2 and m.rows == 12
    constant = compute_metrics(req, saved, np.full(12, 0.3))
    assert constant.auc == pytest.approx(0.5)


def test_tied_scores_share_the_top_places_they_straddle() -> None:
    # one slate of 6, saves at the first rows (display order): a constant model is a random
    # ranking, 3 of 6 places are in the top 3, whatever the row order
    req = np.array(["r"] * 6)
    saved = np.array([1, 1, 0, 0, 0, 0])
    assert save_hit_at_k(req, saved, np.full(6, 0.2)) == pytest.approx(0.5)
    # a tie across the cut: the first save is ranked 2nd (a hit); the last top-3 place is shared
    # by four tied pins, one of them the second save (a quarter of a hit)
    scores = np.array([0.5, 0.4, 0.9, 0.4, 0.4, 0.4])
    assert save_hit_at_k(req, saved, scores) == pytest.approx((1 + 1 / 4) / 2)


def test_auc_and_normalized_entropy_at_their_reference_points() -> None:
    labels = np.array([0, 0, 1, 0, 1, 0, 0, 0])
    assert auc(labels, labels * 0.5 + 0.25) == pytest.approx(1.0)
    assert auc(labels, 0.75 - labels * 0.5) == pytest.approx(0.0)
    assert np.isnan(auc(np.zeros(4), np.arange(4.0)))
    # predicting the base rate is no better than the rate: NE 1; a better model is below 1
    assert normalized_entropy(labels, np.full(8, labels.mean())) == pytest.approx(1.0)
    assert normalized_entropy(labels, np.where(labels == 1, 0.7, 0.1)) < 1.0
