"""Seeded example windows that follow the window contract (docs/architecture.md), for trainer
tests and the training benchmark. Test data, not a mock: real parquet partitions + manifest.

Saves come from hidden per-user and per-pin effects plus one dense signal, so a model that learns
beats chance (AUC > 0.5) and embeddings matter.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from features.schema import (
    DENSE_FEATURES,
    EXAMPLE_COLUMNS,
    HISTORY_FEATURES,
    IMPRESSION_SCHEMA,
    PIN_VIEW,
    SNAPSHOT_COLUMNS,
    USER_VIEW,
)


def current_feature_version() -> str:
    """The checkout's feature-definition version: these windows follow today's schema."""
    from features.feast_repo import feature_version

    return feature_version()


COUNTRIES = np.array(["US", "DE", "FR", "BR", "JP", "IN"])
CATEGORIES = np.array(["food", "diy", "travel", "fashion", "art", "cars", "garden"])


def _schema() -> pa.Schema:
    fields = list(IMPRESSION_SCHEMA)
    fields.append(pa.field(f"{USER_VIEW}__country", pa.string()))
    fields.append(pa.field(f"{PIN_VIEW}__category", pa.string()))
    for name in (*DENSE_FEATURES, *HISTORY_FEATURES):
        kind = pa.float64() if "rate" in name else pa.int64()
        fields.append(pa.field(name, kind))
    fields += [pa.field(name, pa.timestamp("us", tz="UTC")) for name in SNAPSHOT_COLUMNS]
    schema = pa.schema(fields)
    assert schema.names == list(EXAMPLE_COLUMNS)
    return schema


def day_table(
    day: dt.date, rows: int, seed: int, users: int = 300, pins: int = 500, slate: int = 10
) -> pa.Table:
    world = np.random.default_rng(seed)  # hidden effects: the same every day
    user_effect = world.normal(0, 1.0, users)
    pin_effect = world.normal(0, 1.0, pins)
    rng = np.random.default_rng([seed, day.toordinal()])
    n_req = max(1, rows // slate)
    user = np.repeat(rng.integers(0, users, n_req), slate)[:rows]
    req = np.repeat(np.arange(n_req), slate)[:rows]
    if len(user) < rows:  # pad the last request
        extra = rows - len(user)
        user = np.concatenate([user, np.full(extra, user[-1] if len(user) else 0)])
        req = np.concatenate([req, np.full(extra, n_req)])
    pin = rng.zipf(1.3, rows) % pins
    signal = rng.normal(0, 1, rows)
    logit = -3.0 + user_effect[user] + pin_effect[pin] + 0.8 * signal
    saved = (rng.random(rows) < 1 / (1 + np.exp(-logit))).astype(np.int8)
    ts = np.datetime64(day.isoformat(), "us") + rng.integers(0, 86_400_000_000, rows).astype(
        "timedelta64[us]"
    )
    cols: dict[str, np.ndarray | pa.Array] = {
        "request_id": np.array([f"{day.isoformat()}-{r}" for r in req], dtype=object),
        "user_id": user.astype(np.int64) + 1000,
        "pin_id": pin.astype(np.int64) + 10_000,
        "event_timestamp": pa.array(ts, pa.timestamp("us", tz="UTC")),
        "position": np.tile(np.arange(slate, dtype=np.int32), n_req + 1)[:rows],
        "saved": saved,
        f"{USER_VIEW}__country": COUNTRIES[user % len(COUNTRIES)].astype(object),
        f"{PIN_VIEW}__category": CATEGORIES[pin % len(CATEGORIES)].astype(object),
    }
    for j, name in enumerate(DENSE_FEATURES):
        if "rate" in name:
            values = np.clip(0.03 + 0.01 * rng.normal(size=rows), 0, 1)
            if j == 2:
                values = signal  # the dense signal the labels depend on
            cols[name] = values.astype(np.float64)
        else:
            cols[name] = rng.poisson(20 * (j + 1), rows).astype(np.int64)
    cols.update(_history(saved, seed, day))
    snapshot = np.datetime64(day.isoformat(), "us")  # each view's snapshot of the day, at 00:00
    for name in SNAPSHOT_COLUMNS:
        cols[name] = pa.array(np.full(rows, snapshot), pa.timestamp("us", tz="UTC"))
    schema = _schema()
    arrays = [
        c if isinstance(c, pa.Array) else pa.array(c, type=schema.field(k).type) for k, c in cols.items()
    ]
    return pa.Table.from_arrays(arrays, schema=schema)


def _history(saved: np.ndarray, seed: int, day: dt.date) -> dict[str, np.ndarray]:
    """The history columns of a day's rows: mostly zeros (a pair never shown before), counts
    where a pair has a past, more often and with more saves where the row is saved (a user who
    saves a pin again), so the columns carry some signal. Drawn from their own generator: the
    other columns stay what they were before these existed."""
    rng = np.random.default_rng([seed, day.toordinal(), 34])
    rows = len(saved)
    cols: dict[str, np.ndarray] = {}
    # user x pin: a pair with a past is rare, and likelier (with more saves) for a saved row;
    # user x category: most users have seen the category before
    for view, p_seen, scale in (
        ("user_pin_stats", 0.05 + 0.25 * saved, 2.0),
        ("user_category_stats", 0.8, 20.0),
    ):
        seen = rng.random(rows) < p_seen
        imp_28 = np.where(seen, 1 + rng.poisson(scale, rows), 0).astype(np.int64)
        imp_7 = rng.binomial(imp_28, 0.3).astype(np.int64)
        p_save = np.clip(0.05 + 0.3 * saved, 0, 1)
        sav_28 = rng.binomial(imp_28, p_save).astype(np.int64)
        sav_7 = rng.hypergeometric(sav_28, imp_28 - sav_28, imp_7) if rows else imp_7
        for days, imp, sav in ((7, imp_7, sav_7.astype(np.int64)), (28, imp_28, sav_28)):
            cols[f"{view}__impressions_{days}d"] = imp
            cols[f"{view}__saves_{days}d"] = sav
            cols[f"{view}__save_rate_{days}d"] = sav / (imp + 1.0)
    return {name: cols[name] for name in HISTORY_FEATURES}


def write_window(
    home: Path,
    end: dt.date,
    days: int,
    rows_per_day: int,
    seed: int = 0,
    row_group_size: int = 256,
    eval_rows: int | None = None,
    feature_version: str | None = None,
) -> Path:
    """Write day partitions + manifest under ``home``/windows; returns the manifest path."""
    from features.window import WindowManifest, WindowPartition

    parts = []
    dates = [end - dt.timedelta(days=d) for d in range(days, 0, -1)] + [end]
    for i, day in enumerate(dates):
        n = rows_per_day if i < days else (eval_rows or rows_per_day)
        path = home / "windows" / "days" / day.isoformat() / f"k{seed}" / "examples.parquet"
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            pq.write_table(day_table(day, n, seed), path, row_group_size=row_group_size)
        t = pq.read_table(path, columns=["saved"])
        parts.append(
            WindowPartition(
                date=day,
                path=path,
                rows=t.num_rows,
                label_rate=float(np.mean(t.column("saved").to_numpy())) if t.num_rows else 0.0,
                partition_key=f"k{seed}",
            )
        )
    out = home / "windows" / f"{end.isoformat()}_{days}d" / "manifest.json"
    manifest = WindowManifest(
        path=out,
        window_id=hashlib.sha256(json.dumps([str(p.path) for p in parts]).encode()).hexdigest(),
        end=end,
        days=days,
        train=tuple(parts[:-1]),
        eval=parts[-1],
        columns={f.name: str(f.type) for f in _schema()},
        feature_version=feature_version or current_feature_version(),
        source_version={"seed": str(seed)},
        rows_train=sum(p.rows for p in parts[:-1]),
        rows_eval=parts[-1].rows,
        created_at=dt.datetime.now(dt.UTC).isoformat(),
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(manifest.record(), indent=2))
    return out
