"""Scale benchmark: `python -m benchmarks.scale [--requests-per-day N] [--days D] [--keep DIR]`.

How window build and training grow with the data and the tables, each step a real `ranker`
process (as the DAG runs them):
- window build (Feast, duckdb offline store) at 1x, 4x and 16x the rows per day;
- training (1 epoch, joint, sync pipeline, eval at the end, sharded checkpoint + export) on each of
  those windows with the two id tables at 1M and at 10M rows, on 1 and on 2 processes (gloo);
- for every run its wall time and the peak RSS of its largest process (``wait4``'s rusage: the
  maximum over the process and the children it waited for, i.e. the largest torchrun worker).
Then per series a least-squares line seconds = a + b * rows and peak MiB = c + d * rows: b is the
time per row, d should be ~0 (streaming: memory does not grow with the window).
Figures are recorded in docs/scale.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from ranking.core.atomic import atomic_write_json

START = dt.date(2026, 1, 1)
MULTIPLES = (1, 4, 16)
TABLE_ROWS = (1_000_000, 10_000_000)
NPROCS = (1, 2)


def _ranker(*args: str) -> tuple[dict[str, Any], float, float]:
    """Run ``ranker ARGS --json``: (summary, wall seconds, peak RSS MiB of the largest process)."""
    cmd = [str(Path(sys.executable).with_name("ranker")), *args, "--json"]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "RANKER_LOG_LEVEL": "WARNING"}
    started = time.perf_counter()
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        seconds = time.perf_counter() - started
        out.seek(0)
        err.seek(0)
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(args[:2])} failed ({proc.returncode}): {err.read()[-2000:]}")
        summary: dict[str, Any] = json.loads(out.read())
    return summary, seconds, usage.ru_maxrss / 1024


def _fit(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """Least squares y = a + b x."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx if sxx else 0.0
    return my - b * mx, b


def _model_config(home: Path, rows: int) -> Path:
    from ranking.trainer.models.config import default_model_config

    path = home / f"model_config_{rows}.json"
    table_rows = {"user_id": rows, "pin_id": rows, "user_stats__country": 256, "pin_stats__category": 512}
    path.write_text(default_model_config(embedding_dim=16, table_rows=table_rows).to_json())
    return path


def _window(home: Path, days: int, requests_per_day: int) -> dict[str, Any]:
    end = START + dt.timedelta(days=days)
    _ranker("data", "synth", "--home", str(home), "--start", START.isoformat(), "--days", str(days + 1),
            "--requests-per-day", str(requests_per_day))  # fmt: skip
    _ranker("features", "apply", "--home", str(home))
    summary, seconds, rss = _ranker("features", "window", "--home", str(home), "--end", end.isoformat(),
                                    "--days", str(days))  # fmt: skip
    rows = summary["rows_train"] + summary["rows_eval"]
    return {
        "rows_train": summary["rows_train"],
        "rows": rows,
        "build_seconds": summary["duration_seconds"],
        "wall_seconds": seconds,
        "rows_per_second": rows / summary["duration_seconds"],
        "peak_rss_mib": rss,
    }


def _train(home: Path, days: int, cfg: Path, nproc: int, out: Path) -> dict[str, Any]:
    end = START + dt.timedelta(days=days)
    summary, seconds, rss = _ranker(
        "train", "--home", str(home), "--end", end.isoformat(), "--days", str(days), "--epochs", "1",
        "--schedule", "joint", "--pipeline", "sync", "--batch-size", "1024", "--warm-start", "none",
        "--no-register", "--no-progress", "--model-config", str(cfg), "--nproc", str(nproc), "--out", str(out),
    )  # fmt: skip
    epoch = summary["epochs"][0]
    result = {
        "train_epoch_seconds": epoch["duration_seconds"],
        "samples_per_second": epoch["samples_per_second"],
        "job_seconds": summary["duration_seconds"],
        "wall_seconds": seconds,
        "peak_rss_mib": rss,
        "export_mib": (out / "model.pt").stat().st_size / 2**20,
        "sharding": summary["sharding"],
    }
    shutil.rmtree(out, ignore_errors=True)  # 10M-row tables: GBs of checkpoint and export each
    return result


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.scale")
    ap.add_argument("--requests-per-day", type=int, default=200, help="at 1x (x 25 impressions)")
    ap.add_argument("--days", type=int, default=4, help="window length")
    ap.add_argument("--keep", default=None, help="folder to use and keep (default: a temp dir)")
    ap.add_argument("--multiples", default=",".join(map(str, MULTIPLES)), help="row multiples")
    ap.add_argument("--table-rows", default=",".join(map(str, TABLE_ROWS)), help="id table sizes")
    ap.add_argument("--json-out", type=Path, default=None, help="also write the results here")
    args = ap.parse_args(argv)
    multiples = [int(x) for x in args.multiples.split(",")]
    table_sizes = [int(x) for x in args.table_rows.split(",")]

    root = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bench-scale-"))
    root.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {"days": args.days, "window": {}, "train": {}}
    try:
        for m in multiples:
            home = root / f"x{m}"
            w = _window(home, args.days, args.requests_per_day * m)
            results["window"][m] = w
            print(f"window x{m}: {w['rows']:,} rows in {w['build_seconds']:.1f} s, {w['peak_rss_mib']:.0f} MiB",
                  flush=True)  # fmt: skip
            for table_rows in table_sizes:
                cfg = _model_config(root, table_rows)
                for nproc in NPROCS:
                    t = _train(home, args.days, cfg, nproc, home / f"run-{table_rows}-{nproc}")
                    t["rows_train"] = w["rows_train"]
                    results["train"][f"x{m}/{table_rows}/{nproc}"] = t
                    print(f"train x{m} tables {table_rows:,} nproc {nproc}: epoch {t['train_epoch_seconds']:.1f} s,"
                          f" job {t['job_seconds']:.1f} s, peak {t['peak_rss_mib']:.0f} MiB/process", flush=True)  # fmt: skip
        fits: dict[str, Any] = {}
        ws = [results["window"][m] for m in multiples]
        a, b = _fit([w["rows"] for w in ws], [w["build_seconds"] for w in ws])
        c, d = _fit([w["rows"] for w in ws], [w["peak_rss_mib"] for w in ws])
        fits["window"] = {
            "fixed_seconds": a,
            "us_per_row": b * 1e6,
            "rss_base_mib": c,
            "rss_mib_per_million_rows": d * 1e6,
        }
        for table_rows in table_sizes:
            for nproc in NPROCS:
                series = [results["train"][f"x{m}/{table_rows}/{nproc}"] for m in multiples]
                xs = [float(s["rows_train"]) for s in series]
                a, b = _fit(xs, [s["train_epoch_seconds"] for s in series])
                c, d = _fit(xs, [s["peak_rss_mib"] for s in series])
                fits[f"train/{table_rows}/{nproc}"] = {
                    "fixed_seconds": a,
                    "us_per_row": b * 1e6,
                    "rss_base_mib": c,
                    "rss_mib_per_million_rows": d * 1e6,
                }
        results["fits"] = fits
        print(json.dumps(results, indent=2), flush=True)
        if args.json_out:
            atomic_write_json(args.json_out, results)
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
