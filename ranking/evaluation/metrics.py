"""Offline quality metrics on one eval day: save HIT@k (primary), AUC, normalized entropy.

Pure functions over flat arrays (one entry per impression). Requests are grouped by
``request_ids``. Pins whose scores tie share the top-k places they straddle: each gets the
expected hit of a random order among the tied pins. Breaking ties by row order instead would be
lucky, not neutral: rows usually arrive in display order, and position bias makes the first
rows the most saved, so a constant model would score far above a random ranking.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import numpy.typing as npt

_EPS = 1e-7


@dataclass(frozen=True)
class OfflineMetrics:
    save_hit_at_3: float  # saved pins ranked in the top 3 of their slate / all saved pins
    auc: float
    ne: float  # normalized entropy: log loss / entropy of the base save rate (lower is better)
    log_loss: float
    calibration: float  # mean prediction / base rate
    base_rate: float
    rows: int
    requests_with_save: int

    def to_dict(self) -> dict[str, float | int]:
        return asdict(self)


def _group_codes(request_ids: npt.ArrayLike) -> np.ndarray:
    _, codes = np.unique(np.asarray(request_ids), return_inverse=True)
    return np.asarray(codes).reshape(-1)


def hits_per_request(
    request_ids: npt.ArrayLike, labels: npt.ArrayLike, scores: npt.ArrayLike, k: int = 3
) -> tuple[np.ndarray, np.ndarray]:
    """Per request: (saved pins ranked in the top k, saved pins). Requests in code order."""
    codes = _group_codes(request_ids)
    y = np.asarray(labels, dtype=np.float64)
    s = np.asarray(scores, dtype=np.float64)
    n = len(codes)
    n_groups = int(codes.max()) + 1 if n else 0
    order = np.lexsort((-s, codes))  # by request, then score descending
    sorted_codes = codes[order]
    sorted_s = s[order]
    req_starts = np.r_[0, np.flatnonzero(np.diff(sorted_codes)) + 1]
    rank = np.arange(n) - np.repeat(req_starts, np.diff(np.r_[req_starts, n]))
    # tie groups: runs of equal score within a request, covering ranks [a, b)
    new_group = (
        np.r_[True, (np.diff(sorted_codes) != 0) | (sorted_s[1:] != sorted_s[:-1])]
        if n
        else np.array([], bool)
    )
    tie_starts = np.flatnonzero(new_group)
    tie_sizes = np.diff(np.r_[tie_starts, n])
    a = np.repeat(rank[tie_starts], tie_sizes).astype(np.float64)
    size = np.repeat(tie_sizes, tie_sizes).astype(np.float64)
    in_top = np.clip(k - a, 0.0, size) / size if n else np.zeros(0)
    hits = np.bincount(sorted_codes, weights=y[order] * in_top, minlength=n_groups)
    saves = np.bincount(codes, weights=y, minlength=n_groups)
    return hits, saves


def save_hit_at_k(
    request_ids: npt.ArrayLike, labels: npt.ArrayLike, scores: npt.ArrayLike, k: int = 3
) -> float:
    """Over requests with >=1 save: fraction of saved pins that the model ranks in its top k."""
    hits, saves = hits_per_request(request_ids, labels, scores, k)
    total = saves.sum()
    return float(hits.sum() / total) if total > 0 else float("nan")


def auc(labels: npt.ArrayLike, scores: npt.ArrayLike) -> float:
    """ROC AUC via the rank-sum formula (ties get average ranks)."""
    y = np.asarray(labels, dtype=np.float64)
    s = np.asarray(scores, dtype=np.float64)
    pos = y.sum()
    neg = len(y) - pos
    if pos == 0 or neg == 0:
        return float("nan")
    order = np.argsort(s, kind="mergesort")
    sorted_s = s[order]
    ranks = np.empty(len(s), dtype=np.float64)
    # average ranks over ties
    starts = np.r_[0, np.flatnonzero(np.diff(sorted_s)) + 1]
    ends = np.r_[starts[1:], len(s)]
    avg = (starts + ends - 1) / 2.0 + 1.0
    ranks[order] = np.repeat(avg, ends - starts)
    return float((ranks[y == 1].sum() - pos * (pos + 1) / 2.0) / (pos * neg))


def log_loss(labels: npt.ArrayLike, probs: npt.ArrayLike) -> float:
    y = np.asarray(labels, dtype=np.float64)
    p = np.clip(np.asarray(probs, dtype=np.float64), _EPS, 1 - _EPS)
    return float(-np.mean(y * np.log(p) + (1 - y) * np.log(1 - p)))


def normalized_entropy(labels: npt.ArrayLike, probs: npt.ArrayLike) -> float:
    """Log loss divided by the entropy of the base save rate (1.0 = no better than the rate)."""
    y = np.asarray(labels, dtype=np.float64)
    base = float(np.clip(y.mean(), _EPS, 1 - _EPS)) if len(y) else float("nan")
    h = -(base * np.log(base) + (1 - base) * np.log(1 - base))
    return float(log_loss(y, probs) / h)


def compute_metrics(
    request_ids: npt.ArrayLike, labels: npt.ArrayLike, probs: npt.ArrayLike, k: int = 3
) -> OfflineMetrics:
    """All offline metrics at once; ``probs`` are predicted save probabilities in (0, 1)."""
    y = np.asarray(labels, dtype=np.float64)
    p = np.asarray(probs, dtype=np.float64)
    hits, saves = hits_per_request(request_ids, y, p, k)
    base = float(y.mean()) if len(y) else float("nan")
    return OfflineMetrics(
        save_hit_at_3=float(hits.sum() / saves.sum()) if saves.sum() > 0 else float("nan"),
        auc=auc(y, p),
        ne=normalized_entropy(y, p),
        log_loss=log_loss(y, p),
        calibration=float(p.mean() / base) if base and base > 0 else float("nan"),
        base_rate=base,
        rows=len(y),
        requests_with_save=int((saves > 0).sum()),
    )
