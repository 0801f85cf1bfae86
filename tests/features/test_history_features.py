"""The history views (issue 34): user x pin and user x category snapshots, their point-in-time
join into the window (a second lookup by the pin's category), the zero fill of an absent pair,
a workspace derived before them, and the data validation's declared schema change."""

from __future__ import annotations

import datetime as dt
import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from tinyspace import START, WINDOW_DAYS

from features import derive, sources
from features.derive import SnapshotBuilder, day_start
from features.schema import HISTORY_FEATURES, HISTORY_VIEWS, USER_CATEGORY_VIEW, USER_PIN_VIEW
from ranking.core.errors import DataValidationError, RankerError
from ranking.core.workspace import Workspace

END = START + dt.timedelta(days=6)  # the tiny window's eval day, 2026-01-07


# ------------------------------------------------------------------------- snapshots (no Feast)


def _builder() -> SnapshotBuilder:
    created = day_start(dt.date(2025, 1, 1))
    users = pd.DataFrame({"user_id": [1, 2], "country": ["x", "y"], "created_timestamp": [created] * 2})
    pins = pd.DataFrame(
        {"pin_id": [10, 11, 12], "category": ["food", "food", "art"], "created_timestamp": [created] * 3}
    )
    return SnapshotBuilder(users, pins)


def _impressions(*rows: tuple[int, int, int]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["user_id", "pin_id", "saved"])


def test_a_pair_stays_28_days_after_its_last_impression_with_its_counts() -> None:
    day0 = dt.date(2026, 2, 1)
    b = _builder()
    # day0: user 1 sees pin 10 three times (two saves) and pin 12 once; user 2 sees pin 11
    b.add_day(day0, _impressions((1, 10, 1), (1, 10, 1), (1, 10, 0), (1, 12, 0), (2, 11, 1)))
    # 20 days later user 1 sees pin 11 (category food, like pin 10) once, saved
    b.add_day(day0 + dt.timedelta(days=20), _impressions((1, 11, 1)))

    def snap(offset: int, table: str) -> pd.DataFrame:
        frame = b.pair_snapshots(day0 + dt.timedelta(days=offset))[table].to_pandas()
        key = derive.PAIR_KEYS[table]
        return frame.set_index(["user_id", key])

    three_days_on = snap(3, sources.USER_PINS)  # last seen 3 days ago: a row, 7d and 28d counts
    row = three_days_on.loc[(1, 10)]
    assert (row["impressions_7d"], row["saves_7d"], row["impressions_28d"], row["saves_28d"]) == (3, 2, 3, 2)
    assert row["save_rate_28d"] == pytest.approx(2 / 4)  # smoothed: saves / (impressions + 1)
    assert set(three_days_on.index) == {(1, 10), (1, 12), (2, 11)}
    assert (three_days_on["as_of"] == day_start(day0 + dt.timedelta(days=3))).all()

    ten_days_on = snap(10, sources.USER_PINS)  # outside 7 days, inside 28: still there, 7d = 0
    assert ten_days_on.loc[(1, 10), "impressions_7d"] == 0 and ten_days_on.loc[(1, 10), "saves_28d"] == 2

    categories = snap(21, sources.USER_CATEGORIES)  # the pin's category from the pin attributes
    food = categories.loc[(1, "food")]
    assert (food["impressions_7d"], food["saves_7d"], food["impressions_28d"], food["saves_28d"]) == (
        1,
        1,
        4,
        3,
    )
    assert categories.loc[(1, "art"), "impressions_28d"] == 1

    # day0 + 28: day0 is exactly 28 days back, the horizon's first day: still counted
    assert (1, 10) in snap(28, sources.USER_PINS).index
    # day0 + 29: the pairs last seen 29 days ago have no row; the one seen on day 20 stays
    late = snap(29, sources.USER_PINS)
    assert set(late.index) == {(1, 11)}
    assert set(snap(29, sources.USER_CATEGORIES).index) == {(1, "food")}
    assert snap(49, sources.USER_PINS).empty  # everything aged out: an empty snapshot, still a table


def test_a_snapshot_never_counts_its_own_day() -> None:
    b = _builder()
    day = dt.date(2026, 2, 1)
    b.add_day(day, _impressions((1, 10, 1)))
    assert b.pair_snapshots(day)[sources.USER_PINS].num_rows == 0  # D's own impressions: not in D's
    after = b.pair_snapshots(day + dt.timedelta(days=1))[sources.USER_PINS].to_pandas()
    assert after[["user_id", "pin_id", "saves_7d"]].values.tolist() == [[1, 10, 1]]
    fresh = _builder()  # a snapshot of day D from the days before D only
    assert fresh.pair_snapshots(day)[sources.USER_PINS].num_rows == 0


def test_memory_holds_28_days_of_pair_counts() -> None:
    b = _builder()
    for i in range(40):
        b.add_day(dt.date(2026, 1, 1) + dt.timedelta(days=i), _impressions((1, 10, i % 2)))
    assert len(b._pairs) == 28


# ------------------------------------------------------------------- the window on the real stores


def _build(home: Path, end: dt.date = END, days: int = WINDOW_DAYS) -> dict[str, Any]:
    from features.window import build_window

    return build_window(Workspace.resolve(home), end, days)


def _rederive(ws: Workspace) -> None:
    users = pd.read_parquet(sources.entities_path(ws, sources.USERS))
    pins = pd.read_parquet(sources.entities_path(ws, sources.PINS))
    derive.derive_all(ws, users, pins)


def _rows(manifest: dict[str, Any], day: dt.date) -> pd.DataFrame:
    part = next(p for p in [*manifest["train"], manifest["eval"]] if p["date"] == day.isoformat())
    return pd.read_parquet(part["path"])


@pytest.mark.slow
def test_a_planted_future_save_never_reaches_an_earlier_row(private_home: Path) -> None:
    """Saves of a pair planted on day D (a training day) and on the eval day: the pair's rows on
    D count only the impressions before D. The snapshot of D+1 does count them (asserted), so a
    join that read it — or any snapshot dated after the row — fails here."""
    ws = Workspace.resolve(private_home)
    day = START + dt.timedelta(days=4)  # a training day of the window
    imp_day = sources.read_day(ws, sources.IMPRESSIONS, day).to_pandas()
    pins = pd.read_parquet(sources.entities_path(ws, sources.PINS)).set_index("pin_id")
    before = pd.concat(
        [
            sources.read_day(ws, sources.IMPRESSIONS, d).to_pandas()
            for d in sources.list_days(ws, sources.IMPRESSIONS)
        ]
    )
    before = before[pd.to_datetime(before["event_timestamp"], utc=True) < day_start(day)]
    seen = before.groupby(["user_id", "pin_id"]).size()
    # a pair shown on D, one with a past if there is one (then its true value is not 0 either)
    shown = list(zip(imp_day["user_id"].astype(int), imp_day["pin_id"].astype(int), strict=True))
    pair = next((p for p in shown if p in seen.index), shown[0])
    planted = 3
    for target in (day, END):
        table = sources.read_day(ws, sources.IMPRESSIONS, target)
        stamp = pd.Timestamp(day_start(target)) + pd.Timedelta(hours=1)  # early in the day: before most rows
        extra = pa.Table.from_pandas(
            pd.DataFrame(
                {
                    "request_id": [f"planted-{target}-{i}" for i in range(planted)],
                    "user_id": [pair[0]] * planted,
                    "pin_id": [pair[1]] * planted,
                    "event_timestamp": [stamp] * planted,
                    "position": np.zeros(planted, dtype=np.int32),
                    "saved": np.ones(planted, dtype=np.int8),
                }
            ),
            schema=table.schema,
            preserve_index=False,
        )
        sources.write_day(ws, sources.IMPRESSIONS, target, pa.concat_tables([table, extra]))
    _rederive(ws)
    manifest = _build(private_home)

    def counted(frame: pd.DataFrame, mask: pd.Series) -> tuple[int, int]:
        return int(mask.sum()), int(frame.loc[mask, "saved"].sum())

    horizon = before[
        pd.to_datetime(before["event_timestamp"], utc=True) >= day_start(day) - pd.Timedelta(days=28)
    ]
    true_imp, true_saves = counted(horizon, (horizon["user_id"] == pair[0]) & (horizon["pin_id"] == pair[1]))
    category = pins.loc[pair[1], "category"]
    same_category = horizon["pin_id"].map(pins["category"]) == category
    cat_imp, cat_saves = counted(horizon, (horizon["user_id"] == pair[0]) & same_category)

    rows = _rows(manifest, day)
    ours = rows[(rows["user_id"] == pair[0]) & (rows["pin_id"] == pair[1])]
    assert len(ours) >= planted + 1  # the planted rows themselves are rows of D
    assert (ours[f"{USER_PIN_VIEW}__impressions_28d"] == true_imp).all()
    assert (ours[f"{USER_PIN_VIEW}__saves_28d"] == true_saves).all()
    assert (ours[f"{USER_CATEGORY_VIEW}__impressions_28d"] == cat_imp).all()
    assert (ours[f"{USER_CATEGORY_VIEW}__saves_28d"] == cat_saves).all()
    assert (ours[f"{USER_PIN_VIEW}__as_of"] == day_start(day)).all()
    # what a leak would read: D+1's snapshot holds D's planted saves
    leaked = sources.read_day(ws, sources.USER_PINS, day + dt.timedelta(days=1)).to_pandas()
    leaked = leaked[(leaked["user_id"] == pair[0]) & (leaked["pin_id"] == pair[1])]
    assert int(leaked["saves_28d"].iloc[0]) >= true_saves + planted
    assert not (ours[f"{USER_PIN_VIEW}__saves_28d"] >= true_saves + planted).any()
    # every row of the pair, any day, counts the pair's saves strictly before its day only
    log = pd.concat(
        [
            sources.read_day(ws, sources.IMPRESSIONS, d).to_pandas()
            for d in sources.list_days(ws, sources.IMPRESSIONS)
        ]
    )
    log = log[(log["user_id"] == pair[0]) & (log["pin_id"] == pair[1])]
    times = pd.to_datetime(log["event_timestamp"], utc=True)
    for part in [*manifest["train"], manifest["eval"]]:
        start = day_start(dt.date.fromisoformat(part["date"]))
        frame = pd.read_parquet(part["path"])
        frame = frame[(frame["user_id"] == pair[0]) & (frame["pin_id"] == pair[1])]
        inside = (times < start) & (times >= start - pd.Timedelta(days=28))
        assert (frame[f"{USER_PIN_VIEW}__saves_28d"] == int(log.loc[inside.to_numpy(), "saved"].sum())).all()


@pytest.mark.slow
def test_history_columns_match_the_snapshots_and_an_absent_pair_reads_zero(tiny: dict[str, Any]) -> None:
    """Every row's history equals its pair's row in the snapshot of its day (the user x category
    one found by the pin's category as pin_stats had it), or 0 where the pair has none; the
    manifest names the zero-filled columns and how many rows each day filled."""
    ws, manifest = Workspace.resolve(tiny["home"]), tiny["window"]
    assert manifest["zero_filled"] == list(HISTORY_FEATURES)
    filled_somewhere = False
    for part in [*manifest["train"], manifest["eval"]]:
        day = dt.date.fromisoformat(part["date"])
        rows = pd.read_parquet(part["path"])
        assert not rows[list(HISTORY_FEATURES)].isna().any().any()
        assert all(part["null_rates"][c] == 0.0 for c in HISTORY_FEATURES)
        for view, table, key, left in (
            (USER_PIN_VIEW, sources.USER_PINS, "pin_id", "pin_id"),
            (USER_CATEGORY_VIEW, sources.USER_CATEGORIES, "category", "pin_stats__category"),
        ):
            snap = sources.read_day(ws, table, day).to_pandas().rename(columns={key: "_key"})
            expected = (
                rows[["user_id", left]]
                .rename(columns={left: "_key"})
                .merge(snap, on=["user_id", "_key"], how="left")
            )
            absent = expected["as_of"].isna().to_numpy()
            assert (rows[f"{view}__as_of"].isna().to_numpy() == absent).all()
            assert part["zero_filled"][f"{view}__saves_7d"] == pytest.approx(absent.mean())
            filled_somewhere |= bool(absent.any())
            for field in (
                "impressions_7d",
                "saves_7d",
                "save_rate_7d",
                "impressions_28d",
                "saves_28d",
                "save_rate_28d",
            ):
                want = expected[field].fillna(0).to_numpy(dtype=float)
                np.testing.assert_array_equal(rows[f"{view}__{field}"].to_numpy(dtype=float), want)
                assert (rows.loc[absent, f"{view}__{field}"] == 0).all()
    assert filled_somewhere  # the fill was exercised, not vacuous
    last = pd.read_parquet(manifest["eval"]["path"])
    assert (last[f"{USER_CATEGORY_VIEW}__impressions_28d"] > 0).mean() > 0.3  # real values, not only zeros


@pytest.mark.slow
def test_a_workspace_derived_before_the_history_views(private_home: Path) -> None:
    """Its window says so in one line; `ranker features apply` derives the missing snapshots from
    the impressions (the same bytes a fresh derive writes), and the window builds."""
    from features import feast_repo

    ws = Workspace.resolve(private_home)
    fresh = {
        d: sources.day_version(ws, (sources.USER_PINS, sources.USER_CATEGORIES), d)
        for d in sources.list_days(ws, sources.USER_PINS)
    }
    for table in (sources.USER_PINS, sources.USER_CATEGORIES):
        shutil.rmtree(sources.table_dir(ws, table))
    with pytest.raises(
        DataValidationError, match=r"no history snapshots .* run `ranker features apply`"
    ) as err:
        _build(private_home)
    assert "\n" not in str(err.value)
    feast_repo.apply(ws)
    assert {
        d: sources.day_version(ws, (sources.USER_PINS, sources.USER_CATEGORIES), d)
        for d in sources.list_days(ws, sources.USER_PINS)
    } == fresh
    assert _build(private_home)["zero_filled"] == list(HISTORY_FEATURES)
    # without pin attributes there is nothing to derive the categories from: one line, how to rebuild
    for table in (sources.USER_PINS, sources.USER_CATEGORIES):
        shutil.rmtree(sources.table_dir(ws, table))
    sources.entities_path(ws, sources.PINS).unlink()
    with pytest.raises(
        RankerError, match=r"before the history features .* `ranker data synth` or `ranker data import`"
    ):
        feast_repo.apply(ws)


def test_an_apply_record_of_one_entity_views_still_reads(tmp_path: Path) -> None:
    """applied.json written before the pair views recorded `entity` / `join_key`: it still parses
    (the window then asks for an apply because the feature version moved)."""
    from features import feast_repo

    ws = Workspace.resolve(tmp_path / "home")
    old = {
        "feature_version": "0000",
        "views": [
            {"name": "user_stats", "entity": "user", "join_key": "user_id", "ttl_hours": 24.0, "fields": {}}
        ],
        "services": {"ranker_v1": ["user_stats"]},
    }
    ws.feast.mkdir(parents=True)
    (ws.feast / "applied.json").write_text(json.dumps(old))
    (view,) = feast_repo.service_views("ranker_v1", ws)
    assert (view.entities, view.join_keys) == (("user",), ("user_id",))


# ----------------------------------------------------------------- the data validation's schema


@pytest.mark.slow
def test_new_columns_start_a_new_schema_and_history_not_an_anomaly(private_home: Path) -> None:
    """Partitions and a kept schema of the feature version before the history views (their columns
    dropped): validating the window of the new version infers a new schema (a declared change),
    reads none of the old partitions as history, and raises no anomaly about the change."""
    from features.validation import data_schema
    from features.validation import statistics as st
    from features.validation.anomalies import ValidationConfig
    from features.validation.step import ValidationRequest, _history_stats, validate_window, validation_dir

    ws = Workspace.resolve(private_home)
    manifest = _build(private_home)
    new_version = manifest["feature_version"]
    history_columns = {*HISTORY_FEATURES, *(f"{v}__as_of" for v in HISTORY_VIEWS)}
    old_stats = []
    for part in [*manifest["train"], manifest["eval"]]:
        day = dt.date.fromisoformat(part["date"])
        table = pq.read_table(part["path"])
        table = table.drop_columns([c for c in table.column_names if c in history_columns])
        folder = Path(part["path"]).parent.parent / "0ld0ld0ld0ld0ld0"
        folder.mkdir()
        pq.write_table(table, folder / "examples.parquet")
        from ranking.core.hashing import sha256_file

        record = json.loads((Path(part["path"]).parent / "partition.json").read_text())
        record.update(
            feature_version="0ld",
            bytes=(folder / "examples.parquet").stat().st_size,
            sha256=sha256_file(folder / "examples.parquet"),
            null_rates={k: v for k, v in record["null_rates"].items() if k not in history_columns},
        )
        record.pop("zero_filled")
        (folder / "partition.json").write_text(json.dumps(record))
        stats = st.compute(table, day, record["sha256"])
        st.write(st.path_beside(folder / "examples.parquet"), stats)
        old_stats.append(stats)
    old_columns = {k: v for k, v in manifest["schema"].items() if k not in history_columns}
    old_schema_path = data_schema.schema_path(validation_dir(ws) / "schema", old_columns)
    data_schema.write(old_schema_path, data_schema.infer(old_columns, old_stats[:-1], "old", "0ld"))

    summary = validate_window(
        ValidationRequest(workspace=ws, end=END, days=WINDOW_DAYS, config=ValidationConfig())
    )
    assert summary.schema_inferred and Path(summary.schema_path) != old_schema_path
    assert not [a for a in summary.anomalies if a.kind == "schema_type"]
    assert not [a for a in summary.anomalies if a.policy == "fail"]
    kept = data_schema.read(Path(summary.schema_path))
    assert kept is not None and kept.feature_versions == [new_version]
    for column in HISTORY_FEATURES:  # zero-filled: never null, so inferred required
        assert kept.features[column].min_presence == 1.0
    old = data_schema.read(old_schema_path)
    assert old is not None and old.feature_versions == ["0ld"]  # the old schema is left as it was
    # each version's history holds only its own partitions
    new_history = _history_stats(ws, new_version, END + dt.timedelta(days=1), 10)
    old_history = _history_stats(ws, "0ld", END + dt.timedelta(days=1), 10)
    assert set(new_history) == set(old_history) == {s.date for s in old_stats}
    assert all(f"{USER_PIN_VIEW}__saves_28d" in s.features for s in new_history.values())
    assert not any(f"{USER_PIN_VIEW}__saves_28d" in s.features for s in old_history.values())
