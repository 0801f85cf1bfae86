"""What the history views cost (issue 34): `python -m benchmarks.history_cost [--baseline REV] [--out FILE]`.

On the stack's workspace (infra/stack/stack.py SMALL_WORKSPACE: 10 synthetic days, 300 users, 600
pins, 600 requests of 25 pins a day; its 5-day windows), built twice in the same run: once by this
checkout and once by ``--baseline`` (default: the commit before the history views, checked out in
a temporary git worktree, run with the same interpreter):
1. the snapshot job (``ranker data synth``'s seconds, which derive every snapshot) and the source's
   bytes;
2. the window build, cold (every partition built through Feast), 5 times each: medians and their
   ratio (the issue's bound: at most 1.5x); and this checkout's builds again through Feast's own
   DuckDB store (features/offline_store.py's reason to exist);
3. this checkout only, on a long history (the backtest's world: 54 days of 1,000 requests): one
   day's join through our store and through Feast's own, 5 times each, medians and ratio;
4. this checkout only: the online store after ``ranker features materialize``, SQLite and a real
   redis-server (when installed): bytes per million user x pin and user x category pairs (SQLite:
   each view's rows copied alone into a fresh database with Feast's own table schema, vacuumed;
   Redis: MEMORY USAGE of the keys holding the view), and the online lookup of a 25-pin slate as
   serving does it (user, pins and user x pin first, then user x category on the pins'
   categories): median and p95 over 200 slates.
Prints and writes one JSON object (``--out``); figures are recorded in docs/data.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
BASELINE = "b9d3fa3"  # main before issue 34's views
SIZE = {"days": 10, "users": 300, "pins": 600, "requests_per_day": 600, "seed": 11}
START = dt.date(2026, 11, 1)
WINDOW_DAYS = 5
BUILDS = 5
SLATES = 200
SLATE = 25


def _ranker(tree: Path, home: Path, *args: str) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(tree), "OMP_NUM_THREADS": "1", "RANKER_HOME": str(home)}
    argv = [sys.executable, "-m", "ranking.cli", *args, "--home", str(home), "--json"]
    done = subprocess.run(argv, cwd=tree, env=env, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"{' '.join(args[:2])} in {tree} failed ({done.returncode}): {done.stderr[-2000:]}")
    out: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return out


def _du(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def _measure(tree: Path, home: Path) -> dict[str, Any]:
    end = START + dt.timedelta(days=SIZE["days"] - 1)
    synth = _ranker(
        tree,
        home,
        *("data", "synth", "--start", START.isoformat(), "--days", str(SIZE["days"])),
        *("--users", str(SIZE["users"]), "--pins", str(SIZE["pins"])),
        *("--requests-per-day", str(SIZE["requests_per_day"]), "--seed", str(SIZE["seed"])),
    )
    _ranker(tree, home, "features", "apply")
    seconds = []
    for i in range(BUILDS):
        shutil.rmtree(home / "windows", ignore_errors=True)
        started = time.perf_counter()
        window = _ranker(
            tree, home, "features", "window", "--end", end.isoformat(), "--days", str(WINDOW_DAYS)
        )
        wall = time.perf_counter() - started
        seconds.append(float(window["duration_seconds"]))
        print(
            f"  {tree.name}: build {i + 1}/{BUILDS}: {seconds[-1]:.2f} s ({wall:.1f} s with the CLI)",
            flush=True,
        )
    return {
        "synth_seconds": synth.get("duration_seconds"),
        "source_bytes": _du(home / "source"),
        "source_tables": sorted(p.name for p in (home / "source").iterdir() if p.is_dir()),
        "window_build_seconds": seconds,
        "window_build_median_seconds": statistics.median(seconds),
        "window_bytes": _du(home / "windows"),
    }


# this checkout with Feast's own DuckDB store rendered in place of ours: argv[2] "apply" or an end day
_STOCK = """
import datetime as dt, json, sys
from pathlib import Path
from features import feast_repo
feast_repo.DAY_RANGE_DUCKDB = "duckdb"
from ranking.core.workspace import Workspace
ws = Workspace.resolve(Path(sys.argv[1]))
if sys.argv[2] == "apply":
    feast_repo.apply(ws)
else:
    from features.window import build_window
    print(json.dumps(build_window(ws, dt.date.fromisoformat(sys.argv[2]), int(sys.argv[3]))["duration_seconds"]))
"""


def _stock(home: Path, *args: str) -> str:
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1", "RANKER_HOME": str(home)}
    done = subprocess.run(
        [sys.executable, "-c", _STOCK, str(home), *args], cwd=REPO, env=env, capture_output=True, text=True
    )
    if done.returncode:
        raise SystemExit(f"the stock-store run failed ({done.returncode}): {done.stderr[-2000:]}")
    return done.stdout.strip()


def _stock_builds(home: Path) -> list[float]:
    """This checkout's window builds through Feast's own DuckDB store (what the day-range store
    replaces) on the same workspace, each in a fresh process as the CLI's are; the workspace is
    applied with our store again after."""
    end = START + dt.timedelta(days=SIZE["days"] - 1)
    _stock(home, "apply")
    seconds = []
    for i in range(BUILDS):
        shutil.rmtree(home / "windows", ignore_errors=True)
        seconds.append(float(_stock(home, end.isoformat(), str(WINDOW_DAYS)).splitlines()[-1]))
        print(f"  stock duckdb: build {i + 1}/{BUILDS}: {seconds[-1]:.2f} s", flush=True)
    _ranker(REPO, home, "features", "apply")
    return seconds


def _view_bytes(db: Path, table: str, scratch: Path) -> int:
    """The bytes of one view's table alone: its rows copied into a fresh database with the same
    schema and indexes, vacuumed."""
    src = sqlite3.connect(db)
    ddl = [
        sql
        for (sql,) in src.execute(
            "SELECT sql FROM sqlite_master WHERE tbl_name = ? AND sql IS NOT NULL", (table,)
        )
    ]
    src.close()
    alone = scratch / f"{table}.db"
    alone.unlink(missing_ok=True)
    con = sqlite3.connect(alone)
    for sql in ddl:
        con.execute(sql)
    con.execute("ATTACH DATABASE ? AS src", (str(db),))
    con.execute(f'INSERT INTO "{table}" SELECT * FROM src."{table}"')
    con.commit()
    con.execute("DETACH DATABASE src")
    con.execute("VACUUM")
    con.close()
    return alone.stat().st_size


def _pairs(ws: Any) -> dict[str, int]:
    """Each history view's pairs in the snapshot materialised last (the day after the last)."""
    from features import sources
    from features.schema import HISTORY_VIEWS, USER_PIN_VIEW

    latest = sources.list_days(ws, sources.USER_PINS)[-1]
    return {
        view: sources.read_day(
            ws, sources.USER_PINS if view == USER_PIN_VIEW else sources.USER_CATEGORIES, latest
        ).num_rows
        for view in HISTORY_VIEWS
    }


def _slate_lookups(store: Any, ws: Any) -> dict[str, Any]:
    """The newest day's first SLATES slates served as serving does: the user's, the pins' and the
    user x pin features of the slate in one call, then the user x category features of the
    slate's categories (the pins' as the first call read them). Those slates' pairs all have a
    row (they were shown that day): the lookup's cost with every row present."""
    import numpy as np

    from features import sources
    from features.schema import PIN_VIEW, USER_CATEGORY_VIEW, USER_PIN_VIEW, USER_VIEW

    impressions = sources.read_day(
        ws, sources.IMPRESSIONS, sources.list_days(ws, sources.IMPRESSIONS)[-1]
    ).to_pandas()
    slates = [g for _, g in impressions.groupby("request_id", sort=True)][:SLATES]
    first = [
        *(f"{USER_VIEW}:{f}" for f in ("impressions_28d", "saves_28d", "save_rate_28d")),
        *(f"{PIN_VIEW}:{f}" for f in ("category", "impressions_28d", "save_rate_28d")),
        *(f"{USER_PIN_VIEW}:{f}" for f in ("impressions_28d", "saves_28d", "save_rate_28d", "as_of")),
    ]
    second = [f"{USER_CATEGORY_VIEW}:{f}" for f in ("impressions_28d", "saves_28d", "save_rate_28d", "as_of")]
    millis, found = [], 0
    for slate in slates:
        rows = [
            {"user_id": int(u), "pin_id": int(p)} for u, p in zip(slate.user_id, slate.pin_id, strict=True)
        ]
        t0 = time.perf_counter()
        got = store.get_online_features(features=first, entity_rows=rows, full_feature_names=True).to_dict()
        cats = sorted({c for c in got[f"{PIN_VIEW}__category"] if c is not None})
        store.get_online_features(
            features=second,
            entity_rows=[{"user_id": rows[0]["user_id"], "category": c} for c in cats],
            full_feature_names=True,
        ).to_dict()
        millis.append((time.perf_counter() - t0) * 1e3)
        found += sum(v is not None for v in got[f"{USER_PIN_VIEW}__impressions_28d"])
    return {
        "slates": len(millis),
        "pins_per_slate": SLATE,
        "median": round(statistics.median(millis), 2),
        "p95": round(float(np.percentile(millis, 95)), 2),
        "user_pin_rows_found_share": round(found / sum(len(s) for s in slates), 3),
    }


def _online_sqlite(home: Path, scratch: Path) -> dict[str, Any]:
    from features import feast_repo
    from features.schema import HISTORY_VIEWS
    from ranking.core.workspace import Workspace

    ws = Workspace.resolve(home)
    started = time.perf_counter()
    _ranker(REPO, home, "features", "materialize")
    materialize_seconds = time.perf_counter() - started
    store = feast_repo.open_store(ws)
    db = home / "feast" / "online_store.db"
    pairs = _pairs(ws)
    sizes = {}
    for view in HISTORY_VIEWS:
        nbytes = _view_bytes(db, f"{store.project}_{view}", scratch)
        sizes[view] = {
            "pairs": pairs[view],
            "bytes": nbytes,
            "bytes_per_million_pairs": round(nbytes / pairs[view] * 1e6),
        }
    return {
        "materialize_seconds": round(materialize_seconds, 2),
        "online_store_bytes": db.stat().st_size,
        "views": sizes,
        "slate_lookup_ms": _slate_lookups(store, ws),
    }


def _redis_server(folder: Path) -> tuple[subprocess.Popen[bytes], int] | None:
    binary = shutil.which("redis-server")
    if binary is None:
        return None
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    argv = [
        binary,
        "--port",
        str(port),
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--appendonly",
        "no",
        "--dir",
        str(folder),
    ]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return proc, port
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise SystemExit("redis-server did not start within 10 s")


def _online_redis(home: Path, scratch: Path) -> dict[str, Any] | None:
    """The same workspace served from a real redis-server (the compose stack's online store):
    each history view's memory (MEMORY USAGE of the keys holding its fields) per million pairs."""
    started_server = _redis_server(scratch)
    if started_server is None:
        print("  redis-server not installed: the Redis figures are skipped", flush=True)
        return None
    proc, port = started_server
    try:
        import redis

        from features import feast_repo
        from features.schema import HISTORY_VIEWS
        from ranking.core.workspace import Workspace

        os.environ.update(RANKER_ONLINE_STORE="redis", RANKER_REDIS_URL=f"127.0.0.1:{port}")
        _ranker(REPO, home, "features", "apply")
        started = time.perf_counter()
        _ranker(REPO, home, "features", "materialize")
        materialize_seconds = time.perf_counter() - started
        ws = Workspace.resolve(home)
        store = feast_repo.open_store(ws, feast_repo.store_settings())
        client = redis.Redis(host="127.0.0.1", port=port)
        memory = {view: 0 for view in HISTORY_VIEWS}
        keys = {view: 0 for view in HISTORY_VIEWS}
        for key in client.scan_iter(count=1000):
            fields = client.hkeys(key)
            for view in HISTORY_VIEWS:
                if f"_ts:{view}".encode() in fields:
                    memory[view] += int(client.memory_usage(key, samples=0) or 0)
                    keys[view] += 1
        pairs = _pairs(ws)
        return {
            "materialize_seconds": round(materialize_seconds, 2),
            "used_memory_bytes": int(client.info("memory")["used_memory"]),
            "views": {
                view: {
                    "pairs": pairs[view],
                    "keys": keys[view],
                    "bytes": memory[view],
                    "bytes_per_million_pairs": round(memory[view] / pairs[view] * 1e6),
                }
                for view in HISTORY_VIEWS
            },
            "slate_lookup_ms": _slate_lookups(store, ws),
        }
    finally:
        for name in ("RANKER_ONLINE_STORE", "RANKER_REDIS_URL"):
            os.environ.pop(name, None)
        proc.kill()
        proc.wait()
        _ranker(REPO, home, "features", "apply")


# the backtest's synthetic world (infra/history_backtest.sh, make backtest): 54 days of 1,000
# requests of 25 pins, 20,000 users and pins
LONG = {"days": 54, "requests_per_day": 1000, "seed": 0}


def _long_history(home: Path) -> dict[str, Any]:
    """One day's point-in-time join (features.window.join_day, both Feast calls) late in a long
    history, through our store and through Feast's own DuckDB store, in one process, 5 times each,
    alternating: medians, their ratio, and whether the two joined the same rows."""
    os.environ["RANKER_HOME"] = str(home)
    _ranker(
        REPO,
        home,
        *("data", "synth", "--start", START.isoformat(), "--days", str(LONG["days"])),
        *("--requests-per-day", str(LONG["requests_per_day"]), "--seed", str(LONG["seed"])),
    )
    _ranker(REPO, home, "features", "apply")
    import pandas as pd
    import yaml
    from feast import FeatureStore
    from feast.repo_config import RepoConfig

    from features import feast_repo, sources
    from features.window import example_schema, join_day
    from ranking.core.workspace import Workspace

    ws = Workspace.resolve(home)
    day = sources.list_days(ws, sources.IMPRESSIONS)[-1]
    impressions = sources.read_day(ws, sources.IMPRESSIONS, day)
    schema = example_schema()
    raw = yaml.safe_load((ws.feast / "feature_store.yaml").read_text())
    stores = {}
    for name, offline in (
        ("day_range", {"type": feast_repo.DAY_RANGE_DUCKDB}),
        ("feast_duckdb", {"type": "duckdb"}),
    ):
        config = RepoConfig(**{**raw, "offline_store": offline})
        config.repo_path = feast_repo.REPO
        stores[name] = FeatureStore(config=config)
    seconds: dict[str, list[float]] = {name: [] for name in stores}
    frames: dict[str, pd.DataFrame] = {}
    for i in range(BUILDS):
        for name, store in stores.items():
            t0 = time.perf_counter()
            frames[name] = join_day(store, day, impressions, schema)
            seconds[name].append(round(time.perf_counter() - t0, 3))
        print(
            f"  long history, join {i + 1}/{BUILDS}: {seconds['day_range'][-1]:.2f} s vs {seconds['feast_duckdb'][-1]:.2f} s",
            flush=True,
        )
    medians = {name: statistics.median(v) for name, v in seconds.items()}
    return {
        **LONG,
        "day": day.isoformat(),
        "rows": impressions.num_rows,
        "user_pin_rows_that_day": sources.read_day(ws, sources.USER_PINS, day).num_rows,
        "join_seconds": seconds,
        "join_median_seconds": medians,
        "feast_duckdb_over_day_range": round(medians["feast_duckdb"] / medians["day_range"], 3),
        "same_rows": bool(frames["day_range"].equals(frames["feast_duckdb"])),
    }


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m benchmarks.history_cost", description=__doc__.splitlines()[0]
    )
    ap.add_argument("--baseline", default=BASELINE, help=f"the commit to compare with (default {BASELINE})")
    ap.add_argument("--out", type=Path, help="also write the JSON here")
    args = ap.parse_args(argv)
    if not args.baseline.replace("-", "").replace("_", "").isalnum() or len(args.baseline) > 64:
        print(f"--baseline must be a commit or ref name, got {args.baseline!r}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="history-cost-") as tmp:
        scratch = Path(tmp)
        base_tree = scratch / "baseline"
        subprocess.run(
            ["git", "-C", str(REPO), "worktree", "add", "--detach", "-q", str(base_tree), args.baseline],
            check=True,
        )
        try:
            commit = subprocess.run(
                ["git", "-C", str(base_tree), "rev-parse", "--short", "HEAD"],
                capture_output=True,
                text=True,
                check=True,
            ).stdout.strip()
            print(f"baseline {commit}: synth, apply, {BUILDS} cold window builds", flush=True)
            baseline = _measure(base_tree, scratch / "home-baseline")
            print("this checkout: synth, apply, the same builds", flush=True)
            head = _measure(REPO, scratch / "home-head")
            print("this checkout through Feast's own DuckDB store: the same builds", flush=True)
            stock = _stock_builds(scratch / "home-head")
            print("this checkout: materialize, online sizes, slate lookups", flush=True)
            sys.path.insert(0, str(REPO))
            os.environ["RANKER_HOME"] = str(scratch / "home-head")
            online: dict[str, Any] = {"sqlite": _online_sqlite(scratch / "home-head", scratch)}
            print("this checkout: the same from a real redis-server", flush=True)
            online["redis"] = _online_redis(scratch / "home-head", scratch)
            print("this checkout: one day's join late in a long history, both stores", flush=True)
            long_history = _long_history(scratch / "home-long")
        finally:
            subprocess.run(
                ["git", "-C", str(REPO), "worktree", "remove", "--force", str(base_tree)], check=False
            )
    ratio = head["window_build_median_seconds"] / baseline["window_build_median_seconds"]
    out = {
        "benchmark": "history_cost",
        "date": dt.date.today().isoformat(),
        "workspace": {**SIZE, "window_days": WINDOW_DAYS},
        "baseline": {"commit": commit, **baseline},
        "head": head,
        "window_build_ratio": round(ratio, 3),
        "bound": 1.5,
        "bound_met": ratio <= 1.5,
        # the same checkout's builds through Feast's stock DuckDB store: what the day-range store saves
        "head_stock_duckdb_build_seconds": stock,
        "head_stock_duckdb_build_median_seconds": statistics.median(stock),
        "stock_duckdb_ratio": round(statistics.median(stock) / baseline["window_build_median_seconds"], 3),
        "snapshot_job_ratio": (
            round(head["synth_seconds"] / baseline["synth_seconds"], 3)
            if head["synth_seconds"] and baseline["synth_seconds"]
            else None
        ),
        "source_bytes_ratio": round(head["source_bytes"] / baseline["source_bytes"], 3),
        "online": online,
        "long_history": long_history,
    }
    text = json.dumps(out, indent=1)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        tmp_out = args.out.with_name(f".{args.out.name}.tmp")
        tmp_out.write_text(text + "\n")
        tmp_out.replace(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
