"""Constructed eval days and models of chosen quality, for gate and registry tests."""

from __future__ import annotations

import numpy as np
import pandas as pd


def make_eval_day(requests: int = 300, slate: int = 10, seed: int = 0) -> tuple[pd.DataFrame, np.ndarray]:
    """Impressions of one eval day with a hidden save propensity per impression.

    Returns (frame of request_id, pin_id, saved; the propensity), so tests can build models of
    chosen quality: the propensity itself is the best model, noise makes worse ones.
    """
    rng = np.random.default_rng(seed)
    n = requests * slate
    propensity = rng.beta(0.5, 8.0, size=n)  # mean ≈ 6%, skewed like save rates
    saved = (rng.random(n) < propensity).astype(np.int8)
    frame = pd.DataFrame(
        {
            "request_id": np.repeat([f"req-{i:05d}" for i in range(requests)], slate),
            "pin_id": np.tile(np.arange(slate, dtype=np.int64), requests) + 1000,
            "saved": saved,
        }
    )
    return frame, propensity


def with_scores(frame: pd.DataFrame, scores: np.ndarray) -> pd.DataFrame:
    return frame.assign(score=np.asarray(scores, dtype=np.float64))


def noisy(propensity: np.ndarray, noise: float, seed: int) -> np.ndarray:
    """A model whose logit is the true one plus Gaussian noise (more noise = worse ranking)."""
    rng = np.random.default_rng(seed)
    logit = np.log(propensity / (1 - propensity)) + rng.normal(0.0, noise, size=len(propensity))
    return 1.0 / (1.0 + np.exp(-logit))
