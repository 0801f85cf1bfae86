"""Window builder on the real Feast stores: point-in-time correctness, row conservation, reuse,
incremental == from scratch, and every validation failure (each leaves no manifest behind)."""

from __future__ import annotations

import datetime as dt
import json
import shutil
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from tinyspace import START, WINDOW_DAYS

from features import sources
from features.build_checks import WindowChecks
from features.schema import EXAMPLE_COLUMNS, FEATURE_SERVICE, IMPRESSION_SCHEMA
from ranking.core.errors import DataValidationError, RankerError
from ranking.core.workspace import Workspace

pytestmark = pytest.mark.slow

END = START + dt.timedelta(days=6)  # the tiny window's eval day, 2026-01-07


def _ws(home: str | Path) -> Workspace:
    return Workspace.resolve(home)


def _read(path: str) -> pd.DataFrame:
    return pd.read_parquet(path)


def _build(home: Path, end: dt.date = END, days: int = WINDOW_DAYS, **checks: Any) -> dict[str, Any]:
    from features.window import build_window

    return build_window(_ws(home), end, days, WindowChecks(**checks))


def _assert_nothing_half_written(home: Path, end: dt.date = END, days: int = WINDOW_DAYS) -> None:
    assert not (_ws(home).windows / f"{end.isoformat()}_{days}d" / "manifest.json").exists()
    for part in (_ws(home).windows / "days").glob("*/*"):
        assert not part.name.startswith("."), f"temp dir left behind: {part}"
        assert (part / "partition.json").is_file() and (part / "examples.parquet").is_file()


def test_features_match_an_independent_merge_asof(tiny: dict[str, Any]) -> None:
    """No feature from after the impression: compare with pandas merge_asof on the raw snapshots,
    and the 7-day counts with counts recomputed from raw impressions strictly before the day."""
    ws, manifest = _ws(tiny["home"]), tiny["window"]
    examples = pd.concat([_read(manifest["eval"]["path"]), _read(manifest["train"][-1]["path"])])
    sample = examples.sample(n=400, random_state=0).sort_values("event_timestamp")
    sample["event_timestamp"] = sample["event_timestamp"].astype("datetime64[ns, UTC]")
    for view, key, table in (("user_stats", "user_id", sources.USERS), ("pin_stats", "pin_id", sources.PINS)):
        snaps = pd.concat([sources.read_day(ws, table, d).to_pandas() for d in sources.list_days(ws, table)])
        snaps["event_timestamp"] = snaps["event_timestamp"].astype("datetime64[ns, UTC]")
        snaps = snaps.rename(columns={"event_timestamp": "snapshot_ts"}).sort_values("snapshot_ts")
        expected = pd.merge_asof(
            sample[["request_id", "pin_id", "user_id", "event_timestamp"]],
            snaps,
            left_on="event_timestamp",
            right_on="snapshot_ts",
            by=key,
            direction="backward",
            tolerance=pd.Timedelta(hours=24),
        )
        assert (
            expected["snapshot_ts"].dropna() <= expected["event_timestamp"][expected["snapshot_ts"].notna()]
        ).all()
        expected = expected.set_index(["request_id", "pin_id"])
        got = sample.set_index(["request_id", "pin_id"])
        for col in [c for c in snaps.columns if c not in (key, "snapshot_ts")]:
            pd.testing.assert_series_equal(
                got[f"{view}__{col}"].astype("object"),
                expected.loc[got.index, col].astype("object"),
                check_names=False,
            )
    raw = pd.concat(
        [
            sources.read_day(ws, sources.IMPRESSIONS, d).to_pandas()
            for d in sources.list_days(ws, sources.IMPRESSIONS)
        ]
    )
    for _, row in sample.head(50).iterrows():
        day0 = row["event_timestamp"].normalize()
        before = raw[
            (raw["user_id"] == row["user_id"]) & (raw["event_timestamp"] >= day0 - pd.Timedelta(days=7))
        ]
        before = before[before["event_timestamp"] < day0]
        assert row["user_stats__impressions_7d"] == len(before)
        assert row["user_stats__saves_7d"] == before["saved"].sum()


def test_rows_are_conserved_and_the_manifest_follows_the_contract(tiny: dict[str, Any]) -> None:
    from features.window import load_manifest, read_window_manifest

    ws, manifest = _ws(tiny["home"]), tiny["window"]
    # (another test may have rebuilt the shared window since: only the build facts may differ)
    per_build = {"days_built", "days_reused", "duration_seconds", "created_at"}
    loaded = load_manifest(ws, END, WINDOW_DAYS)
    assert {k: v for k, v in manifest.items() if k not in per_build} == {
        k: v for k, v in loaded.items() if k not in per_build
    }
    assert [p["date"] for p in manifest["train"]] == [
        (START + dt.timedelta(days=i)).isoformat() for i in range(1, WINDOW_DAYS + 1)
    ]
    assert manifest["eval"]["date"] == END.isoformat()
    for part in [*manifest["train"], manifest["eval"]]:
        examples = _read(part["path"])
        source = sources.read_day(ws, sources.IMPRESSIONS, dt.date.fromisoformat(part["date"])).to_pandas()
        assert len(examples) == len(source) == part["rows"]
        keys = ["request_id", "pin_id"]
        assert (
            examples[keys]
            .sort_values(keys)
            .reset_index(drop=True)
            .equals(source[keys].sort_values(keys).reset_index(drop=True))
        )
        assert tuple(examples.columns) == EXAMPLE_COLUMNS
        assert part["label_rate"] == pytest.approx(examples["saved"].mean())
        assert set(part["null_rates"]) == set(EXAMPLE_COLUMNS) - set(IMPRESSION_SCHEMA.names)
    assert manifest["rows_train"] == sum(p["rows"] for p in manifest["train"])
    assert manifest["rows_eval"] == manifest["eval"]["rows"]
    assert list(manifest["schema"]) == list(EXAMPLE_COLUMNS)
    assert manifest["days_built"] + manifest["days_reused"] == WINDOW_DAYS + 1
    assert manifest["feature_service"] == FEATURE_SERVICE and len(manifest["window_id"]) == 64
    # the manifest's fields, as written before the manifest was a model, and the model reads
    # every one of them back as it is
    assert set(loaded) == {
        "window_id", "end", "days", "train", "eval", "missing_days", "schema", "feature_service",
        "feature_version", "source_version", "rows_train", "rows_eval", "label_rate", "days_built",
        "days_reused", "days_repaired", "checks", "zero_filled", "created_at", "duration_seconds",
    }  # fmt: skip
    assert set(loaded["eval"]) == {
        "date", "path", "rows", "label_rate", "null_rates", "partition_key", "source_version", "bytes", "sha256",
        "zero_filled",
    }  # fmt: skip
    assert read_window_manifest(ws.window_manifest(END, WINDOW_DAYS)).record() == loaded
    with pytest.raises(RankerError, match="no window manifest"):
        load_manifest(ws, END, 3)


def test_incremental_window_equals_from_scratch_and_reuses_days(
    tiny: dict[str, Any], private_home: Path
) -> None:
    first = _build(private_home, END - dt.timedelta(days=1), 4)  # train 01-02..01-05, eval 01-06
    assert (first["days_built"], first["days_reused"]) == (5, 0)
    nxt = _build(private_home, END, 4)  # train 01-03..01-06, eval 01-07
    assert (nxt["days_built"], nxt["days_reused"]) == (1, 4)
    again = _build(private_home, END, 4)
    assert (again["days_built"], again["days_reused"]) == (0, 5)
    assert again["window_id"] == nxt["window_id"]
    # the tiny workspace built 01-03..01-07 from scratch (another home, same source bytes)
    scratch = {p["date"]: p for p in [*tiny["window"]["train"], tiny["window"]["eval"]]}
    for part in [*nxt["train"], nxt["eval"]]:
        assert part["partition_key"] == scratch[part["date"]]["partition_key"]
        pd.testing.assert_frame_equal(_read(part["path"]), _read(scratch[part["date"]]["path"]))


def test_a_changed_day_is_rebuilt(private_home: Path) -> None:
    before = _build(private_home)
    ws = _ws(private_home)
    day = START + dt.timedelta(days=3)
    table = sources.read_day(ws, sources.IMPRESSIONS, day)
    flipped = pc.subtract(pa.scalar(1, pa.int8()), table["saved"])
    sources.write_day(ws, sources.IMPRESSIONS, day, table.set_column(5, "saved", flipped))
    after = _build(private_home)
    assert (after["days_built"], after["days_reused"]) == (1, WINDOW_DAYS)
    changed = {p["date"] for p in after["train"]} & {
        b["date"]
        for b, a in zip(before["train"], after["train"], strict=True)
        if b["partition_key"] != a["partition_key"]
    }
    assert changed == {day.isoformat()}
    assert after["window_id"] != before["window_id"]


def _drop_day(home: Path, table: str, day: dt.date) -> None:
    shutil.rmtree(sources.day_dir(_ws(home), table, day))


@pytest.mark.parametrize(
    ("breakage", "checks", "message"),
    [
        ("two_missing_days", {}, r"covers 3/5 training days"),
        ("empty_eval_day", {}, r"impressions of 2026-01-07 are empty"),
        ("no_eval_day", {}, r"eval day 2026-01-07 has no impressions"),
        ("schema_drift", {}, r"schema drift in impressions of 2026-01-04: changed types \['position"),
        ("extra_column", {}, r"schema drift .* unexpected \['campaign'\]"),
        ("duplicate_impressions", {}, r"2 impressions of 2026-01-04 share an impression id"),
        ("corrupt_snapshot", {}, r"Feast point-in-time join of 2026-01-04 failed: .*"),
    ],
)
def test_bad_input_fails_loudly_and_leaves_no_window(
    private_home: Path, breakage: str, checks: dict[str, Any], message: str
) -> None:
    ws = _ws(private_home)
    day = START + dt.timedelta(days=3)
    _build(private_home)  # a good window first: a failed rebuild must not leave it looking current
    table = sources.read_day(ws, sources.IMPRESSIONS, day)
    if breakage == "two_missing_days":
        _drop_day(private_home, sources.IMPRESSIONS, day)
        _drop_day(private_home, sources.IMPRESSIONS, day + dt.timedelta(days=1))
    elif breakage == "empty_eval_day":
        sources.write_day(ws, sources.IMPRESSIONS, END, table.slice(0, 0))
    elif breakage == "no_eval_day":
        _drop_day(private_home, sources.IMPRESSIONS, END)
    elif breakage == "schema_drift":
        sources.write_day(
            ws,
            sources.IMPRESSIONS,
            day,
            table.set_column(4, "position", pc.cast(table["position"], pa.int64())),
        )
    elif breakage == "extra_column":
        sources.write_day(
            ws, sources.IMPRESSIONS, day, table.append_column("campaign", pa.array(["x"] * table.num_rows))
        )
    elif breakage == "corrupt_snapshot":
        (sources.day_dir(ws, sources.PINS, day) / "part-0.parquet").write_bytes(b"not parquet")
    elif breakage == "duplicate_impressions":
        sources.write_day(ws, sources.IMPRESSIONS, day, pa.concat_tables([table, table.slice(0, 1)]))
    with pytest.raises(DataValidationError, match=message):
        _build(private_home, **checks)
    _assert_nothing_half_written(private_home)


def test_missing_days_within_coverage_are_listed(private_home: Path) -> None:
    day = START + dt.timedelta(days=2)
    _drop_day(private_home, sources.IMPRESSIONS, day)
    manifest = _build(private_home, min_coverage=0.8)
    assert manifest["missing_days"] == [day.isoformat()]
    assert len(manifest["train"]) == WINDOW_DAYS - 1


def test_rows_lost_inside_the_feast_join_are_caught(tiny: dict[str, Any]) -> None:
    """Fault injection around the real store: the dask file store was seen dropping rows."""
    from features.feast_repo import open_store
    from features.window import example_schema, join_day

    class DropsOneRow:
        def __init__(self, store: Any) -> None:
            self._store = store

        def get_feature_service(self, name: str) -> Any:
            return self._store.get_feature_service(name)

        def get_historical_features(self, **kwargs: Any) -> Any:
            job = self._store.get_historical_features(**kwargs)

            class Job:
                def to_df(self) -> pd.DataFrame:
                    return job.to_df().iloc[1:]

            return Job()

    ws = _ws(tiny["home"])
    table = sources.read_day(ws, sources.IMPRESSIONS, END)
    with pytest.raises(
        DataValidationError,
        match=r"Feast point-in-time join of 2026-01-07 returned \d+ rows for \d+ in \(-1\)",
    ):
        join_day(DropsOneRow(open_store(ws)), END, table, example_schema())  # type: ignore[arg-type]


def test_changed_definitions_need_apply(private_home: Path) -> None:
    (_ws(private_home).feast / "applied.json").write_text(json.dumps({"feature_version": "0000"}))
    with pytest.raises(RankerError, match="changed since the last apply"):
        _build(private_home)


def test_never_applied_workspace_is_refused(tiny: dict[str, Any], tmp_path: Path) -> None:
    shutil.copytree(Path(tiny["home"]) / "source", tmp_path / "source")
    with pytest.raises(RankerError, match="not applied"):
        _build(tmp_path)


def test_bad_thresholds_are_refused(private_home: Path) -> None:
    with pytest.raises(DataValidationError, match="min_coverage must be in"):
        _build(private_home, min_coverage=1.5)
