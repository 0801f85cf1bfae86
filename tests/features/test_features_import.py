"""`ranker data import`: a real-looking log becomes the workspace layout; bad logs give clear errors."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pandas as pd
import pytest

from features import sources
from features.importer import ImportConfig, import_events, stable_ids
from features.schema import IMPRESSION_SCHEMA
from ranking.core.errors import DataValidationError, RankerError
from ranking.core.workspace import Workspace


def _log() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "uid": ["alice", "alice", "alice", "bob", "bob", "alice", "bob", "carol"],
            "item": ["p1", "p2", "p1", "p1", "p3", "p2", "p2", "p3"],
            "ts": [
                "2026-02-01T08:00:00Z",
                "2026-02-01T08:00:05Z",
                "2026-02-01T09:00:00Z",  # alice saw p1 twice on 02-01: one impression, saved if any
                "2026-02-01T10:00:00Z",
                "2026-02-02T10:00:00Z",
                "2026-02-03T07:00:00Z",
                "2026-02-03T11:30:00",  # naive -> UTC
                "2026-02-03T12:00:00Z",
            ],
            "stars": [5, 1, 2, 4, 3, 5, 1, 4],
            "label": [1, 0, 0, 1, 0, 1, 0, 1],
            "genre": ["a", "b", "a", "a", "c", "b", "b", "c"],
        }
    )


def _write(tmp_path: Path, frame: pd.DataFrame, suffix: str = ".csv") -> Path:
    path = tmp_path / f"events{suffix}"
    frame.to_csv(path, index=False) if suffix == ".csv" else frame.to_parquet(path)
    return path


def _cfg(path: Path, **kw: object) -> ImportConfig:
    return ImportConfig(events=path, user_col="uid", item_col="item", time_col="ts", **kw)  # type: ignore[arg-type]


def test_import_builds_days_requests_duplicates_and_snapshots(tmp_path: Path) -> None:
    ws = Workspace.resolve(tmp_path / "home")
    summary = import_events(ws, _cfg(_write(tmp_path, _log()), item_attribute_col="genre"))
    assert (summary.rows_in, summary.impressions, summary.duplicates_merged) == (8, 7, 1)
    assert sources.list_days(ws, sources.IMPRESSIONS) == [dt.date(2026, 2, d) for d in (1, 2, 3)]
    day1 = sources.read_day(ws, sources.IMPRESSIONS, dt.date(2026, 2, 1))
    assert day1.schema.equals(IMPRESSION_SCHEMA)
    d1 = day1.to_pandas()
    alice_id = int(stable_ids(pd.Series(["alice"]), "user")[0])
    alice = d1[d1["user_id"] == alice_id].sort_values("position")
    # one request per user and day; positions follow time; the duplicate kept its earliest time and the save
    assert d1["request_id"].nunique() == 2 and alice["request_id"].unique().tolist() == [
        f"{alice_id}-20260201"
    ]
    assert alice["position"].tolist() == [0, 1]
    first = alice.iloc[0]
    assert first["saved"] == 1 and first["event_timestamp"] == pd.Timestamp("2026-02-01T08:00:00Z")
    # snapshots derived from the log itself, point-in-time: on 02-03 alice has 2 impressions before
    users = sources.read_day(ws, sources.USERS, dt.date(2026, 2, 3)).to_pandas()
    row = users[users["user_id"] == alice_id].iloc[0]
    assert (row["impressions_7d"], row["saves_7d"], row["country"]) == (2, 1, "unknown")
    pins = sources.read_day(ws, sources.PINS, dt.date(2026, 2, 4)).to_pandas()
    assert set(pins["category"]) == {"a", "b", "c"}
    # carol appears only on 02-03: not in the snapshot of 02-03 (nothing known before), in 02-04's
    assert len(users) == 2 and len(sources.read_day(ws, sources.USERS, dt.date(2026, 2, 4))) == 3


def test_ratings_with_threshold_and_parquet_input(tmp_path: Path) -> None:
    ws = Workspace.resolve(tmp_path / "home")
    log = _log().drop(columns=["label"])
    summary = import_events(
        ws, _cfg(_write(tmp_path, log, ".parquet"), rating_col="stars", label_threshold=4)
    )
    # stars >= 4: rows 0 (5), 3 (4), 5 (5), 7 (4); alice/p1 on 02-01 merges 5 and 2 -> saved
    assert summary.save_rate == pytest.approx(4 / 7)


def test_request_column_is_used_when_given(tmp_path: Path) -> None:
    log = _log().assign(session=["s1", "s1", "s2", "s3", "s4", "s5", "s6", "s7"])
    ws = Workspace.resolve(tmp_path / "home")
    summary = import_events(ws, _cfg(_write(tmp_path, log), request_col="session"))
    assert summary.requests == 7 and summary.duplicates_merged == 0


@pytest.mark.parametrize(
    ("change", "cfg", "error", "message"),
    [
        (lambda f: f.drop(columns=["ts"]), {}, DataValidationError, r"lacks columns \['ts'\]"),
        (lambda f: f.iloc[0:0], {}, DataValidationError, "has no rows"),
        (
            lambda f: f.assign(ts=["yesterday", *f["ts"][1:]]),
            {},
            DataValidationError,
            r"1 unparsable timestamps .*'yesterday'",
        ),
        (lambda f: f.assign(label=[2, *f["label"][1:]]), {}, DataValidationError, "not 0/1"),
        (lambda f: f.assign(uid=[None, *f["uid"][1:]]), {}, DataValidationError, "1 rows have no 'uid'"),
        (lambda f: f, {"rating_col": "stars"}, RankerError, "needs --label-threshold"),
        (lambda f: f, {"label_threshold": 3.0}, RankerError, "applies to --rating-col only"),
    ],
)
def test_bad_logs_are_refused(tmp_path: Path, change, cfg, error, message) -> None:  # type: ignore[no-untyped-def]
    ws = Workspace.resolve(tmp_path / "home")
    path = _write(tmp_path, change(_log()))
    with pytest.raises(error, match=message):
        import_events(ws, _cfg(path, **cfg))
    assert not sources.list_days(ws, sources.IMPRESSIONS)


def test_import_refuses_a_workspace_with_data_unless_replace(tmp_path: Path) -> None:
    ws = Workspace.resolve(tmp_path / "home")
    path = _write(tmp_path, _log())
    import_events(ws, _cfg(path))
    with pytest.raises(RankerError, match="already holds source data"):
        import_events(ws, _cfg(path))
    assert import_events(ws, _cfg(path, replace=True)).impressions == 7


def test_unsupported_and_missing_files(tmp_path: Path) -> None:
    ws = Workspace.resolve(tmp_path / "home")
    (tmp_path / "events.json").write_text("{}")
    with pytest.raises(RankerError, match=r"\.parquet or \.csv"):
        import_events(ws, _cfg(tmp_path / "events.json"))
    with pytest.raises(RankerError, match="not found"):
        import_events(ws, _cfg(tmp_path / "nope.csv"))


@pytest.mark.slow
def test_imported_log_builds_a_window_through_feast(tmp_path: Path) -> None:
    from features.build_checks import WindowChecks
    from features.feast_repo import apply
    from features.window import build_window

    ws = Workspace.resolve(tmp_path / "home")
    import_events(ws, _cfg(_write(tmp_path, _log()), item_attribute_col="genre"))
    apply(ws)
    # the log's first day has no history at all: every feature is null, so relax the null check
    manifest = build_window(ws, dt.date(2026, 2, 3), 2, WindowChecks())
    assert [p["rows"] for p in manifest["train"]] == [3, 1] and manifest["rows_eval"] == 3
    assert manifest["train"][0]["null_rates"]["user_stats__impressions_7d"] == 1.0
    examples = pd.read_parquet(manifest["eval"]["path"])
    alice = examples[examples["user_id"] == int(stable_ids(pd.Series(["alice"]), "user")[0])]
    # alice on 02-03: 2 impressions (1 save) before the day, in 7 and 28 days
    assert alice["user_stats__impressions_7d"].tolist() == [2] and alice[
        "user_stats__saves_28d"
    ].tolist() == [1]
    carol = examples[examples["user_id"] == int(stable_ids(pd.Series(["carol"]), "user")[0])]
    assert carol["user_stats__impressions_7d"].isna().all()  # first seen that day: nothing known before
