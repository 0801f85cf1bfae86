"""The source-data layout of a workspace: day-partitioned parquet, written atomically.

```
<home>/source/impressions/date=YYYY-MM-DD/part-0.parquet   features.schema.IMPRESSION_SCHEMA
<home>/source/users/date=YYYY-MM-DD/part-0.parquet         user_stats snapshot taken at that day's 00:00
<home>/source/pins/date=YYYY-MM-DD/part-0.parquet          pin_stats snapshot taken at that day's 00:00
<home>/source/user_pins/date=YYYY-MM-DD/part-0.parquet     user_pin_stats snapshot (pairs seen in 28 days)
<home>/source/user_categories/date=YYYY-MM-DD/part-0.parquet  user_category_stats snapshot (likewise)
<home>/source/entities/{users,pins}.parquet                 entity attributes (country, category, ...)
```
A day's folder is published whole (temp dir + rename), so a reader never sees half a day.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import re
from collections.abc import Iterable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from ranking.core.atomic import atomic_dir, atomic_path
from ranking.core.errors import DataValidationError
from ranking.core.workspace import Workspace

IMPRESSIONS, USERS, PINS = "impressions", "users", "pins"
USER_PINS, USER_CATEGORIES = "user_pins", "user_categories"  # the history views' snapshots (issue 34)
SNAPSHOTS = (USERS, PINS, USER_PINS, USER_CATEGORIES)  # one per feature view, dated by its 00:00
TABLES = (IMPRESSIONS, *SNAPSHOTS)
_DAY_DIR = re.compile(r"^date=(\d{4}-\d{2}-\d{2})$")


def table_dir(ws: Workspace, table: str) -> Path:
    if table not in TABLES:
        raise ValueError(f"unknown source table {table!r}")
    return ws.source / table


def day_dir(ws: Workspace, table: str, day: dt.date) -> Path:
    return table_dir(ws, table) / f"date={day.isoformat()}"


def glob_pattern(ws: Workspace, table: str) -> str:
    """Absolute glob over every day of a table (what the Feast file source reads)."""
    return str(table_dir(ws, table) / "date=*" / "*.parquet")


def entities_path(ws: Workspace, kind: str) -> Path:
    if kind not in (USERS, PINS):
        raise ValueError(f"unknown entity kind {kind!r}")
    return ws.source / "entities" / f"{kind}.parquet"


def list_days(ws: Workspace, table: str) -> list[dt.date]:
    """Days present for a table (a day folder with at least one parquet file), sorted."""
    root = table_dir(ws, table)
    if not root.is_dir():
        return []
    days = []
    for child in root.iterdir():
        m = _DAY_DIR.match(child.name)
        if m and child.is_dir() and any(child.glob("*.parquet")):
            days.append(dt.date.fromisoformat(m.group(1)))
    return sorted(days)


def write_day(ws: Workspace, table: str, day: dt.date, data: pa.Table) -> Path:
    """Replace one day of a table atomically; returns the parquet path."""
    target = day_dir(ws, table, day)
    with atomic_dir(target) as tmp:
        pq.write_table(data, tmp / "part-0.parquet", compression="zstd")
    return target / "part-0.parquet"


def write_table_file(path: Path, data: pa.Table) -> None:
    with atomic_path(path) as tmp:
        pq.write_table(data, tmp, compression="zstd")


def day_files(ws: Workspace, table: str, day: dt.date) -> list[Path]:
    return sorted(day_dir(ws, table, day).glob("*.parquet"))


def read_day(ws: Workspace, table: str, day: dt.date) -> pa.Table:
    files = day_files(ws, table, day)
    if not files:
        raise DataValidationError(
            f"source {table} has no data for {day.isoformat()} (in {table_dir(ws, table)})"
        )
    return pa.concat_tables([pq.read_table(f) for f in files], promote_options="default")


def add_snapshot_time(ws: Workspace, column: str) -> int:
    """Give every snapshot day written before the snapshots carried their time as a feature the
    ``column`` (= its event_timestamp), so the feature views that read it find it; returns the days
    rewritten (each atomically, as ``write_day`` does). Idempotent: a day that has it is kept."""
    rewritten = 0
    for table in (USERS, PINS):
        for day in list_days(ws, table):
            for path in day_files(ws, table, day):
                if column in pq.read_schema(path).names:
                    continue
                data = pq.read_table(path)
                with atomic_path(path) as tmp:
                    pq.write_table(
                        data.append_column(column, data.column("event_timestamp")), tmp, compression="zstd"
                    )
                rewritten += 1
    return rewritten


def day_version(ws: Workspace, tables: Iterable[str], day: dt.date) -> str:
    """Content hash of a day's files across tables: equal bytes -> equal version."""
    h = hashlib.sha256()
    for table in tables:
        h.update(f"{table}\0".encode())
        for path in day_files(ws, table, day):
            h.update(path.name.encode() + b"\0")
            with open(path, "rb") as f:
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    h.update(chunk)
    return h.hexdigest()
