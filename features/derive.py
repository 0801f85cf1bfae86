"""Daily feature snapshots derived from the impression log (shared by synth and import).

The snapshot dated D is taken at D 00:00 UTC from impressions in [D-7, D) and [D-28, D) (and
says so in its ``as_of`` column, which the window joins into every row), so it holds nothing from
day D or later: joined point-in-time (with a 24 h TTL) it serves exactly
the impressions of day D. Entities are included once created (created_timestamp <= D 00:00)
and while their last impression is at most 28 days old (never-shown entities stay included).
"""

from __future__ import annotations

import datetime as dt
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa

from features import sources
from features.schema import PIN_NUMERIC, SNAPSHOT_TIME, USER_NUMERIC
from ranking.core.workspace import Workspace

WINDOWS_DAYS = (7, 28)
_UTC = dt.UTC


def day_start(day: dt.date) -> pd.Timestamp:
    return pd.Timestamp(dt.datetime(day.year, day.month, day.day, tzinfo=_UTC))


def _snapshot_schema(key: str, categorical: str, numeric: tuple[str, ...]) -> pa.Schema:
    """A feature view's daily snapshot: its key, the snapshot time, one categorical attribute and
    the numeric features named in features/schema.py (counts int64, rates float64)."""
    return pa.schema(
        [
            (key, pa.int64()),
            ("event_timestamp", pa.timestamp("us", tz="UTC")),
            (categorical, pa.string()),
            *((name, pa.float64() if name.startswith("save_rate") else pa.int64()) for name in numeric),
            # the snapshot time again, as a feature: the window carries it into every row
            (SNAPSHOT_TIME, pa.timestamp("us", tz="UTC")),
        ]
    )


USER_SNAPSHOT_SCHEMA = _snapshot_schema("user_id", "country", USER_NUMERIC)
PIN_SNAPSHOT_SCHEMA = _snapshot_schema("pin_id", "category", PIN_NUMERIC)


@dataclass
class _Entity:
    key: str  # user_id | pin_id
    attribute: str  # country | category
    schema: pa.Schema


_USER = _Entity("user_id", "country", USER_SNAPSHOT_SCHEMA)
_PIN = _Entity("pin_id", "category", PIN_SNAPSHOT_SCHEMA)


class SnapshotBuilder:
    """Feed days of impressions in order with :meth:`add_day`; ask for the snapshot of the next
    day with :meth:`snapshots`. Keeps only 28 days of per-entity daily counts in memory."""

    def __init__(self, users: pd.DataFrame, pins: pd.DataFrame) -> None:
        # users: user_id, country, created_timestamp; pins: pin_id, category, created_timestamp
        self._attrs = {"user": users.set_index("user_id"), "pin": pins.set_index("pin_id")}
        self._daily: OrderedDict[dt.date, dict[str, pd.DataFrame]] = OrderedDict()
        self._last_seen: dict[str, pd.Series] = {
            "user": pd.Series(dtype="datetime64[ns, UTC]"),
            "pin": pd.Series(dtype="datetime64[ns, UTC]"),
        }

    def set_entities(self, users: pd.DataFrame, pins: pd.DataFrame) -> None:
        """Replace the entity attributes (the synthetic catalogue grows every day)."""
        self._attrs = {"user": users.set_index("user_id"), "pin": pins.set_index("pin_id")}

    def add_day(self, day: dt.date, impressions: pd.DataFrame) -> None:
        if self._daily and day <= next(reversed(self._daily)):
            raise ValueError(f"days must be added in order: {day} after {next(reversed(self._daily))}")
        counts = {}
        for name, ent in (("user", _USER), ("pin", _PIN)):
            g = impressions.groupby(ent.key, sort=False)["saved"]
            counts[name] = pd.DataFrame({"impressions": g.size(), "saves": g.sum().astype("int64")})
            seen = pd.Series(day_start(day), index=counts[name].index)
            last = self._last_seen[name]
            self._last_seen[name] = (
                seen if last.empty else pd.concat([last[~last.index.isin(seen.index)], seen])
            )
        self._daily[day] = counts
        while len(self._daily) > max(WINDOWS_DAYS):
            self._daily.popitem(last=False)

    def snapshots(self, day: dt.date) -> tuple[pa.Table, pa.Table]:
        """(user snapshot, pin snapshot) taken at ``day`` 00:00 from the days added before it."""
        return self._snapshot(day, "user", _USER), self._snapshot(day, "pin", _PIN)

    def _snapshot(self, day: dt.date, name: str, ent: _Entity) -> pa.Table:
        ts = day_start(day)
        attrs = self._attrs[name]
        created = pd.to_datetime(attrs["created_timestamp"], utc=True)
        last = self._last_seen[name].reindex(attrs.index)
        stale = last.notna() & (last < ts - pd.Timedelta(days=max(WINDOWS_DAYS)))
        keep = attrs[(created <= ts) & ~stale.to_numpy()]
        out = pd.DataFrame({ent.key: keep.index.to_numpy(dtype="int64")})
        out["event_timestamp"] = ts
        out[ent.attribute] = keep[ent.attribute].astype("string").to_numpy()
        for days in WINDOWS_DAYS:
            frames = [
                c[name] for d, c in self._daily.items() if ts - pd.Timedelta(days=days) <= day_start(d) < ts
            ]
            total = (
                pd.concat(frames).groupby(level=0).sum()
                if frames
                else pd.DataFrame(
                    {"impressions": pd.Series(dtype="int64"), "saves": pd.Series(dtype="int64")}
                )
            )
            total = total.reindex(out[ent.key]).fillna(0).astype("int64")
            imp, sav = total["impressions"].to_numpy(), total["saves"].to_numpy()
            out[f"impressions_{days}d"] = imp
            out[f"saves_{days}d"] = sav
            out[f"save_rate_{days}d"] = np.divide(sav, imp, out=np.zeros(len(imp)), where=imp > 0)
        if name == "pin":
            age = (ts - created[keep.index]).dt.days
            out["age_days"] = age.to_numpy(dtype="int64")
        out[SNAPSHOT_TIME] = ts
        return pa.Table.from_pandas(out, schema=ent.schema, preserve_index=False)


def write_snapshots(ws: Workspace, builder: SnapshotBuilder, day: dt.date) -> None:
    users, pins = builder.snapshots(day)
    sources.write_day(ws, sources.USERS, day, users)
    sources.write_day(ws, sources.PINS, day, pins)


def derive_all(ws: Workspace, users: pd.DataFrame, pins: pd.DataFrame) -> list[dt.date]:
    """Rebuild every snapshot from the impressions in the workspace (one pass, day by day).

    Writes a snapshot for each impression day and for the day after the last one (the
    features as of now, which `materialize` loads for serving). Returns the snapshot days."""
    days = sources.list_days(ws, sources.IMPRESSIONS)
    builder = SnapshotBuilder(users, pins)
    written = []
    for day in days:
        write_snapshots(ws, builder, day)
        written.append(day)
        table = sources.read_day(ws, sources.IMPRESSIONS, day)
        builder.add_day(day, table.select(["user_id", "pin_id", "saved"]).to_pandas())
    if days:
        nxt = days[-1] + dt.timedelta(days=1)
        write_snapshots(ws, builder, nxt)
        written.append(nxt)
    return written
