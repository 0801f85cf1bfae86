"""Synthetic generator and daily snapshots: determinism, shape of the log, point-in-time counts."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from features import sources
from features.derive import SnapshotBuilder, day_start
from features.schema import IMPRESSION_SCHEMA
from features.synth import SynthConfig, generate
from ranking.core.errors import RankerError
from ranking.core.workspace import Workspace

SMALL = {"users": 400, "pins": 500, "requests_per_day": 80, "slate_size": 10}


def _synth(home: Path, seed: int, days: int = 3, **knobs: object) -> Workspace:
    ws = Workspace.resolve(home)
    generate(ws, SynthConfig(start=dt.date(2026, 3, 1), days=days, seed=seed, **{**SMALL, **knobs}))  # type: ignore[arg-type]
    return ws


def _all(ws: Workspace, table: str) -> pd.DataFrame:
    return pd.concat(
        [sources.read_day(ws, table, d).to_pandas() for d in sources.list_days(ws, table)], ignore_index=True
    )


def test_same_seed_same_bytes_other_seed_other_data(tmp_path: Path) -> None:
    a, b, c = (_synth(tmp_path / n, seed) for n, seed in (("a", 1), ("b", 1), ("c", 2)))
    for table in sources.TABLES:
        for day in sources.list_days(a, table):
            assert sources.day_version(a, [table], day) == sources.day_version(b, [table], day)
    assert not _all(a, sources.IMPRESSIONS).equals(_all(c, sources.IMPRESSIONS))


def test_log_shape_slates_positions_and_save_rate(tmp_path: Path) -> None:
    ws = _synth(tmp_path, seed=3, days=4, requests_per_day=400)
    imp = _all(ws, sources.IMPRESSIONS)
    assert sources.read_day(ws, sources.IMPRESSIONS, dt.date(2026, 3, 1)).schema.equals(IMPRESSION_SCHEMA)
    assert len(imp) == 4 * 400 * 10
    assert not imp.duplicated(["request_id", "pin_id"]).any()  # distinct pins per slate
    per_request = imp.groupby("request_id")
    assert (per_request["position"].apply(lambda p: sorted(p) == list(range(10)))).all()
    assert (per_request["user_id"].nunique() == 1).all() and (
        per_request["event_timestamp"].nunique() == 1
    ).all()
    assert 0.01 < imp["saved"].mean() < 0.08  # a few percent
    # position bias: the top of the slate is saved more often than the bottom
    by_pos = imp.groupby("position")["saved"].mean()
    assert by_pos.iloc[:3].mean() > by_pos.iloc[-3:].mean()
    # power-law popularity: the top 10% of pins take most impressions, the median pin few
    counts = imp["pin_id"].value_counts()
    assert counts.iloc[: len(counts) // 10].sum() > 0.5 * len(imp)
    assert counts.median() < counts.mean() / 3
    # new pins arrive every day (ids beyond the first day's catalogue)
    assert imp.loc[imp["event_timestamp"].dt.date > dt.date(2026, 3, 1), "pin_id"].max() > 500


def test_id_effects_knob_changes_memorisable_signal(tmp_path: Path) -> None:
    """With large per-ID offsets, a pin's own save rate on one day predicts the next day's more."""

    def day_to_day_corr(scale: float) -> float:
        ws = _synth(tmp_path / f"s{scale}", seed=5, days=2, requests_per_day=1500, id_effect_scale=scale)
        imp = _all(ws, sources.IMPRESSIONS)
        imp["day"] = imp["event_timestamp"].dt.date
        rates = imp.groupby(["pin_id", "day"])["saved"].agg(["mean", "size"]).unstack("day")
        both = rates[(rates["size"] >= 20).all(axis=1)]["mean"]
        return float(np.corrcoef(both.iloc[:, 0], both.iloc[:, 1])[0, 1])

    assert day_to_day_corr(2.0) > day_to_day_corr(0.0) + 0.1


def test_snapshot_counts_only_the_days_before(tmp_path: Path) -> None:
    ws = _synth(tmp_path, seed=4, days=9)
    imp = _all(ws, sources.IMPRESSIONS)
    for day in (dt.date(2026, 3, 1), dt.date(2026, 3, 9), dt.date(2026, 3, 10)):
        snap = sources.read_day(ws, sources.USERS, day).to_pandas().set_index("user_id")
        assert (snap["event_timestamp"] == day_start(day)).all()
        for days in (7, 28):
            lo, hi = day_start(day) - pd.Timedelta(days=days), day_start(day)
            window = imp[(imp["event_timestamp"] >= lo) & (imp["event_timestamp"] < hi)]
            expected = window.groupby("user_id")["saved"].agg(["size", "sum"])
            got = snap.loc[expected.index]
            assert (got[f"impressions_{days}d"].to_numpy() == expected["size"].to_numpy()).all()
            assert (got[f"saves_{days}d"].to_numpy() == expected["sum"].to_numpy()).all()
            others = snap.drop(expected.index)
            assert (others[f"impressions_{days}d"] == 0).all()
    pins = sources.read_day(ws, sources.PINS, dt.date(2026, 3, 5)).to_pandas()
    # a pin in the snapshot of 03-05 was created by then; pins of later days are not in it
    assert pins["pin_id"].max() <= 500 + 4 * 25
    assert (pins["age_days"] >= 0).all()


def test_snapshot_builder_refuses_days_out_of_order() -> None:
    users = pd.DataFrame(
        {"user_id": [1], "country": ["x"], "created_timestamp": [day_start(dt.date(2026, 1, 1))]}
    )
    pins = pd.DataFrame(
        {"pin_id": [1], "category": ["y"], "created_timestamp": [day_start(dt.date(2026, 1, 1))]}
    )
    b = SnapshotBuilder(users, pins)
    frame = pd.DataFrame({"user_id": [1], "pin_id": [1], "saved": [1]})
    b.add_day(dt.date(2026, 1, 2), frame)
    with pytest.raises(ValueError, match="in order"):
        b.add_day(dt.date(2026, 1, 1), frame)


@pytest.mark.parametrize(
    ("knobs", "message"),
    [
        ({"days": 0}, "days must be > 0"),
        ({"slate_size": 600}, "exceeds the catalogue"),
        ({"label_noise": -1.0}, "label_noise must be >= 0"),
        ({"new_pins_per_day": -3}, "new_pins_per_day"),
    ],
)
def test_bad_config_is_refused(tmp_path: Path, knobs: dict[str, object], message: str) -> None:
    cfg = {"start": dt.date(2026, 3, 1), "days": 2, **SMALL, **knobs}
    with pytest.raises(RankerError, match=message):
        generate(Workspace.resolve(tmp_path), SynthConfig(**cfg))  # type: ignore[arg-type]
    assert not any(tmp_path.rglob("*.parquet"))


def test_day_is_written_whole(tmp_path: Path) -> None:
    ws = _synth(tmp_path, seed=1, days=1)
    day_dir = sources.day_dir(ws, sources.IMPRESSIONS, dt.date(2026, 3, 1))
    assert [p.name for p in day_dir.iterdir()] == ["part-0.parquet"]
    assert pq.read_metadata(day_dir / "part-0.parquet").num_rows == 800
