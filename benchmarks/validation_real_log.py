"""The data validation on a real log: `python -m benchmarks.validation_real_log [--work DIR] [--out FILE]`.

MovieLens-100K (fetched from the ``recbole==1.2.1`` wheel and converted at run time by
``infra/movielens.py``; never committed: its terms forbid redistribution) imported with a rating of
4 or more as the save, then run as a deployment would: the daily windows of the 14 eval days
before the log's last one and 14 days ahead of them, each validated under the shipped
``[validation]`` defaults, the history being whatever earlier days the deployment built. The
issue-30 bar: no ``fail`` on the 14 eval days. Then the same log with one feature's null rate
tripled on the newest training day of the last window (its rows nulled at random, as a join that
lost them would): the validation must fail on it.

Writes the per-day verdicts, anomaly counts by kind and the two outcomes as JSON (``--out``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import shutil
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

EVAL_DAYS = 14
WINDOW_DAYS = 20
TRIPLED = "pin_stats__save_rate_28d"  # a pin feature: null where the pin is new to the log


def _import(work: Path, home: Path) -> dict[str, Any]:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "infra"))
    import movielens  # type: ignore[import-not-found]

    from features.feast_repo import apply
    from features.importer import ImportConfig, import_events
    from ranking.core.workspace import Workspace

    csv = work / "ml-100k.csv"
    if not csv.is_file():
        movielens.convert(movielens.fetch_wheel(work), csv)
    ws = Workspace.resolve(home)
    summary = import_events(
        ws, ImportConfig(events=csv, item_col="item_id", rating_col="rating", label_threshold=4.0)
    )
    apply(ws)
    return summary.model_dump(mode="json")


def _validate_days(home: Path, ends: list[dt.date]) -> list[dict[str, Any]]:
    from features.validation.step import ValidationRequest, validate_window
    from features.window import build_window
    from ranking.core.workspace import Workspace

    ws = Workspace.resolve(home)
    out = []
    for end in ends:
        build_window(ws, end, WINDOW_DAYS)
        summary = validate_window(ValidationRequest(ws, end, WINDOW_DAYS))
        out.append(
            {
                "end": end.isoformat(),
                "verdict": summary.verdict,
                "counts": summary.counts,
                "kinds": dict(Counter(f"{a.kind}:{a.policy}" for a in summary.anomalies)),
                "failing": [a.key for a in summary.anomalies if a.policy == "fail"],
            }
        )
        print(f"{end}: {summary.verdict} {summary.counts}", flush=True)
    return out


def _triple_nulls(home: Path, end: dt.date) -> dict[str, Any]:
    """Null ``TRIPLED`` on twice as many extra rows as were null on the newest training day of
    the window ending ``end`` (its null rate tripled), in place of its partition, recorded as the
    window builder records one."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from features.validation.statistics import path_beside
    from features.window import load_manifest
    from ranking.core.atomic import atomic_write_json
    from ranking.core.hashing import sha256_file
    from ranking.core.workspace import Workspace

    ws = Workspace.resolve(home)
    manifest = load_manifest(ws, end, WINDOW_DAYS)
    part = manifest["train"][-1]
    path = Path(part["path"])
    table = pq.read_table(path)
    column = table.column(TRIPLED)
    before = column.null_count / len(table)
    present = np.flatnonzero(column.is_valid().to_numpy(zero_copy_only=False))
    extra = np.random.default_rng(0).choice(
        present, size=min(len(present), 2 * column.null_count), replace=False
    )
    lost = np.zeros(len(table), dtype=bool)
    lost[extra] = True
    nulled = pc.if_else(pa.array(lost), pa.nulls(len(table), column.type), column)
    table = table.set_column(table.schema.get_field_index(TRIPLED), TRIPLED, nulled)
    copy = home / "tripled" / part["date"] / "examples.parquet"
    copy.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, copy)
    manifest["train"][-1] = {
        **part,
        "path": str(copy),
        "bytes": copy.stat().st_size,
        "sha256": sha256_file(copy),
    }
    path_beside(copy).unlink(missing_ok=True)
    atomic_write_json(ws.window_manifest(end, WINDOW_DAYS), manifest)
    return {
        "day": part["date"],
        "feature": TRIPLED,
        "null_rate_before": before,
        "null_rate_after": nulled.null_count / len(table),
    }


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.validation_real_log")
    ap.add_argument("--work", type=Path, default=None, help="folder for the wheel and the workspace (kept)")
    ap.add_argument("--out", type=Path, default=None, help="write the figures (JSON) here too")
    args = ap.parse_args(argv)

    from features import sources
    from features.validation.step import ValidationRequest, validate_window
    from ranking.core.workspace import Workspace

    work = args.work or Path(tempfile.mkdtemp(prefix="movielens-"))
    home = work / "home"
    shutil.rmtree(home, ignore_errors=True)
    imported = _import(work, home)
    days = sources.list_days(Workspace.resolve(home), sources.IMPRESSIONS)
    evals = days[-EVAL_DAYS - 1 : -1]  # the log's last day has no snapshot after it to serve
    ahead = [d for d in days if evals[0] - dt.timedelta(days=EVAL_DAYS) <= d < evals[0]]
    _validate_days(home, ahead)  # the deployment's history: the windows it built before
    judged = _validate_days(home, evals)
    tripled = _triple_nulls(home, evals[-1])
    broken = validate_window(ValidationRequest(Workspace.resolve(home), evals[-1], WINDOW_DAYS))
    figures = {
        "log": "MovieLens-100K (recbole 1.2.1 wheel), rating >= 4 = save",
        "imported": {
            k: imported.get(k)
            for k in ("impressions", "requests", "users", "pins", "save_rate", "start", "end")
        },
        "window_days": WINDOW_DAYS,
        "eval_days": judged,
        "eval_days_failing": sum(1 for d in judged if d["verdict"] == "fail"),
        "tripled": {
            **tripled,
            "verdict": broken.verdict,
            "failing": [a.key for a in broken.anomalies if a.policy == "fail"],
        },
    }
    print(json.dumps(figures, indent=2, default=str), flush=True)
    if args.out:
        args.out.write_text(json.dumps(figures, indent=2, default=str) + "\n")
    if args.work is None:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if figures["eval_days_failing"] == 0 and broken.verdict == "fail" else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
