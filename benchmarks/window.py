"""Window benchmark: `python -m benchmarks.window [--requests-per-day N] [--days D] [--keep DIR]`.

On one synthetic workspace (default 20-day window of ~250k impressions/day, 5M training rows):
1. the full window through Feast (per-day point-in-time join) vs a direct DuckDB ASOF JOIN of
   the same parquet (same TTL semantics), per-day medians and their ratio, with a check that
   both paths give the same rows and feature sums;
2. the next day's incremental window (reuses 20 partitions, builds 1) vs a full rebuild of it;
3. peak RSS of the process after each phase (the synthetic data is generated in a child).
Figures are recorded in docs/data.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

START = dt.date(2026, 1, 1)


def _rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _synth(home: Path, days: int, requests_per_day: int, users: int, pins: int) -> dict[str, Any]:
    argv = [
        *(sys.executable, "-m", "ranking.cli", "data", "synth", "--home", str(home), "--json"),
        *("--start", START.isoformat(), "--days", str(days), "--requests-per-day", str(requests_per_day)),
        *("--users", str(users), "--pins", str(pins)),
    ]
    out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
    summary: dict[str, Any] = json.loads(out)
    return summary


def _duckdb_day(con: Any, ws: Any, day: dt.date, out: Path) -> tuple[float, dict[str, float]]:
    """The same point-in-time join written directly as DuckDB ASOF JOINs (TTL 24 h), reading only
    the snapshots that can serve the day."""
    from features import feast_repo, sources
    from features.schema import HISTORY_FEATURES

    views = feast_repo.service_views()
    tables = {
        "user_stats": sources.USERS,
        "pin_stats": sources.PINS,
        "user_pin_stats": sources.USER_PINS,
        "user_category_stats": sources.USER_CATEGORIES,
    }
    aliases = {"user_stats": "u", "pin_stats": "p", "user_pin_stats": "up", "user_category_stats": "uc"}
    # the category is the pin's, as pin_stats has it at the impression (the window's second lookup)
    left = {"category": "p.category"}
    imp = sources.day_dir(ws, sources.IMPRESSIONS, day) / "*.parquet"
    cols, joins = [], []
    for view in views:
        alias = aliases[view.name]
        glob = sources.glob_pattern(ws, tables[view.name])
        fields = ", ".join(view.fields)
        keys = ", ".join(view.join_keys)
        on = " AND ".join(f"{left.get(k, f'i.{k}')} = {alias}.{k}" for k in view.join_keys)
        joins.append(
            f"ASOF LEFT JOIN (SELECT {keys}, event_timestamp AS ts, {fields}"
            f" FROM read_parquet('{glob}', hive_partitioning = false)"
            # only snapshots that can serve this day (parquet statistics skip the other files)
            f" WHERE event_timestamp > TIMESTAMPTZ '{day} 00:00:00+00' - INTERVAL {int(view.ttl_hours)} HOUR"
            f" AND event_timestamp < TIMESTAMPTZ '{day} 00:00:00+00' + INTERVAL 1 DAY) {alias}"
            f" ON {on} AND i.event_timestamp >= {alias}.ts"
        )
        for f in view.fields:
            value = (
                f"CASE WHEN i.event_timestamp - {alias}.ts <= INTERVAL {int(view.ttl_hours)} HOUR"
                f" THEN {alias}.{f} END"
            )
            if f"{view.name}__{f}" in HISTORY_FEATURES:  # a pair absent: no impression, a true 0
                value = f"COALESCE({value}, 0)"
            cols.append(f"{value} AS {view.name}__{f}")
    sql = f"SELECT i.*, {', '.join(cols)} FROM read_parquet('{imp}', hive_partitioning = false) i {' '.join(joins)}"
    started = time.perf_counter()
    con.execute(f"COPY ({sql}) TO '{out}' (FORMAT parquet, COMPRESSION zstd)")
    seconds = time.perf_counter() - started
    return seconds, _feast_check(con, str(out))


def _feast_check(con: Any, path: str) -> dict[str, float]:
    # (DuckDB relations have no fetchone() any more: run through the connection)
    row = con.execute(
        f"SELECT count(*), sum(user_stats__impressions_28d), sum(pin_stats__saves_7d),"
        f" count(pin_stats__category), sum(user_pin_stats__saves_28d),"
        f" sum(user_category_stats__impressions_28d), count(user_category_stats__as_of)"
        f" FROM read_parquet('{path}')"
    ).fetchone()
    assert row is not None
    names = ("rows", "user_imp28", "pin_saves7", "pin_cat", "pair_saves28", "category_imp28", "category_rows")
    return dict(zip(names, row, strict=True))


def _duckdb_days(con: Any, ws: Any, parts: list[dict[str, Any]], out: Path) -> tuple[list[float], bool]:
    """Seconds of each day's DuckDB ASOF join, and whether every day's checks equal Feast's."""
    duck_days, agree = [], True
    for p in parts:
        day = dt.date.fromisoformat(p["date"])
        seconds, check = _duckdb_day(con, ws, day, out / f"{day}.parquet")
        duck_days.append(seconds)
        feast_check = _feast_check(con, p["path"])
        if check != feast_check:
            agree = False
            print(f"  MISMATCH {day}: duckdb {check} vs feast {feast_check}", flush=True)
    return duck_days, agree


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.window")
    ap.add_argument(
        "--requests-per-day", type=int, default=10_000, help="x 25 impressions (default 250k/day)"
    )
    ap.add_argument("--days", type=int, default=20, help="window length")
    ap.add_argument("--users", type=int, default=200_000)
    ap.add_argument("--pins", type=int, default=100_000)
    ap.add_argument("--keep", default=None, help="workspace folder to use and keep (default: a temp dir)")
    return ap


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)

    import duckdb

    from features import feast_repo, window
    from ranking.core.workspace import Workspace

    home = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bench-window-"))
    ws = Workspace.resolve(home)
    end = START + dt.timedelta(days=args.days)  # eval day; one more day exists for the incremental step
    results: dict[str, Any] = {"home": str(home), "rss_mib": {}}
    print(f"workspace {home}", flush=True)

    started = time.perf_counter()
    synth = _synth(home, args.days + 2, args.requests_per_day, args.users, args.pins)
    results["synth"] = {k: synth[k] for k in ("impressions", "save_rate", "duration_seconds")}
    print(f"synth: {synth['impressions']:,} impressions in {time.perf_counter() - started:.1f} s", flush=True)
    feast_repo.apply(ws)
    results["rss_mib"]["after_import_and_apply"] = round(_rss_mib())

    # 1. full window through Feast
    started = time.perf_counter()
    manifest = window.build_window(ws, end, args.days)
    feast_full = time.perf_counter() - started
    results["rss_mib"]["after_feast_window"] = round(_rss_mib())
    parts = [*manifest["train"], manifest["eval"]]
    feast_days = [
        json.loads((Path(p["path"]).parent / "partition.json").read_text())["build_seconds"] for p in parts
    ]
    rows = manifest["rows_train"] + manifest["rows_eval"]
    print(f"feast window: {rows:,} rows, {len(parts)} days in {feast_full:.1f} s", flush=True)

    # DuckDB ASOF JOIN of the same days
    duck_dir = home / "bench-duckdb"
    duck_dir.mkdir(exist_ok=True)
    duck_days, agree = _duckdb_days(duckdb.connect(), ws, parts, duck_dir)
    results["rss_mib"]["after_duckdb"] = round(_rss_mib())
    results["join"] = {
        "rows": rows,
        "days": len(parts),
        "feast_total_seconds": round(feast_full, 2),
        "feast_day_median_seconds": round(statistics.median(feast_days), 3),
        "duckdb_total_seconds": round(sum(duck_days), 2),
        "duckdb_day_median_seconds": round(statistics.median(duck_days), 3),
        "feast_over_duckdb_ratio": round(statistics.median(feast_days) / statistics.median(duck_days), 2),
        "feast_rows_per_second": round(rows / feast_full),
        "same_rows_and_feature_sums": agree,
    }

    # 2. next day: incremental (reuse) vs full rebuild of the same window
    nxt = end + dt.timedelta(days=1)
    started = time.perf_counter()
    inc = window.build_window(ws, nxt, args.days)
    incremental = time.perf_counter() - started
    shutil.move(ws.windows, home / "windows-incremental")
    started = time.perf_counter()
    full = window.build_window(ws, nxt, args.days)
    rebuild = time.perf_counter() - started
    results["rss_mib"]["after_next_day"] = round(_rss_mib())
    assert full["window_id"] == inc["window_id"], "incremental and full windows differ"
    results["next_day"] = {
        "incremental_seconds": round(incremental, 2),
        "incremental_days_built": inc["days_built"],
        "full_rebuild_seconds": round(rebuild, 2),
        "full_days_built": full["days_built"],
        "full_over_incremental_ratio": round(rebuild / incremental, 1),
        "same_window_id": full["window_id"] == inc["window_id"],
    }
    results["peak_rss_mib"] = round(_rss_mib())
    print(json.dumps(results, indent=2), flush=True)
    if not args.keep:
        shutil.rmtree(home, ignore_errors=True)
    return 0 if agree else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
