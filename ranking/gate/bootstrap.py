"""Paired bootstrap over requests for the gate: one set of request resamples, and on each the
save HIT@3 change, the AUC drop and the NE rise of a candidate against a reference model.

Resampling whole requests keeps a slate's impressions together (HIT@3 is a per-request metric;
impressions of one request are not independent). A resample is a vector of request
multiplicities; every statistic is the weighted form of the metric in ranking/evaluation/metrics.py
with each impression weighted by its request's multiplicity, so with all weights 1 it is exactly
that metric. The same seed gives the same resamples for every reference (the champion and the
anchor are judged on identical draws).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ranking.evaluation.metrics import hits_per_request

_EPS = 1e-7  # the clipping of ranking.evaluation.metrics.log_loss
_CHUNK_VALUES = 4_000_000  # bound on (resamples in a chunk) x (impressions)


@dataclass(frozen=True)
class PairedIntervals:
    """Percentile intervals (``[lo, hi]`` or None when undefined) of candidate vs reference."""

    hit_change: list[float] | None  # HIT@3(candidate) / HIT@3(reference) - 1
    auc_drop: list[float] | None  # AUC(reference) - AUC(candidate)
    ne_rise: list[float] | None  # NE(candidate) - NE(reference)


@dataclass(frozen=True)
class _Model:
    hits: np.ndarray  # per request: saved pins in the top 3
    order: np.ndarray  # impressions by score ascending
    tie_starts: np.ndarray  # starts of runs of equal score in ``order``
    log_loss: np.ndarray  # per impression


def _model(codes: np.ndarray, y: np.ndarray, scores: np.ndarray) -> _Model:
    hits, _ = hits_per_request(codes, y, scores)
    order = np.argsort(scores, kind="mergesort")
    sorted_s = scores[order]
    tie_starts = np.r_[0, np.flatnonzero(np.diff(sorted_s)) + 1] if len(scores) else np.zeros(0, int)
    p = np.clip(scores, _EPS, 1 - _EPS)
    return _Model(hits, order, tie_starts, -(y * np.log(p) + (1 - y) * np.log(1 - p)))


def _weighted_auc(m: _Model, w: np.ndarray, y: np.ndarray) -> np.ndarray:
    """AUC per row of ``w`` (resamples x impressions): ties count half, as with average ranks."""
    pos = (w * y)[:, m.order]
    neg = (w * (1 - y))[:, m.order]
    pos_g = np.add.reduceat(pos, m.tie_starts, axis=1)
    neg_g = np.add.reduceat(neg, m.tie_starts, axis=1)
    neg_below = np.cumsum(neg_g, axis=1) - neg_g
    num = (pos_g * (neg_below + 0.5 * neg_g)).sum(axis=1)
    den = pos_g.sum(axis=1) * neg_g.sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(den > 0, num / den, np.nan)


def _weighted_ne(m: _Model, w: np.ndarray, y: np.ndarray) -> np.ndarray:
    total = w.sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        base = np.clip((w @ y) / total, _EPS, 1 - _EPS)
        entropy = -(base * np.log(base) + (1 - base) * np.log(1 - base))
        return (w @ m.log_loss) / total / entropy


def _interval(values: np.ndarray, level: float) -> list[float] | None:
    values = values[np.isfinite(values)]
    if len(values) == 0:
        return None
    alpha = (1.0 - level) / 2.0
    return [float(np.quantile(values, alpha)), float(np.quantile(values, 1.0 - alpha))]


def paired_bootstrap(
    request_codes: np.ndarray,
    labels: np.ndarray,
    candidate: np.ndarray,
    references: list[np.ndarray],
    *,
    samples: int,
    level: float,
    seed: int,
) -> list[PairedIntervals]:
    """Intervals of ``candidate`` against each of ``references`` (scores aligned row for row),
    all from the same ``samples`` resamples of the requests (``request_codes``: ints 0..R-1)."""
    codes = np.asarray(request_codes, dtype=np.int64)
    y = np.asarray(labels, dtype=np.float64)
    n_req = int(codes.max()) + 1 if len(codes) else 0
    cand = _model(codes, y, np.asarray(candidate, dtype=np.float64))
    refs = [_model(codes, y, np.asarray(r, dtype=np.float64)) for r in references]
    stats = {k: np.empty((len(refs), samples)) for k in ("hit", "auc", "ne")}
    rng = np.random.default_rng(seed)
    chunk = max(1, min(samples, _CHUNK_VALUES // max(1, len(codes))))
    for lo in range(0, samples, chunk):
        hi = min(samples, lo + chunk)
        rows = hi - lo
        draws = rng.integers(0, n_req, size=(rows, n_req))
        counts = np.bincount(
            (draws + n_req * np.arange(rows)[:, None]).ravel(), minlength=rows * n_req
        ).reshape(rows, n_req)
        counts = counts.astype(np.float64)
        w = counts[:, codes]  # each impression weighted by its request's multiplicity
        cand_hits = counts @ cand.hits
        cand_auc = _weighted_auc(cand, w, y)
        cand_ne = _weighted_ne(cand, w, y)
        for i, ref in enumerate(refs):
            ref_hits = counts @ ref.hits
            with np.errstate(divide="ignore", invalid="ignore"):
                stats["hit"][i, lo:hi] = np.where(ref_hits > 0, cand_hits / ref_hits - 1.0, np.nan)
            stats["auc"][i, lo:hi] = _weighted_auc(ref, w, y) - cand_auc
            stats["ne"][i, lo:hi] = cand_ne - _weighted_ne(ref, w, y)
    return [
        PairedIntervals(
            hit_change=_interval(stats["hit"][i], level),
            auc_drop=_interval(stats["auc"][i], level),
            ne_rise=_interval(stats["ne"][i], level),
        )
        for i in range(len(refs))
    ]


def hit_change_vs_mean(
    request_codes: np.ndarray,
    labels: np.ndarray,
    candidate: np.ndarray,
    references: list[np.ndarray],
    *,
    samples: int,
    level: float,
    seed: int,
) -> list[float] | None:
    """Interval of HIT@3(candidate) / mean_i HIT@3(reference_i) - 1 on the same resamples as
    :func:`paired_bootstrap` with the same ``seed`` (the mean is a fixed statistic of the references:
    unlike their maximum it is not biased upwards by the day's noise)."""
    codes = np.asarray(request_codes, dtype=np.int64)
    y = np.asarray(labels, dtype=np.float64)
    n_req = int(codes.max()) + 1 if len(codes) else 0
    cand_hits, _ = hits_per_request(codes, y, np.asarray(candidate, dtype=np.float64))
    ref_hits = np.stack([hits_per_request(codes, y, np.asarray(r, dtype=np.float64))[0] for r in references])
    rng = np.random.default_rng(seed)
    chunk = max(1, min(samples, _CHUNK_VALUES // max(1, len(codes))))
    changes = np.empty(samples)
    for lo in range(0, samples, chunk):
        hi = min(samples, lo + chunk)
        rows = hi - lo
        draws = rng.integers(0, n_req, size=(rows, n_req))
        counts = np.bincount(
            (draws + n_req * np.arange(rows)[:, None]).ravel(), minlength=rows * n_req
        ).reshape(rows, n_req)
        counts = counts.astype(np.float64)
        mean_ref = (counts @ ref_hits.T).mean(axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            changes[lo:hi] = np.where(mean_ref > 0, (counts @ cand_hits) / mean_ref - 1.0, np.nan)
    return _interval(changes, level)


@dataclass(frozen=True)
class SliceChange:
    """A slice's save HIT@3 for the candidate and the reference and the candidate's change, with
    its interval at the report's level and at the (corrected) level it is judged at."""

    requests_with_save: int
    candidate: float
    reference: float
    relative_change: float | None
    ci: list[float] | None
    judged_ci: list[float] | None
    loss_p: float
    """the share of resamples in which the slice did NOT lose more than the tolerance: a
    bootstrap p-value of "it lost more" (a resample without the slice's saves counts as no loss)"""


def slice_changes(
    request_codes: np.ndarray,
    labels: np.ndarray,
    candidate: np.ndarray,
    reference: np.ndarray,
    masks: list[np.ndarray],
    *,
    samples: int,
    level: float,
    judged_level: float,
    tolerance: float,
    seed: int,
) -> list[SliceChange]:
    """Each slice's (``masks``: the impressions in it) save HIT@3 change of ``candidate`` against
    ``reference``: a slice's saved pins ranked in the top 3 of their whole slate. Every slice on
    the same request resamples as :func:`paired_bootstrap` with the same ``seed``."""
    codes = np.asarray(request_codes, dtype=np.int64)
    y = np.asarray(labels, dtype=np.float64)
    cand = np.asarray(candidate, dtype=np.float64)
    ref = np.asarray(reference, dtype=np.float64)
    n_req = int(codes.max()) + 1 if len(codes) else 0
    cand_m, ref_m, saves_m = (
        np.zeros((len(masks), n_req)),
        np.zeros((len(masks), n_req)),
        np.zeros((len(masks), n_req)),
    )
    for i, mask in enumerate(masks):
        in_slice = y * np.asarray(mask, dtype=np.float64)
        cand_m[i], saves_m[i] = hits_per_request(codes, in_slice, cand)
        ref_m[i], _ = hits_per_request(codes, in_slice, ref)
    changes = np.empty((len(masks), samples))
    not_lost = np.zeros(len(masks))
    rng = np.random.default_rng(seed)
    chunk = max(1, min(samples, _CHUNK_VALUES // max(1, len(codes))))
    for lo in range(0, samples, chunk):
        hi = min(samples, lo + chunk)
        rows = hi - lo
        draws = rng.integers(0, n_req, size=(rows, n_req))
        counts = np.bincount(
            (draws + n_req * np.arange(rows)[:, None]).ravel(), minlength=rows * n_req
        ).reshape(rows, n_req)
        counts = counts.astype(np.float64)
        c, r = counts @ cand_m.T, counts @ ref_m.T  # resamples x slices
        # HIT(cand) >= (1 - tolerance) HIT(ref) on the resample (both share the slice's saves)
        not_lost += (c >= (1.0 - tolerance) * r).sum(axis=0)
        with np.errstate(divide="ignore", invalid="ignore"):
            changes[:, lo:hi] = np.where(r > 0, c / r - 1.0, np.nan).T
    out = []
    for i in range(len(masks)):
        total = float(saves_m[i].sum())
        c_hit = float(cand_m[i].sum() / total) if total else math.nan
        r_hit = float(ref_m[i].sum() / total) if total else math.nan
        out.append(
            SliceChange(
                requests_with_save=int((saves_m[i] > 0).sum()),
                candidate=c_hit,
                reference=r_hit,
                relative_change=c_hit / r_hit - 1.0 if total and r_hit > 0 else None,
                ci=_interval(changes[i], level),
                judged_ci=_interval(changes[i], judged_level),
                loss_p=float(not_lost[i] / samples) if samples else 1.0,
            )
        )
    return out
