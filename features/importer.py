"""Import a real interaction log into the workspace layout that the synthetic generator writes.

Input: one row per (user, item, timestamp) with a 0/1 label, or a rating turned into a label
with a threshold. Rules (docs/data.md):
- ids: integer columns are kept; other ids are mapped to stable 63-bit integers (blake2b);
- timestamps: numbers are Unix seconds (milliseconds when above 1e11), strings are parsed as
  ISO 8601; naive times are UTC;
- requests: ``--request-col`` when given, else one request per user and UTC day
  (``<user>-<YYYYMMDD>``); positions are the order of events within the request;
- duplicates: several rows of one (request, item) are one impression: earliest timestamp,
  saved if any of them is positive (the count merged is reported);
- features: the same daily snapshots as for synthetic data, derived point-in-time from this log.
The log is read into memory whole; a null or unparsable key is an error, never a dropped row.
"""

from __future__ import annotations

import hashlib
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from features import derive, sources
from features.schema import IMPRESSION_SCHEMA
from ranking.core.errors import DataValidationError, RankerError
from ranking.core.workspace import Workspace

UNKNOWN = "unknown"


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
    """int64 ids: integers as they are, anything else hashed to a stable non-negative int64."""
    if pd.api.types.is_integer_dtype(values):
        return values.to_numpy(dtype=np.int64)
    as_str = values.astype(str)
    uniques = pd.unique(as_str)
    mapped = {
        u: int.from_bytes(hashlib.blake2b(u.encode(), digest_size=8).digest(), "big") >> 1 for u in uniques
    }
    if len(set(mapped.values())) != len(mapped):
        raise DataValidationError(f"{what} ids collide after hashing to int64; pass integer ids")
    return as_str.map(mapped).to_numpy(dtype=np.int64)


def parse_timestamps(values: pd.Series, column: str) -> pd.Series:
    if pd.api.types.is_datetime64_any_dtype(values):
        ts = pd.to_datetime(values, utc=True)
    elif pd.api.types.is_numeric_dtype(values):
        unit = "ms" if float(values.abs().max()) > 1e11 else "s"
        ts = pd.to_datetime(values, unit=unit, utc=True)
    else:
        parsed = pd.to_datetime(values, utc=True, errors="coerce", format="ISO8601")
        bad = parsed.isna() & values.notna()
        if bad.any():
            raise DataValidationError(
                f"{int(bad.sum())} unparsable timestamps in column {column!r}, e.g. {values[bad].iloc[0]!r}"
            )
        ts = parsed
    return ts.astype("datetime64[us, UTC]")


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


def to_impressions(events: pd.DataFrame, cfg: ImportConfig) -> tuple[pd.DataFrame, int]:
    """Normalise the log to IMPRESSION_SCHEMA columns; returns (impressions, duplicates merged)."""
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
    ts = parse_timestamps(events[cfg.time_col], cfg.time_col)
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
    return out[list(IMPRESSION_SCHEMA.names)], rows - len(out)


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


def import_events(ws: Workspace, cfg: ImportConfig) -> dict[str, Any]:
    started = time.perf_counter()
    if sources.list_days(ws, sources.IMPRESSIONS) and not cfg.replace:
        raise RankerError(f"{ws.source} already holds source data: use a fresh --home or --replace")
    events = read_events(cfg.events)
    imps, merged = to_impressions(events, cfg)
    users, pins = _entities(events, imps, cfg)
    if cfg.replace and ws.source.exists():
        shutil.rmtree(ws.source)
    days = imps["event_timestamp"].dt.date
    for day, frame in imps.groupby(days, sort=True):
        table = pa.Table.from_pandas(
            frame.reset_index(drop=True), schema=IMPRESSION_SCHEMA, preserve_index=False
        )
        sources.write_day(ws, sources.IMPRESSIONS, day, table)
    snapshot_days = derive.derive_all(ws, users, pins)
    sources.write_table_file(sources.entities_path(ws, sources.USERS), pa.Table.from_pandas(users))
    sources.write_table_file(sources.entities_path(ws, sources.PINS), pa.Table.from_pandas(pins))
    n_days = int(days.nunique())
    return {
        "events": str(cfg.events),
        "rows_in": len(events),
        "impressions": len(imps),
        "duplicates_merged": merged,
        "requests": int(imps["request_id"].nunique()),
        "users": len(users),
        "pins": len(pins),
        "save_rate": float(imps["saved"].mean()),
        "start": str(days.min()),
        "end": str(days.max()),
        "days": n_days,
        "snapshot_days": len(snapshot_days),
        "source": str(ws.source),
        "duration_seconds": round(time.perf_counter() - started, 3),
    }
