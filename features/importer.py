"""Import a real interaction log into the workspace layout that the synthetic generator writes.

Input: one row per (user, item, timestamp) with a 0/1 label, or a rating turned into a label
with a threshold. Rules (docs/data.md):
- ids: integer columns are kept; other ids are mapped to stable 63-bit integers (blake2b);
- timestamps: numbers are Unix time in the unit ``--time-unit`` names (s, ms, us, ns), or with
  ``auto`` (default) the unit the column's MEDIAN magnitude says: one outlier cannot re-date the
  log; strings are parsed as ISO 8601; naive times are UTC; a timestamp outside
  [1990-01-01, 2100-01-01) is refused, naming its rows;
- requests: ``--request-col`` when given, else one request per user and UTC day
  (``<user>-<YYYYMMDD>``); positions are the order of events within the request;
- duplicates: several rows of one (request, item) are one impression: earliest timestamp,
  saved if any of them is positive (the count merged is reported);
- features: the same daily snapshots as for synthetic data, derived point-in-time from this log.
The log is read into memory whole; a null or unparsable key is an error, never a dropped row.
The new source tree is built in a staging folder beside ``<home>/source`` and swapped in by
renames only when complete: a kill at any point leaves the old source data as it was.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import logging
import os
import secrets
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
from pydantic import BaseModel, ConfigDict

from features import derive, sources
from features.schema import IMPRESSION_SCHEMA
from ranking.core.atomic import fsync_dir
from ranking.core.errors import DataValidationError, RankerError
from ranking.core.workspace import Workspace

log = logging.getLogger(__name__)

UNKNOWN = "unknown"
TIME_UNITS = ("auto", "s", "ms", "us", "ns")
_PER_SECOND = {"s": 1.0, "ms": 1e3, "us": 1e6, "ns": 1e9}
# auto: the unit whose range holds the column's median |value| (decades apart for any date in
# 1973..5138, so the rule is unambiguous for real logs)
_AUTO_BELOW = (("s", 1e11), ("ms", 1e14), ("us", 1e17))
EARLIEST = dt.datetime(1990, 1, 1, tzinfo=dt.UTC)
LATEST = dt.datetime(2100, 1, 1, tzinfo=dt.UTC)  # exclusive


@dataclass(frozen=True)
class ImportConfig:
    events: Path
    user_col: str = "user_id"
    item_col: str = "item_id"
    time_col: str = "timestamp"
    label_col: str | None = None  # default "label" unless rating_col is given
    rating_col: str | None = None
    label_threshold: float | None = None
    request_col: str | None = None
    user_attribute_col: str | None = None
    item_attribute_col: str | None = None
    replace: bool = False
    time_unit: str = "auto"  # s | ms | us | ns | auto (numeric columns only)


def read_events(path: Path) -> pd.DataFrame:
    if not path.is_file():
        raise RankerError(f"events file not found: {path}")
    suffix = path.suffix.lower()
    try:
        if suffix == ".parquet":
            return pd.read_parquet(path)
        if suffix == ".csv":
            return pd.read_csv(path)
    except (OSError, ValueError, pa.ArrowException) as exc:
        raise DataValidationError(f"cannot read {path}: {exc}") from None
    raise RankerError(f"events file must be .parquet or .csv, got {path.name!r}")


def stable_ids(values: pd.Series, what: str) -> np.ndarray:
    """int64 ids: integers as they are, anything else hashed to a stable non-negative int64.
    Unsigned integers above the int64 range are refused, naming their rows: cast, they would wrap
    to negative ids that collide with nothing visible."""
    if pd.api.types.is_integer_dtype(values):
        if pd.api.types.is_unsigned_integer_dtype(values):
            too_big = (values > np.iinfo(np.int64).max).to_numpy(dtype=bool)
            if too_big.any():
                raise _ids_out_of_int64(values, what, too_big)
        return values.to_numpy(dtype=np.int64)
    as_str = values.astype(str)
    uniques = pd.unique(as_str)
    mapped = {
        u: int.from_bytes(hashlib.blake2b(u.encode(), digest_size=8).digest(), "big") >> 1 for u in uniques
    }
    if len(set(mapped.values())) != len(mapped):
        raise DataValidationError(f"{what} ids collide after hashing to int64; pass integer ids")
    return as_str.map(mapped).to_numpy(dtype=np.int64)


def _ids_out_of_int64(values: pd.Series, what: str, bad: np.ndarray) -> DataValidationError:
    rows = np.flatnonzero(bad)
    shown = ", ".join(f"row {int(i) + 1} ({values.iloc[int(i)]})" for i in rows[:5])
    return DataValidationError(
        f"{len(rows)} {what} ids in column {values.name!r} do not fit a signed 64-bit integer"
        f" (above {np.iinfo(np.int64).max}): {shown}{' ...' if len(rows) > 5 else ''} (data rows"
        " counted from 1); renumber them, or give them as text to have them hashed to stable ids"
    )


def numeric_time_unit(values: pd.Series) -> str:
    """The unit of numeric Unix times, from the median magnitude (robust to outliers)."""
    median = float(np.nanmedian(np.abs(values.to_numpy(dtype=np.float64))))
    return next((unit for unit, below in _AUTO_BELOW if median < below), "ns")


def _shown(value: Any) -> str:
    if isinstance(value, (int, float, np.integer, np.floating)):
        return f"{float(value):g}"
    return repr(str(value))


def _out_of_range(
    column: str, bad: np.ndarray, values: pd.Series, how: str, hint: str
) -> DataValidationError:
    rows = np.flatnonzero(bad)
    shown = ", ".join(f"row {int(i) + 1} ({_shown(values.iloc[int(i)])})" for i in rows[:5])
    return DataValidationError(
        f"{len(rows)} timestamps in column {column!r} fall outside {EARLIEST.date()}..{LATEST.date()}"
        f"{how}: {shown}{' ...' if len(rows) > 5 else ''} (data rows counted from 1){hint}"
    )


def parse_timestamps(values: pd.Series, column: str, unit: str = "auto") -> tuple[pd.Series, str]:
    """UTC timestamps of a column and how they were read (a unit, "iso8601" or "datetime")."""
    if unit not in TIME_UNITS:
        raise RankerError(f"time unit must be one of {', '.join(TIME_UNITS)}, got {unit!r}")
    if pd.api.types.is_datetime64_any_dtype(values):
        ts, how = pd.to_datetime(values, utc=True), "datetime"
    elif pd.api.types.is_numeric_dtype(values):
        how = numeric_time_unit(values) if unit == "auto" else unit
        seconds = values.to_numpy(dtype=np.float64) / _PER_SECOND[how]
        # checked as numbers first: a value far out (1e15 s) must be an error naming its row,
        # not pandas' OutOfBoundsDatetime
        bad = ~((seconds >= EARLIEST.timestamp()) & (seconds < LATEST.timestamp()))
        if bad.any():
            read = f" (read as Unix {how}" + (", auto: the median's magnitude)" if unit == "auto" else ")")
            raise _out_of_range(column, bad, values, read, "; pass --time-unit if the unit is wrong")
        ts = pd.to_datetime(values, unit=how, utc=True)
    else:
        if unit != "auto":
            raise RankerError(f"--time-unit {unit} applies to numeric timestamps; {column!r} holds text")
        parsed = pd.to_datetime(values, utc=True, errors="coerce", format="ISO8601")
        bad = parsed.isna() & values.notna()
        if bad.any():
            raise DataValidationError(
                f"{int(bad.sum())} unparsable timestamps in column {column!r}, e.g. {values[bad].iloc[0]!r}"
            )
        ts, how = parsed, "iso8601"
    outside = ((ts < EARLIEST) | (ts >= LATEST)).to_numpy()
    if outside.any():
        raise _out_of_range(column, outside, values, "", "")
    return ts.astype("datetime64[us, UTC]"), how


def labels(frame: pd.DataFrame, cfg: ImportConfig) -> np.ndarray:
    if cfg.rating_col is not None:
        if cfg.label_threshold is None:
            raise RankerError("--rating-col needs --label-threshold (positive when rating >= threshold)")
        rating = pd.to_numeric(frame[cfg.rating_col], errors="coerce")
        if rating.isna().any():
            raise DataValidationError(f"{int(rating.isna().sum())} non-numeric ratings in {cfg.rating_col!r}")
        return (rating >= cfg.label_threshold).to_numpy(dtype=np.int8)
    if cfg.label_threshold is not None:
        raise RankerError("--label-threshold applies to --rating-col only")
    col = cfg.label_col or "label"
    raw = pd.to_numeric(frame[col], errors="coerce")
    bad = ~raw.isin([0, 1])
    if bad.any():
        raise DataValidationError(
            f"{int(bad.sum())} labels in {col!r} are not 0/1, e.g. {frame[col][bad].iloc[0]!r};"
            " use --rating-col with --label-threshold for ratings"
        )
    return raw.to_numpy(dtype=np.int8)


def to_impressions(events: pd.DataFrame, cfg: ImportConfig) -> tuple[pd.DataFrame, int, str]:
    """Normalise the log to IMPRESSION_SCHEMA columns; returns (impressions, duplicates merged,
    how the timestamps were read)."""
    label_col = cfg.label_col or ("label" if cfg.rating_col is None else None)
    needed = [cfg.user_col, cfg.item_col, cfg.time_col]
    needed += [c for c in (label_col, cfg.rating_col, cfg.request_col) if c]
    needed += [c for c in (cfg.user_attribute_col, cfg.item_attribute_col) if c]
    missing = [c for c in needed if c not in events.columns]
    if missing:
        raise DataValidationError(f"events file lacks columns {missing}; it has {list(events.columns)}")
    if events.empty:
        raise DataValidationError("the events file has no rows")
    for c in (cfg.user_col, cfg.item_col, cfg.time_col):
        nulls = int(events[c].isna().sum())
        if nulls:
            raise DataValidationError(f"{nulls} rows have no {c!r}")
    ts, time_unit = parse_timestamps(events[cfg.time_col], cfg.time_col, cfg.time_unit)
    out = pd.DataFrame(
        {
            "user_id": stable_ids(events[cfg.user_col], "user"),
            "pin_id": stable_ids(events[cfg.item_col], "item"),
            "event_timestamp": ts.to_numpy(),
            "saved": labels(events, cfg),
        }
    )
    out["event_timestamp"] = pd.to_datetime(out["event_timestamp"], utc=True)
    if cfg.request_col:
        out["request_id"] = events[cfg.request_col].astype(str).to_numpy()
    else:
        out["request_id"] = out["user_id"].astype(str) + "-" + out["event_timestamp"].dt.strftime("%Y%m%d")
    rows = len(out)
    out = (
        out.groupby(["request_id", "pin_id"], sort=False, as_index=False)
        .agg(user_id=("user_id", "first"), event_timestamp=("event_timestamp", "min"), saved=("saved", "max"))
        .sort_values(["request_id", "event_timestamp", "pin_id"], kind="stable", ignore_index=True)
    )
    out["position"] = out.groupby("request_id", sort=False).cumcount().astype(np.int32)
    out["saved"] = out["saved"].astype(np.int8)
    return out[list(IMPRESSION_SCHEMA.names)], rows - len(out), time_unit


def _entities(
    events: pd.DataFrame, imps: pd.DataFrame, cfg: ImportConfig
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Entity attributes: first-seen time as creation; the optional attribute column, else 'unknown'."""

    def one(key: str, col: str | None, ids: np.ndarray, attr: str) -> pd.DataFrame:
        first = imps.groupby(key)["event_timestamp"].min()
        frame = pd.DataFrame(
            {key: first.index.to_numpy(dtype=np.int64), "created_timestamp": first.to_numpy()}
        )
        if col:
            values = pd.Series(events[col].astype("string").fillna(UNKNOWN).to_numpy(), index=ids)
            latest = values.groupby(level=0).last()
            frame[attr] = latest.reindex(frame[key]).fillna(UNKNOWN).to_numpy()
        else:
            frame[attr] = UNKNOWN
        return frame

    user_ids = stable_ids(events[cfg.user_col], "user")
    item_ids = stable_ids(events[cfg.item_col], "item")
    return one("user_id", cfg.user_attribute_col, user_ids, "country"), one(
        "pin_id", cfg.item_attribute_col, item_ids, "category"
    )


STAGING_PREFIX = ".import-staging-"
REPLACED_PREFIX = ".source.replaced-"
SOURCE_VERSIONS = ".source-versions"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    return True


def recover_source(ws: Workspace) -> None:
    """Finish what a killed import left: restore the old source when the kill fell between the
    two renames of the swap, and delete staging folders whose importer is gone."""
    root = ws.root
    if not root.is_dir():
        return
    replaced = sorted(root.glob(REPLACED_PREFIX + "*"), key=lambda p: p.stat().st_mtime)
    if replaced and not ws.source.exists():
        os.replace(replaced[-1], ws.source)  # the swap did not finish: the old data stays
        log.warning("restored %s from %s (an import was killed mid-swap)", ws.source, replaced[-1].name)
        replaced = replaced[:-1]
    for old in replaced:
        shutil.rmtree(old, ignore_errors=True)
    for staging in root.glob(STAGING_PREFIX + "*"):
        pid = staging.name[len(STAGING_PREFIX) :].split("-", 1)[0]
        if not pid.isdigit() or not _pid_alive(int(pid)):
            if staging.is_symlink():
                staging.unlink()
            else:
                shutil.rmtree(staging, ignore_errors=True)
            log.info("removed %s (left by a killed import)", staging.name)
    live = _own_version(ws)
    for version in (root / SOURCE_VERSIONS).glob("*"):
        pid = version.name.split("-")[1] if version.name.count("-") >= 2 else ""
        if version != live and not (pid.isdigit() and _pid_alive(int(pid))):
            shutil.rmtree(version, ignore_errors=True)  # published by an import killed before its link


def _swap_in(ws: Workspace, staged: Path) -> None:
    """Publish the staged source tree as ``<home>/source`` in one atomic step: ``source`` is a
    symlink to a folder under ``<home>/.source-versions/``, and the swap is a rename of a new link
    over it, so a reader (or a kill) sees the whole old tree or the whole new one, never neither.
    The previous version is deleted after the swap (a link to a folder of the user's own outside
    ``.source-versions`` is replaced, its target left alone)."""
    versions = ws.root / SOURCE_VERSIONS
    versions.mkdir(exist_ok=True)
    target = versions / f"{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}-{secrets.token_hex(4)}"
    os.rename(staged, target)
    previous = _own_version(ws)
    if ws.source.exists() and not ws.source.is_symlink():
        # a workspace from before versioned sources (or ranker data synth): a folder cannot be
        # renamed over, so it goes aside first; recover_source puts it back if we die in between
        previous = ws.root / f"{REPLACED_PREFIX}{os.getpid()}-{secrets.token_hex(4)}"
        os.replace(ws.source, previous)
    link = ws.root / f"{STAGING_PREFIX}{os.getpid()}-{secrets.token_hex(4)}.link"
    os.symlink(Path(SOURCE_VERSIONS) / target.name, link, target_is_directory=True)
    os.replace(link, ws.source)
    fsync_dir(ws.root)
    if previous is not None:
        shutil.rmtree(previous, ignore_errors=True)


def _own_version(ws: Workspace) -> Path | None:
    """The folder under ``.source-versions`` that ``source`` links to, if it is one of ours."""
    if not ws.source.is_symlink():
        return None
    versions = (ws.root / SOURCE_VERSIONS).resolve()
    target = ws.source.resolve()
    return target if target.parent == versions else None


class ImportSummary(BaseModel):
    """``ranker data import``: the event log read, the impressions and snapshots written."""

    model_config = ConfigDict(extra="forbid", ser_json_inf_nan="constants")

    events: str
    rows_in: int
    impressions: int
    duplicates_merged: int
    time_unit: str
    requests: int
    users: int
    pins: int
    save_rate: float
    start: str
    """the first day (YYYY-MM-DD)"""
    end: str
    days: int
    snapshot_days: int
    source: str
    replaced: bool
    duration_seconds: float


def import_events(ws: Workspace, cfg: ImportConfig) -> ImportSummary:
    started = time.perf_counter()
    recover_source(ws)
    if sources.list_days(ws, sources.IMPRESSIONS) and not cfg.replace:
        raise RankerError(f"{ws.source} already holds source data: use a fresh --home or --replace")
    events = read_events(cfg.events)
    imps, merged, time_unit = to_impressions(events, cfg)
    users, pins = _entities(events, imps, cfg)
    ws.root.mkdir(parents=True, exist_ok=True)
    staging_root = ws.root / f"{STAGING_PREFIX}{os.getpid()}-{secrets.token_hex(4)}"
    staging = Workspace(staging_root)  # the same layout, written where no reader looks
    try:
        days = imps["event_timestamp"].dt.date
        for day, frame in imps.groupby(days, sort=True):
            table = pa.Table.from_pandas(
                frame.reset_index(drop=True), schema=IMPRESSION_SCHEMA, preserve_index=False
            )
            sources.write_day(staging, sources.IMPRESSIONS, day, table)
        snapshot_days = derive.derive_all(staging, users, pins)
        sources.write_table_file(sources.entities_path(staging, sources.USERS), pa.Table.from_pandas(users))
        sources.write_table_file(sources.entities_path(staging, sources.PINS), pa.Table.from_pandas(pins))
        _swap_in(ws, staging.source)
    finally:
        shutil.rmtree(staging_root, ignore_errors=True)
    n_days = int(days.nunique())
    return ImportSummary(
        events=str(cfg.events),
        rows_in=len(events),
        impressions=len(imps),
        duplicates_merged=merged,
        time_unit=time_unit,
        requests=int(imps["request_id"].nunique()),
        users=len(users),
        pins=len(pins),
        save_rate=float(imps["saved"].mean()),
        start=str(days.min()),
        end=str(days.max()),
        days=n_days,
        snapshot_days=len(snapshot_days),
        source=str(ws.source),
        replaced=bool(cfg.replace),
        duration_seconds=round(time.perf_counter() - started, 3),
    )
