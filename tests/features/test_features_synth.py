"""Synthetic generator and daily snapshots: determinism, shape of the log, point-in-time counts."""

from __future__ import annotations

import datetime as dt
import hashlib
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


# ------------------------------------------------------------------ users who come back (issue 34)

# sha256 over the impressions and entity tables written for SMALL, seed 7, 6 days, by
# features/synth.py as of d7c4bc8 (before the return knobs): with them off, not a byte moves
TODAYS_IMPRESSIONS_DIGEST = "0ab5aef3314681471777e0417373b979605f9c95e671f0f48789ce39cf5f192b"
# every logit base_logit + return_affinity * (saved before): nothing else tells a return apart
FLAT = {"affinity_scale": 0.0, "id_effect_scale": 0.0, "label_noise": 0.0, "position_decay": 0.0}


def _digest(ws: Workspace, tables: tuple[str, ...] | None = None) -> str:
    h = hashlib.sha256()
    for path in sorted(ws.source.rglob("*")):
        rel = path.relative_to(ws.source)
        if path.is_file() and (tables is None or rel.parts[0] in tables):
            h.update(str(rel).encode())
            h.update(path.read_bytes())
    return h.hexdigest()


def _with_history(ws: Workspace, horizon: int) -> pd.DataFrame:
    """Each impression with ``before`` (its user saved the pin on one of the ``horizon`` days
    before) and ``remembered`` (how many distinct pins its user saved on those days), rebuilt
    from the log alone."""
    days = sources.list_days(ws, sources.IMPRESSIONS)
    imp = pd.concat(
        [sources.read_day(ws, sources.IMPRESSIONS, d).to_pandas().assign(day=i) for i, d in enumerate(days)],
        ignore_index=True,
    )
    saves = imp.loc[imp["saved"] == 1, ["user_id", "pin_id", "day"]].rename(columns={"day": "saved_day"})
    pairs = imp[["user_id", "pin_id", "day"]].reset_index().merge(saves, on=["user_id", "pin_id"])
    recent = pairs[(pairs["saved_day"] < pairs["day"]) & (pairs["saved_day"] >= pairs["day"] - horizon)]
    imp["before"] = imp.index.isin(recent["index"])
    users = imp[["user_id", "day"]].drop_duplicates().merge(saves, on="user_id")
    users = users[(users["saved_day"] < users["day"]) & (users["saved_day"] >= users["day"] - horizon)]
    remembered = users.groupby(["user_id", "day"])["pin_id"].nunique().rename("remembered")
    imp = imp.join(remembered, on=["user_id", "day"])
    imp["remembered"] = imp["remembered"].fillna(0).astype(int)
    return imp


def test_returns_off_or_at_zero_leave_the_world_bit_identical(tmp_path: Path) -> None:
    off = _synth(tmp_path / "off", seed=7, days=6)
    assert _digest(off, (sources.IMPRESSIONS, "entities")) == TODAYS_IMPRESSIONS_DIGEST
    # at 0 the knobs draw from their own stream and add an exact 0 to the logit: same bytes,
    # snapshots included
    zero = _synth(tmp_path / "zero", seed=7, days=6, return_share=0.0, return_affinity=0.0, return_days=3)
    assert _digest(zero) == _digest(off)


def test_returning_users_see_the_pins_they_saved_again(tmp_path: Path) -> None:
    share, k = 0.4, SMALL["slate_size"]
    # a flat-popularity catalogue, so that popularity seldom brings a saved pin back by chance
    knobs = {**FLAT, "users": 20, "requests_per_day": 300, "pins": 5000, "pin_exponent": 0.0}
    ws = _synth(tmp_path / "on", seed=11, days=8, return_share=share, return_days=3, **knobs)
    imp = _with_history(ws, horizon=3)
    # a user with at least a slate of saves in the last 3 days: each slot is a return with
    # probability `share`, plus what popularity brings back by chance (measured without returns)
    full = imp[imp["remembered"] >= k]
    base = _with_history(_synth(tmp_path / "off", seed=11, days=8, **knobs), horizon=3)
    chance = base.loc[base["remembered"] >= k, "before"].mean()
    expected = share + (1 - share) * chance
    assert len(full) > 5000 and chance < 0.02
    assert abs(full["before"].mean() - expected) < 4 * np.sqrt(expected * (1 - expected) / len(full))
    # a user with no saves gets none back; saves older than the horizon come back only by chance
    assert not imp.loc[imp["remembered"] == 0, "before"].any()
    older = _with_history(ws, horizon=8)
    only_older = older["before"] & ~imp["before"]
    assert only_older.mean() < chance
    # deterministic by seed, knobs on
    again = _synth(tmp_path / "again", seed=11, days=8, return_share=share, return_days=3, **knobs)
    assert _digest(again) == _digest(ws)


@pytest.mark.parametrize("affinity", [0.0, 1.5])
def test_a_pin_saved_before_is_saved_again_at_the_affinity_the_knob_says(
    tmp_path: Path, affinity: float
) -> None:
    knobs = {**FLAT, "users": 40, "requests_per_day": 200}
    ws = _synth(tmp_path, seed=12, days=8, return_share=0.4, return_affinity=affinity, **knobs)
    imp = _with_history(ws, horizon=28)
    base_logit = SynthConfig(start=dt.date(2026, 3, 1), days=1).base_logit
    for before, logit in ((True, base_logit + affinity), (False, base_logit)):
        rows = imp[imp["before"] == before]
        p = 1 / (1 + np.exp(-logit))
        assert len(rows) > 3000
        assert abs(rows["saved"].mean() - p) < 4 * np.sqrt(p * (1 - p) / len(rows))


def test_return_affinity_only_raises_the_labels_of_pins_saved_before(tmp_path: Path) -> None:
    """In the default world the affinity changes nothing but the returns' labels, and those only
    upward (the same uniform draw against a higher probability)."""
    zero = _with_history(_synth(tmp_path / "zero", seed=13, days=5, return_share=0.3), horizon=28)
    summary = generate(
        Workspace.resolve(tmp_path / "one"),
        SynthConfig(
            start=dt.date(2026, 3, 1), days=5, seed=13, return_share=0.3, return_affinity=1.0, **SMALL
        ),  # type: ignore[arg-type]
    )
    one = _with_history(Workspace.resolve(tmp_path / "one"), horizon=28)
    assert (one[["request_id", "pin_id", "before"]] == zero[["request_id", "pin_id", "before"]]).all().all()
    before = one["before"]
    assert (one.loc[~before, "saved"] == zero.loc[~before, "saved"]).all()
    assert (one.loc[before, "saved"] >= zero.loc[before, "saved"]).all()
    assert one.loc[before, "saved"].sum() > zero.loc[before, "saved"].sum()
    # the summary counts what the log shows
    assert summary.reshown == int(before.sum())
    assert summary.reshown_saves == int(one.loc[before, "saved"].sum())


@pytest.mark.parametrize(
    ("flag", "value"),
    [
        ("--return-share", "1.5"),
        ("--return-share", "-0.1"),
        ("--return-affinity", "11"),
        ("--return-affinity", "nan"),
        ("--return-days", "0"),
        ("--return-days", "29"),
    ],
)
def test_cli_refuses_a_bad_return_knob_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: str, value: str
) -> None:
    from ranking.cli.main import main

    argv = ["data", "synth", "--home", str(tmp_path), "--start", "2026-03-01", "--days", "2"]
    with pytest.raises(SystemExit) as exited:
        main([*argv, flag, value])
    assert exited.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and flag in err[0]
    assert not (tmp_path / "source").exists()


def test_return_days_alone_is_refused_before_anything_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from ranking.cli.main import main

    argv = ["data", "synth", "--home", str(tmp_path), "--start", "2026-03-01", "--days", "2"]
    assert main([*argv, "--return-days", "7"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "return_days needs return_share or return_affinity" in err[0]
    assert not any(tmp_path.rglob("*.parquet"))
    small = ["--users", "50", "--pins", "60", "--requests-per-day", "10", "--slate-size", "5"]
    assert main([*argv, *small, "--return-share", "0.2", "--return-affinity", "1", "--json"]) == 0
    summary = capsys.readouterr().out
    assert '"return_share": 0.2' in summary and '"return_affinity": 1.0' in summary
    assert '"reshown":' in summary
