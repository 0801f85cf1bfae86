"""Daily feature snapshots derived from the impression log (shared by synth and import).

The snapshot dated D is taken at D 00:00 UTC from impressions in [D-7, D) and [D-28, D) (and
says so in its ``as_of`` column, which the window joins into every row), so it holds nothing from
day D or later: joined point-in-time (with a 24 h TTL) it serves exactly
the impressions of day D. Entities are included once created (created_timestamp <= D 00:00)
and while their last impression is at most 28 days old (never-shown entities stay included).

The history snapshots (issue 34) hold one row per user x pin pair and per user x category pair
(the category is the pin's, from the pin attributes when the impression is added) with at least
one impression in [D-28, D): a pair seen three days ago still has a row on D (its 7-day counts
may be 0), one last seen 29 days ago has none (the window reads its absence as 0). Their rates
are smoothed, saves / (impressions + 1). A snapshot day needs the 28 days of impressions before
it: :func:`derive_all` starts from the log's first day, so the first 28 days' history is short
where the log has nothing earlier.
"""

from __future__ import annotations

import datetime as dt
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa

from features import sources
from features.schema import HISTORY_NUMERIC, PIN_NUMERIC, SNAPSHOT_TIME, USER_NUMERIC
from ranking.core.errors import RankerError
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


def _pair_schema(second: tuple[str, pa.DataType]) -> pa.Schema:
    """A history view's daily snapshot: the pair's keys, the snapshot time, the counts and rates."""
    return pa.schema(
        [
            ("user_id", pa.int64()),
            second,
            ("event_timestamp", pa.timestamp("us", tz="UTC")),
            *(
                (name, pa.float64() if name.startswith("save_rate") else pa.int64())
                for name in HISTORY_NUMERIC
            ),
            (SNAPSHOT_TIME, pa.timestamp("us", tz="UTC")),
        ]
    )


USER_PIN_SNAPSHOT_SCHEMA = _pair_schema(("pin_id", pa.int64()))
USER_CATEGORY_SNAPSHOT_SCHEMA = _pair_schema(("category", pa.string()))
# pair snapshot table -> its second key (the first is user_id)
PAIR_KEYS = {sources.USER_PINS: "pin_id", sources.USER_CATEGORIES: "category"}
PAIR_SCHEMAS = {
    sources.USER_PINS: USER_PIN_SNAPSHOT_SCHEMA,
    sources.USER_CATEGORIES: USER_CATEGORY_SNAPSHOT_SCHEMA,
}
UNKNOWN_CATEGORY = "unknown"  # a pin without attributes (the importer's value for a missing one)


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
        # snapshot table -> the day's counts per pair (index: user_id and the pair's second key)
        self._pairs: OrderedDict[dt.date, dict[str, pd.DataFrame]] = OrderedDict()
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
        self._pairs[day] = self._pair_counts(impressions)
        while len(self._daily) > max(WINDOWS_DAYS):
            self._daily.popitem(last=False)
        while len(self._pairs) > max(WINDOWS_DAYS):
            self._pairs.popitem(last=False)

    def _pair_counts(self, impressions: pd.DataFrame) -> dict[str, pd.DataFrame]:
        """The day's impressions and saves per user x pin and per user x (the pin's) category."""
        category = (
            self._attrs["pin"]["category"]
            .astype("string")
            .reindex(impressions["pin_id"].to_numpy())
            .fillna(UNKNOWN_CATEGORY)
            .to_numpy(dtype=object)
        )
        frame = pd.DataFrame(
            {
                "user_id": impressions["user_id"].to_numpy(dtype="int64"),
                "pin_id": impressions["pin_id"].to_numpy(dtype="int64"),
                "category": category,
                "saved": impressions["saved"].to_numpy(dtype="int64"),
            }
        )
        out = {}
        for table, key in PAIR_KEYS.items():
            g = frame.groupby(["user_id", key], sort=False)["saved"]
            out[table] = pd.DataFrame({"impressions": g.size(), "saves": g.sum().astype("int64")})
        return out

    def snapshots(self, day: dt.date) -> tuple[pa.Table, pa.Table]:
        """(user snapshot, pin snapshot) taken at ``day`` 00:00 from the days added before it."""
        return self._snapshot(day, "user", _USER), self._snapshot(day, "pin", _PIN)

    def pair_snapshots(self, day: dt.date) -> dict[str, pa.Table]:
        """Snapshot table (user_pins, user_categories) -> its snapshot taken at ``day`` 00:00:
        every pair with an impression in the 28 days before, sorted by its keys."""
        return {table: self._pair_snapshot(day, table) for table in PAIR_KEYS}

    def _pair_snapshot(self, day: dt.date, table: str) -> pa.Table:
        ts = day_start(day)
        key = PAIR_KEYS[table]
        totals = {}
        for days in WINDOWS_DAYS:
            frames = [
                c[table] for d, c in self._pairs.items() if ts - pd.Timedelta(days=days) <= day_start(d) < ts
            ]
            totals[days] = pd.concat(frames).groupby(level=[0, 1]).sum() if frames else None
        longest = totals[max(WINDOWS_DAYS)]
        if longest is None:
            return PAIR_SCHEMAS[table].empty_table()
        longest = longest.sort_index()
        out = pd.DataFrame(
            {
                "user_id": longest.index.get_level_values(0).to_numpy(dtype="int64"),
                key: longest.index.get_level_values(1).to_numpy(),
            }
        )
        out["event_timestamp"] = ts
        for days in WINDOWS_DAYS:
            found = totals[days]
            if found is None:  # no impression in the horizon (a 7-day gap)
                imp = sav = np.zeros(len(out), dtype="int64")
            else:
                counts = found.reindex(longest.index, fill_value=0)
                imp = counts["impressions"].to_numpy(dtype="int64")
                sav = counts["saves"].to_numpy(dtype="int64")
            out[f"impressions_{days}d"] = imp
            out[f"saves_{days}d"] = sav
            out[f"save_rate_{days}d"] = sav / (imp + 1.0)
        out[SNAPSHOT_TIME] = ts
        return pa.Table.from_pandas(out, schema=PAIR_SCHEMAS[table], preserve_index=False)

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
    write_pair_snapshots(ws, builder, day)


def write_pair_snapshots(ws: Workspace, builder: SnapshotBuilder, day: dt.date) -> None:
    """The day's history snapshots (an empty file where no pair is active: the day is present)."""
    for table, data in builder.pair_snapshots(day).items():
        sources.write_day(ws, table, day, data)


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


def missing_history_days(ws: Workspace) -> list[dt.date]:
    """Snapshot days (of user_stats) that lack a history snapshot: a workspace derived before the
    history views existed (issue 34)."""
    have = set.intersection(*(set(sources.list_days(ws, t)) for t in PAIR_KEYS))
    return [d for d in sources.list_days(ws, sources.USERS) if d not in have]


def derive_history(ws: Workspace) -> list[dt.date]:
    """Write the history snapshots a workspace derived before they existed lacks, from its
    impressions and pin attributes (``source/entities/pins.parquet``); the user and pin
    snapshots are left as they are. Returns the days written (none when nothing is missing)."""
    missing = set(missing_history_days(ws))
    if not missing:
        return []
    pins_path = sources.entities_path(ws, sources.PINS)
    if not pins_path.is_file():
        raise RankerError(
            f"{ws.source} was built before the history features (issue 34) and has no pin attributes"
            f" ({pins_path}) to derive them from: rebuild it with `ranker data synth` or `ranker data import`"
        )
    pins = pd.read_parquet(pins_path)
    users = pd.DataFrame({"user_id": pd.Series(dtype="int64"), "country": pd.Series(dtype="string")})
    users["created_timestamp"] = pd.Series(dtype="datetime64[ns, UTC]")
    builder = SnapshotBuilder(users, pins)
    impression_days = set(sources.list_days(ws, sources.IMPRESSIONS))
    written = []
    for day in sorted(impression_days | missing):
        if day in missing:
            write_pair_snapshots(ws, builder, day)
            written.append(day)
        if day in impression_days:
            table = sources.read_day(ws, sources.IMPRESSIONS, day)
            builder.add_day(day, table.select(["user_id", "pin_id", "saved"]).to_pandas())
    return written
