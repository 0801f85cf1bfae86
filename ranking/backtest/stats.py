"""Backtest statistics: a recipe's served metrics relative to the baseline recipe's, with a
paired, two-stage bootstrap over (day, request).

Each day's statistic is the day's metric (save HIT@3, AUC, NE) of the served model; a recipe's
value is the mean over the days both recipes served a model. A resample draws the days with
replacement, then within each drawn day its requests with replacement, and applies the *same*
draw to both recipes (they were scored on the same eval requests): what the two served models
have in common — which requests were easy that day — cancels, and what remains is the
difference between the recipes, with the day-to-day spread included.

Resampled metrics are computed with per-request weights (the number of times a request was
drawn) instead of materialising the resampled rows; with unit weights they equal
``ranking.evaluation.metrics`` exactly (a test pins that).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from pydantic import JsonValue

from ranking.evaluation.metrics import hits_per_request

METRICS = ("save_hit_at_3", "auc", "ne")
HIGHER_IS_BETTER = {"save_hit_at_3": True, "auc": True, "ne": False}
_EPS = 1e-7


@dataclass(frozen=True)
class ModelDay:
    """One model's scores on one eval day, prepared for weighted (resampled) metrics."""

    codes: np.ndarray  # request code per row, 0..n_requests-1
    labels: np.ndarray
    hits: np.ndarray  # per request: saved pins in the top 3
    saves: np.ndarray  # per request: saved pins
    order: np.ndarray  # rows by ascending score
    tie_group: np.ndarray  # per sorted row: index of its run of equal scores
    row_log_loss: np.ndarray

    @property
    def n_requests(self) -> int:
        return len(self.saves)

    @classmethod
    def of(cls, request_ids: Any, labels: Any, scores: Any) -> ModelDay:
        rid = np.asarray(request_ids)
        y = np.asarray(labels, dtype=np.float64)
        s = np.asarray(scores, dtype=np.float64)
        _, codes = np.unique(rid, return_inverse=True)
        codes = np.asarray(codes).reshape(-1)
        hits, saves = hits_per_request(rid, y, s)
        order = np.argsort(s, kind="mergesort")
        sorted_s = s[order]
        tie_group = np.r_[0, np.cumsum(sorted_s[1:] != sorted_s[:-1])] if len(s) else np.zeros(0, int)
        p = np.clip(s, _EPS, 1 - _EPS)
        row_ll = -(y * np.log(p) + (1 - y) * np.log(1 - p))
        return cls(codes, y, hits, saves, order, tie_group.astype(np.int64), row_ll)

    def metrics(self, request_weights: np.ndarray | None = None) -> dict[str, float]:
        """save HIT@3, AUC and NE with each request counted ``request_weights[r]`` times."""
        w_req = np.ones(self.n_requests) if request_weights is None else request_weights
        saves = float((w_req * self.saves).sum())
        hit = float((w_req * self.hits).sum() / saves) if saves > 0 else math.nan
        w = w_req[self.codes]
        total = float(w.sum())
        # AUC: tied scores count half (the rank-sum formula with average ranks)
        ws, ys = w[self.order], self.labels[self.order]
        groups = int(self.tie_group[-1]) + 1 if len(ws) else 0
        pos = np.bincount(self.tie_group, weights=ws * ys, minlength=groups)
        neg = np.bincount(self.tie_group, weights=ws * (1 - ys), minlength=groups)
        n_pos, n_neg = float(pos.sum()), float(neg.sum())
        below = np.cumsum(neg) - neg
        auc = (
            float((pos * (below + 0.5 * neg)).sum() / (n_pos * n_neg))
            if n_pos > 0 and n_neg > 0
            else math.nan
        )
        if total > 0:
            base = min(max(float((w * self.labels).sum()) / total, _EPS), 1 - _EPS)
            entropy = -(base * math.log(base) + (1 - base) * math.log(1 - base))
            ne = float((w * self.row_log_loss).sum() / total) / entropy
        else:
            ne = math.nan
        return {"save_hit_at_3": hit, "auc": auc, "ne": ne}


@dataclass(frozen=True)
class PairedDay:
    """The baseline's and a recipe's served models on the same eval day's requests."""

    day: str
    baseline: ModelDay
    other: ModelDay

    def __post_init__(self) -> None:
        if self.baseline.n_requests != self.other.n_requests or len(self.baseline.codes) != len(
            self.other.codes
        ):
            raise ValueError(f"{self.day}: the two models were not scored on the same requests")


@dataclass(frozen=True)
class DayChange:
    """One paired day of a comparison: each model's metrics and the relative change of each."""

    day: str
    baseline: dict[str, float]
    other: dict[str, float]
    relative_change: dict[str, float]


@dataclass(frozen=True)
class Comparison:
    days: int
    baseline_mean: dict[str, float]
    mean: dict[str, float]
    relative_change: dict[str, float]  # mean / baseline_mean - 1
    ci: dict[str, list[float] | None]
    samples: int
    level: float
    per_day: list[DayChange] = field(default_factory=list)

    def to_dict(self) -> dict[str, JsonValue]:  # the JSON edge (infra/backtest_pool.py prints it)
        return asdict(self)


@dataclass(frozen=True)
class SliceComparison:
    """One slice's save HIT@3, the recipe's against the baseline's, pooled over the days it was
    cut (``compare_slices``); None where the slice held no saved pin."""

    name: str
    days: int
    saves: int
    baseline: float | None
    other: float | None
    relative_change: float | None
    ci: list[float] | None


def _rel(a: float, b: float) -> float:
    return a / b - 1.0 if math.isfinite(a) and math.isfinite(b) and b != 0 else math.nan


def compare(days: list[PairedDay], *, samples: int, level: float, seed: int) -> Comparison | None:
    """Mean served metrics of ``other`` vs ``baseline`` over ``days`` and the bootstrap CI of the
    relative change of each; None without a common day."""
    if not days:
        return None
    base_days = [d.baseline.metrics() for d in days]
    other_days = [d.other.metrics() for d in days]
    base_mean = {m: float(np.mean([x[m] for x in base_days])) for m in METRICS}
    mean = {m: float(np.mean([x[m] for x in other_days])) for m in METRICS}
    rel = {m: _rel(mean[m], base_mean[m]) for m in METRICS}
    rng = np.random.default_rng(seed)
    changes = {m: np.empty(samples) for m in METRICS}
    n_days = len(days)
    for i in range(samples):
        picked = rng.integers(0, n_days, size=n_days)
        b_sum = dict.fromkeys(METRICS, 0.0)
        o_sum = dict.fromkeys(METRICS, 0.0)
        for j in picked:
            d = days[int(j)]
            n = d.baseline.n_requests
            w = np.bincount(rng.integers(0, n, size=n), minlength=n).astype(np.float64)
            bm, om = d.baseline.metrics(w), d.other.metrics(w)
            for m in METRICS:
                b_sum[m] += bm[m]
                o_sum[m] += om[m]
        for m in METRICS:
            changes[m][i] = _rel(o_sum[m], b_sum[m])  # means share the day count: it cancels
    alpha = (1.0 - level) / 2.0
    ci: dict[str, list[float] | None] = {}
    for m in METRICS:
        finite = changes[m][np.isfinite(changes[m])]
        ci[m] = (
            [float(np.quantile(finite, alpha)), float(np.quantile(finite, 1 - alpha))]
            if len(finite)
            else None
        )
    per_day = [
        DayChange(d.day, b, o, {m: _rel(o[m], b[m]) for m in METRICS})
        for d, b, o in zip(days, base_days, other_days, strict=True)
    ]
    return Comparison(n_days, base_mean, mean, rel, ci, samples, level, per_day)


def paired_day(day: str, baseline: Any, other: Any) -> PairedDay:
    """Pair two score frames (``request_id, pin_id, saved, score``) of the same eval day; refuses
    frames that do not hold the same impressions with the same labels."""
    keys = ["request_id", "pin_id"]
    b = baseline.sort_values(keys, kind="mergesort", ignore_index=True)
    o = other.sort_values(keys, kind="mergesort", ignore_index=True)
    same = len(b) == len(o) and all(
        np.array_equal(b[c].to_numpy(), o[c].to_numpy()) for c in ("request_id", "pin_id", "saved")
    )
    if not same:
        raise ValueError(f"{day}: the served models were not scored on the same impressions")
    return PairedDay(
        day,
        ModelDay.of(b["request_id"], b["saved"], b["score"]),
        ModelDay.of(o["request_id"], o["saved"], o["score"]),
    )


@dataclass(frozen=True)
class SliceDay:
    """The baseline's and a recipe's models on one eval day, cut into slices: per slice and
    request, the slice's saved pins and those each model ranked in the top 3."""

    day: str
    names: tuple[str, ...]
    baseline_hits: np.ndarray  # slices x requests
    other_hits: np.ndarray
    saves: np.ndarray

    @classmethod
    def of(
        cls, day: str, request_ids: Any, labels: Any, scores: tuple[Any, Any], masks: dict[str, np.ndarray]
    ) -> SliceDay:
        """``scores``: (baseline, other); ``masks``: each slice's rows; all row for row."""
        rid = np.asarray(request_ids)
        y = np.asarray(labels, dtype=np.float64)
        base, other, saves = [], [], []
        for mask in masks.values():
            in_slice = y * np.asarray(mask, dtype=np.float64)
            base.append(hits_per_request(rid, in_slice, scores[0])[0])
            hits, saved = hits_per_request(rid, in_slice, scores[1])
            other.append(hits)
            saves.append(saved)
        n = len(np.unique(rid))
        return cls(
            day,
            tuple(masks),
            np.array(base).reshape(len(masks), n),
            np.array(other).reshape(len(masks), n),
            np.array(saves).reshape(len(masks), n),
        )


def compare_slices(days: list[SliceDay], *, samples: int, level: float, seed: int) -> list[SliceComparison]:
    """Each slice's save HIT@3 of the recipe vs the baseline pooled over the days it was cut
    (its saved pins over all those days: a slice of a few requests a day is not a noisy mean of
    daily ratios), with the same two-stage (day, request) bootstrap as :func:`compare`."""
    names = sorted({n for d in days for n in d.names})
    if not days or not names:
        return []
    index = {n: i for i, n in enumerate(names)}

    def totals(d: SliceDay, w: np.ndarray | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        out = np.zeros((3, len(names)))
        rows = [index[n] for n in d.names]
        for k, m in enumerate((d.baseline_hits, d.other_hits, d.saves)):
            out[k, rows] = m.sum(axis=1) if w is None else m @ w
        return out[0], out[1], out[2]

    point = np.sum([np.stack(totals(d, None)) for d in days], axis=0)
    rng = np.random.default_rng(seed)
    changes = np.empty((samples, len(names)))
    for i in range(samples):
        acc = np.zeros((3, len(names)))
        for j in rng.integers(0, len(days), size=len(days)):
            d = days[int(j)]
            n = d.saves.shape[1]
            w = np.bincount(rng.integers(0, n, size=n), minlength=n).astype(np.float64)
            acc += np.stack(totals(d, w))
        with np.errstate(divide="ignore", invalid="ignore"):
            changes[i] = np.where(acc[0] > 0, acc[1] / acc[0] - 1.0, np.nan)
    alpha = (1.0 - level) / 2.0
    out = []
    for k, name in enumerate(names):
        base_hits, other_hits, saves = point[:, k]
        finite = changes[:, k][np.isfinite(changes[:, k])]
        out.append(
            SliceComparison(
                name=name,
                days=sum(1 for d in days if name in d.names),
                saves=int(saves),
                baseline=float(base_hits / saves) if saves else None,
                other=float(other_hits / saves) if saves else None,
                relative_change=_rel(float(other_hits), float(base_hits)) if saves else None,
                ci=[float(np.quantile(finite, alpha)), float(np.quantile(finite, 1 - alpha))]
                if len(finite)
                else None,
            )
        )
    return out
