"""The backtest's statistics: weighted metrics equal the evaluation metrics, and the paired
two-stage bootstrap on inputs whose answer is known."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scoresets import make_eval_day, noisy, with_scores

from ranking.backtest.stats import ModelDay, PairedDay, SliceDay, compare, compare_slices, paired_day
from ranking.evaluation.metrics import compute_metrics


def _day(seed: int, noise: float = 0.5, requests: int = 200) -> pd.DataFrame:
    frame, propensity = make_eval_day(requests=requests, seed=seed)
    scores = np.round(noisy(propensity, noise, seed=seed + 100), 2)  # rounding makes ties
    return with_scores(frame, scores)


def test_unit_weights_give_the_evaluation_metrics() -> None:
    df = _day(1)
    got = ModelDay.of(df["request_id"], df["saved"], df["score"]).metrics()
    want = compute_metrics(df["request_id"], df["saved"], df["score"])
    assert got["save_hit_at_3"] == pytest.approx(want.save_hit_at_3, abs=1e-12)
    assert got["auc"] == pytest.approx(want.auc, abs=1e-12)
    assert got["ne"] == pytest.approx(want.ne, abs=1e-12)


def test_request_weights_equal_duplicated_requests() -> None:
    """Weight 2 on a request = its rows twice; weight 0 = its rows dropped."""
    df = _day(2, requests=50)
    md = ModelDay.of(df["request_id"], df["saved"], df["score"])
    rng = np.random.default_rng(0)
    weights = rng.integers(0, 3, size=md.n_requests).astype(float)
    ids = np.unique(df["request_id"])
    parts = []
    for rid, w in zip(ids, weights, strict=True):
        rows = df[df["request_id"] == rid]
        parts += [rows.assign(request_id=f"{rid}-copy{k}") for k in range(int(w))]
    dup = pd.concat(parts, ignore_index=True)
    want = compute_metrics(dup["request_id"], dup["saved"], dup["score"])
    got = md.metrics(weights)
    assert got["save_hit_at_3"] == pytest.approx(want.save_hit_at_3, abs=1e-12)
    assert got["auc"] == pytest.approx(want.auc, abs=1e-12)
    assert got["ne"] == pytest.approx(want.ne, abs=1e-12)


def test_identical_models_change_by_exactly_zero() -> None:
    days = [paired_day(str(i), _day(i), _day(i)) for i in range(3)]
    c = compare(days, samples=200, level=0.95, seed=0)
    assert c is not None and c.days == 3
    for metric in ("save_hit_at_3", "auc", "ne"):
        assert c.relative_change[metric] == 0.0
        assert c.ci[metric] == [0.0, 0.0]


def test_known_two_request_day() -> None:
    """Base ranks the saved pin of request a in its top 3, not that of b; the other model ranks
    both. Resamples of the requests: (a,a) -> 0%, (a,b) -> +100%, (b,b) -> base 0 (undefined,
    dropped): the CI is exactly [0, +100%] and the point estimate +100%."""
    frame = pd.DataFrame(
        {
            "request_id": ["a"] * 4 + ["b"] * 4,
            "pin_id": [1, 2, 3, 4] * 2,
            "saved": [1, 0, 0, 0, 1, 0, 0, 0],
        }
    )
    base = frame.assign(score=[0.9, 0.1, 0.2, 0.3, 0.1, 0.9, 0.8, 0.7])
    other = frame.assign(score=[0.9, 0.1, 0.2, 0.3, 0.9, 0.1, 0.2, 0.3])
    c = compare([paired_day("d", base, other)], samples=2000, level=0.95, seed=3)
    assert c is not None
    assert c.baseline_mean["save_hit_at_3"] == 0.5 and c.mean["save_hit_at_3"] == 1.0
    assert c.relative_change["save_hit_at_3"] == pytest.approx(1.0)
    assert c.ci["save_hit_at_3"] == pytest.approx([0.0, 1.0])


def test_pairing_by_request_is_what_narrows_the_ci() -> None:
    """The other model equals the baseline except that it also ranks some saved pins higher:
    per request it is never worse. Paired, every resample shows a gain (CI above 0); with the
    pairing broken (the other's requests shuffled against the baseline's), request difficulty no
    longer cancels and the same data gives a CI several times wider."""
    days, broken = [], []
    for i in range(4):
        df = _day(10 + i, noise=1.0, requests=300)
        better = df["score"].to_numpy().copy()
        lucky = (df["saved"].to_numpy() == 1) & (np.random.default_rng(i).random(len(df)) < 0.1)
        better[lucky] = 0.999
        other = df.assign(score=better)
        days.append(paired_day(str(i), df, other))
        b = ModelDay.of(df["request_id"], df["saved"], df["score"])
        o = ModelDay.of(other["request_id"], other["saved"], other["score"])
        perm = np.random.default_rng(99 + i).permutation(o.n_requests)
        inverse = np.argsort(perm)  # new request perm[c] holds old request c
        shuffled = ModelDay(
            perm[o.codes], o.labels, o.hits[inverse], o.saves[inverse], o.order, o.tie_group, o.row_log_loss
        )
        broken.append(PairedDay(str(i), b, shuffled))
    paired = compare(days, samples=500, level=0.95, seed=1)
    unpaired = compare(broken, samples=500, level=0.95, seed=1)
    assert paired is not None and unpaired is not None
    assert paired.relative_change["save_hit_at_3"] > 0
    assert paired.relative_change["save_hit_at_3"] == pytest.approx(unpaired.relative_change["save_hit_at_3"])
    lo, hi = paired.ci["save_hit_at_3"]  # type: ignore[misc]
    ulo, uhi = unpaired.ci["save_hit_at_3"]  # type: ignore[misc]
    assert lo > 0 and ulo < 0  # the gain is resolved only when the pairing is kept
    assert (uhi - ulo) > 2 * (hi - lo)


def test_no_common_day_gives_no_comparison() -> None:
    assert compare([], samples=1000, level=0.95, seed=0) is None


def test_frames_of_different_impressions_are_refused() -> None:
    a = _day(1)
    with pytest.raises(ValueError, match="not scored on the same impressions"):
        paired_day("d", a, a.iloc[:-1])
    flipped = a.assign(saved=1 - a["saved"])
    with pytest.raises(ValueError, match="not scored on the same impressions"):
        paired_day("d", a, flipped)


def _slice_hit(df: pd.DataFrame, scores: np.ndarray, mask: np.ndarray) -> tuple[int, int]:
    """(saved pins of the slice in their slate's top 3, saved pins of the slice), by hand."""
    ranked = df.assign(score=scores, in_slice=mask).sort_values(
        ["request_id", "score"], ascending=[True, False]
    )
    top3 = ranked.groupby("request_id").cumcount() < 3
    saved = (ranked["saved"] == 1) & ranked["in_slice"]
    return int((saved & top3).sum()), int(saved.sum())


def test_slices_pool_each_slice_s_saved_pins_over_the_days() -> None:
    days, by_hand = [], {"even": np.zeros(3), "odd": np.zeros(3)}
    for seed in (3, 4, 5):
        frame, propensity = make_eval_day(requests=120, seed=seed)
        base, other = noisy(propensity, 0.5, seed + 10), noisy(propensity, 1.5, seed + 20)
        request = frame["request_id"].str[-1].astype(int)
        masks = {"even": (request % 2 == 0).to_numpy(), "odd": (request % 2 == 1).to_numpy()}
        for name, mask in masks.items():
            (bh, s), (oh, _) = _slice_hit(frame, base, mask), _slice_hit(frame, other, mask)
            by_hand[name] += (bh, oh, s)
        days.append(SliceDay.of(str(seed), frame["request_id"], frame["saved"], (base, other), masks))
    rows = {r.name: r for r in compare_slices(days, samples=200, level=0.9, seed=0)}
    assert sorted(rows) == ["even", "odd"]
    for name, (bh, oh, s) in by_hand.items():
        assert rows[name].saves == s and rows[name].days == 3
        assert rows[name].baseline == pytest.approx(bh / s) and rows[name].other == pytest.approx(oh / s)
        assert rows[name].relative_change == pytest.approx(oh / bh - 1)


def test_a_slice_ranked_at_random_is_found_and_the_others_are_untouched() -> None:
    days = []
    for seed in (6, 7, 8, 9):
        frame, propensity = make_eval_day(requests=300, seed=seed)
        base = noisy(propensity, 0.3, seed + 10)
        request = frame["request_id"].str[-1].astype(int).to_numpy()
        broken = request % 3 == 0
        other = np.where(broken, np.random.default_rng(seed).random(len(base)), base)
        masks = {"broken": broken, "rest": ~broken}
        days.append(SliceDay.of(str(seed), frame["request_id"], frame["saved"], (base, other), masks))
    rows = {r.name: r for r in compare_slices(days, samples=300, level=0.9, seed=1)}
    assert rows["broken"].ci[1] < 0  # the random slice lost, and the interval says so
    assert rows["rest"].relative_change == 0 and rows["rest"].ci == [0, 0]
