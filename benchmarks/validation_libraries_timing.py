"""Timings and install facts for benchmarks/validation_libraries.sh (docs/validation-libraries.md).

``--library NAME --manifest PATH --repeats N`` prints one JSON line: the seconds to compute the
per-feature statistics of every partition of the window (each read from its parquet), median of
``N`` after one warm-up, and the seconds of a drift comparison of the eval day against the
training days where the library offers one. Libraries: pyarrow (the project's own
``features.validation.statistics.compute`` + the skew distances of ``anomalies``), duckdb (one SQL
query per partition, one per window for the drift), evidently, whylogs, pandera (schema checks
only) and tfdv. Only the standard library is imported at module level: the file runs in each
library's own venv.

The other modes are the shell script's plumbing: ``--inspect DIST`` (run in a library's venv:
its version, licence, size, packages and upper-bound pins), ``--resolve-summary LOG`` (the
dry-run resolve against the trainer lock), ``--failed-timing NAME`` and ``--assemble DIR`` (the
figures JSON).
"""

from __future__ import annotations

import argparse
import datetime as dt
import glob
import importlib.metadata as md
import json
import os
import re
import statistics
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# the window's columns (features.schema): not features, entity ids, snapshot timestamps
REQUEST_KEY, LABEL, EVENT_TIME = "request_id", "saved", "event_timestamp"
NOT_FEATURES = (REQUEST_KEY, EVENT_TIME, LABEL)
ENTITY_KEYS = ("user_id", "pin_id")
SPARSE_FEATURES = ("user_id", "pin_id", "user_stats__country", "pin_stats__category")
AS_OF_SUFFIX = "__as_of"
CHECK_FEATURE = "user_stats__save_rate_7d"  # the eval day's mean and nulls, to compare libraries
PINNED = ("numpy", "pandas", "pyarrow", "protobuf", "pydantic", "scipy", "scikit-learn", "torch")


@dataclass(frozen=True)
class Partition:
    date: dt.date
    path: Path


@dataclass(frozen=True)
class Window:
    train: list[Partition]
    eval: Partition

    @property
    def all(self) -> list[Partition]:
        return [*self.train, self.eval]


def read_window(manifest: Path) -> Window:
    data = json.loads(manifest.read_text())

    def part(entry: dict[str, Any]) -> Partition:
        return Partition(dt.date.fromisoformat(entry["date"]), Path(entry["path"]))

    return Window(train=[part(e) for e in data["train"]], eval=part(data["eval"]))


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _lock_names(lock: Path) -> set[str]:
    return {
        _norm(line.split("==")[0].split("[")[0].strip())
        for line in lock.read_text().splitlines()
        if line.strip() and not line.startswith("#")
    }


# ------------------------------------------------------------------------------ install facts


def _du(path: Path) -> int:
    out = subprocess.run(["du", "-sb", str(path)], check=True, capture_output=True, text=True).stdout
    return int(out.split()[0])


def _site_packages(venv: Path) -> Path:
    found = sorted(glob.glob(str(venv / "lib" / "python*" / "site-packages")))
    if not found:
        raise SystemExit(f"no site-packages under {venv}")
    return Path(found[0])


def _dists(site: Path) -> list[str]:
    return sorted(_norm(Path(p).name.split("-")[0]) for p in glob.glob(str(site / "*.dist-info")))


def _license(meta: md.PackageMetadata) -> str | None:
    fields = meta.json
    expression = fields.get("license_expression")
    if expression:
        return str(expression)
    text = str(fields.get("license") or "")
    if text and len(text) <= 60 and "\n" not in text:
        return text
    classifiers = [
        str(c).split("::")[-1].strip() for c in fields.get("classifier", []) if "License ::" in str(c)
    ]
    return classifiers[0] if classifiers else (text.splitlines()[0] if text else None)


def upper_pins() -> list[str]:
    """Every upper bound that an installed distribution puts on numpy, pandas, pyarrow, protobuf,
    pydantic, ... (the pins that would hold the trainer back), as 'dist: requirement'."""
    out = []
    for dist in md.distributions():
        for req in dist.requires or []:
            if "extra ==" in req:
                continue
            name = _norm(re.split(r"[\s<>=!~;\[(]", req, maxsplit=1)[0])
            spec = req.split(";")[0]
            if name in PINNED and "<" in spec:
                out.append(f"{_norm(dist.metadata['Name'])}: {spec.strip()}")
    return sorted(set(out))


def _import_error(module: str) -> str | None:
    """None when ``module`` imports in this interpreter, else the exception's last line."""
    done = subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True, text=True)
    if done.returncode == 0:
        return None
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    return lines[-1] if lines else f"exit {done.returncode}"


def _not_in_lock(lock: set[str]) -> dict[str, int]:
    """Every installed distribution the trainer lock does not hold -> the bytes of its files."""
    out = {}
    for dist in md.distributions():
        name = _norm(dist.metadata["Name"])
        if name in lock or name in ("pip", "setuptools"):
            continue
        out[name] = sum((f.size or 0) for f in dist.files or [])
    return dict(sorted(out.items()))


def inspect(args: argparse.Namespace) -> dict[str, Any]:
    """Facts about the install in this interpreter's venv (run with the venv's python)."""
    venv = Path(sys.prefix)
    site, empty_site = _site_packages(venv), _site_packages(Path(args.empty))
    try:
        meta = md.metadata(args.inspect)
        version: str | None = meta["Version"]
    except md.PackageNotFoundError:
        meta, version = None, None
    dists, empty = _dists(site), set(_dists(empty_site))
    log = Path(args.install_log).read_text(errors="replace").splitlines()
    errors = [line for line in log if line.startswith("ERROR") or line.startswith("error:")][:8]
    installed = args.install_rc == 0 and version is not None
    lock = _lock_names(Path(args.lock))
    return {
        "distribution": args.inspect,
        "installer": args.installer,
        "installed": installed,
        "install_rc": args.install_rc,
        "install_timed_out": args.install_rc == 124,
        "install_seconds": args.install_seconds,
        "install_last_lines": [] if installed else log[-3:],
        "install_errors": errors if args.install_rc else [],
        "version": version,
        "licence": _license(meta) if meta is not None else None,
        "install_bytes": _du(site) - _du(empty_site) if installed else None,
        "packages": len([d for d in dists if d not in empty]) if installed else None,
        "added_for_import": args.added.split(),
        "import_error": _import_error(args.module) if installed else None,
        "not_in_trainer_lock": _not_in_lock(lock) if installed else {},
        "installed_versions": {d: md.version(d) for d in PINNED if d in dists},
        "upper_pins": upper_pins() if installed else [],
    }


_CONSTRAINT = re.compile(r"The user requested \(constraint\) (\S+)")


def resolve_summary(args: argparse.Namespace) -> dict[str, Any]:
    """The dry-run resolves of one library against the trainer lock (lock-1.log with the lock as
    it is, then each with the pins pip named dropped): whether it resolves, pip's own lines on
    each conflict, and the pins that conflict."""
    folder = Path(args.resolve_summary)
    logs = sorted(folder.glob("lock-*.log"), key=lambda p: int(p.stem.split("-")[1]))
    final_rc = int((folder / "lock.rc").read_text().strip())
    conflicts: list[str] = []
    pins: list[str] = []
    for path in logs:
        lines = path.read_text(errors="replace").splitlines()
        keep = False
        for line in lines:
            if "The conflict is caused by" in line or line.startswith("ERROR: Cannot install"):
                keep = True
            elif keep and (not line.strip() or line.startswith("To fix")):
                keep = False
            if keep and "The conflict is caused by" not in line:
                conflicts.append(line.strip())
            found = _CONSTRAINT.search(line)
            if found and found.group(1) not in pins:
                pins.append(found.group(1))
        if any("timed out" in line.lower() for line in lines[-3:]):
            conflicts.append(f"{path.name}: resolve stopped by the time cap")
    resolved = len(logs) == 1 and final_rc == 0
    lock = _lock_names(Path(args.lock))
    report = folder / "lock-1.report.json"
    would_add = []
    if resolved and report.exists():
        for item in json.loads(report.read_text()).get("install", []):
            meta = item["metadata"]
            if _norm(meta["name"]) not in lock:
                would_add.append(f"{meta['name']}=={meta['version']}")
    return {
        "resolves_with_trainer_lock": resolved,
        "conflicting_pins": pins,
        "resolves_without_them": bool(pins) and final_rc == 0,
        "resolve_tries": len(logs),
        "final_rc": final_rc,
        "conflicts": conflicts[:24],
        "would_add_to_trainer": sorted(would_add),
    }


def run_summary(args: argparse.Namespace) -> dict[str, Any]:
    """The venv a library is timed in (run with its python): what was asked, the lock pins that
    had to be dropped for it, the versions it got, and what it adds to the trainer."""
    venv = Path(args.run_summary)
    kept = set((venv / "constraints.txt").read_text().splitlines())
    dropped = [line for line in Path(args.lock).read_text().splitlines() if line and line not in kept]
    return {
        "spec": args.spec,
        "install_rc": args.install_rc,
        "dropped_trainer_pins": dropped,
        "installed_versions": {d: md.version(d) for d in PINNED if _installed(d)},
        "not_in_trainer_lock": _not_in_lock(_lock_names(Path(args.lock))),
    }


def _installed(dist: str) -> bool:
    try:
        md.version(dist)
    except md.PackageNotFoundError:
        return False
    return True


def snapshot(args: argparse.Namespace) -> dict[str, Any]:
    """A private copy of the window (its manifest and partitions under the output's folder), each
    file checked against the manifest's sha256: another job may rebuild the window while the
    timings run, and every library must read the same bytes."""
    import hashlib
    import shutil

    data = json.loads(Path(args.snapshot).read_text())
    folder = args.output.parent
    entries = [*data["train"], data["eval"]]
    for entry in entries:
        source = Path(entry["path"])
        copy = folder / f"{entry['date']}.parquet"
        shutil.copyfile(source, copy)
        digest = hashlib.sha256(copy.read_bytes()).hexdigest()
        if entry.get("sha256") and digest != entry["sha256"]:
            raise SystemExit(f"{source} changed while it was copied (sha256 {digest[:12]}): run again")
        entry["source_path"], entry["path"] = str(source), str(copy)
    args.output.write_text(json.dumps(data, indent=1) + "\n")
    return {
        "manifest": str(args.snapshot),
        "window_id": data.get("window_id"),
        "created_at": data.get("created_at"),
        "partitions": len(entries),
        "rows": sum(int(e.get("rows", 0)) for e in entries),
        "columns": len(data.get("schema", {})),
        "eval_partition": data["eval"]["source_path"],
    }


def failed_timing(args: argparse.Namespace) -> dict[str, Any]:
    lines = Path(args.log).read_text(errors="replace").splitlines() if Path(args.log).exists() else []
    return {
        "library": args.failed_timing,
        "error": args.reason or f"exit {args.rc}",
        "log_tail": lines[-6:],
        "stats_seconds_median": None,
        "drift_seconds_median": None,
    }


# --------------------------------------------------------------------------------- timings


def _median(fn: Callable[[], Any], repeats: int) -> tuple[float, list[float], Any]:
    """(median seconds, every repeat's seconds, the result) of ``fn`` after one warm-up."""
    result = fn()
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        seconds.append(round(time.perf_counter() - start, 4))
    return round(statistics.median(seconds), 4), seconds, result


@dataclass(frozen=True)
class Library:
    """How one library computes the window's statistics and (optionally) the eval day's drift.

    ``stats(window)`` returns its per-partition results; ``drift(window, stats)`` compares the eval
    day with the training days from them (or from the raw partitions where the library needs
    them); ``check(stats)`` reads the eval day's rows and CHECK_FEATURE's mean and nulls back, so
    the libraries can be seen to compute the same thing."""

    dist: str
    stats: Callable[[Window], list[Any]]
    drift: Callable[[Window, list[Any]], Any] | None
    drift_method: str
    check: Callable[[list[Any]], dict[str, Any]]
    drift_summary: Callable[[Any], dict[str, Any]] | None = None
    extra: Callable[[Window, int], dict[str, Any]] | None = None


def _columns(window: Window) -> tuple[list[str], list[str], list[str]]:
    """(numeric features, categorical features, snapshot timestamp columns) of the window."""
    import pyarrow.parquet as pq  # type: ignore[import-not-found]

    schema = pq.read_schema(window.eval.path)
    numeric, categorical, snapshots = [], [], []
    for field in schema:
        kind = str(field.type)
        if field.name in NOT_FEATURES:
            continue
        if field.name.endswith(AS_OF_SUFFIX):
            snapshots.append(field.name)
        elif field.name in SPARSE_FEATURES or kind in ("string", "large_string"):
            categorical.append(field.name)
        elif kind.startswith(("int", "uint", "float", "double", "bool")):
            numeric.append(field.name)
    return numeric, categorical, snapshots


def _top_drift(scores: dict[str, float], n: int = 3) -> dict[str, float]:
    return {k: round(v, 5) for k, v in sorted(scores.items(), key=lambda kv: -kv[1])[:n]}


# -- 1. pyarrow/numpy: the project's own code


def _pyarrow_stats(window: Window) -> list[Any]:
    import pyarrow.parquet as pq

    from features.validation.statistics import compute

    return [compute(pq.read_table(p.path), p.date) for p in window.all]


def _pyarrow_drift(window: Window, stats: list[Any]) -> Any:
    """The step's skew check from the partitions' statistics (kept beside each partition: no
    parquet is read again): the training days merged, then JS / L-inf per feature."""
    from features.validation.anomalies import ValidationConfig, drift_scores, skew_anomalies

    schema = _project_schema(window, stats)
    train, eval_day = stats[:-1], stats[-1]
    return drift_scores([eval_day], train, schema), skew_anomalies(
        eval_day, train, schema, ValidationConfig()
    )


_SCHEMAS: dict[str, Any] = {}


def _project_schema(window: Window, stats: list[Any]) -> Any:
    """The data schema inferred from the training days (the step keeps it in a file: inferred
    once, outside the timing)."""
    import pyarrow.parquet as pq

    from features.validation.data_schema import infer

    if "schema" not in _SCHEMAS:
        columns = {f.name: str(f.type) for f in pq.read_schema(window.eval.path)}
        _SCHEMAS["schema"] = infer(columns, stats[:-1], "benchmark", "benchmark")
    return _SCHEMAS["schema"]


def _pyarrow_check(stats: list[Any]) -> dict[str, Any]:
    feature = stats[-1].features[CHECK_FEATURE]
    return {"eval_rows": stats[-1].rows, "mean": feature.mean, "nulls": feature.nulls}


def _pyarrow_profile(window: Window, repeats: int) -> dict[str, Any]:
    """Where compute's time goes on the eval day: the whole call against the fixed-bin keys of its
    numeric columns alone (bin_keys + the np.unique of the keys), and which statistics.py ran (the
    file is being worked on)."""
    import hashlib

    import numpy as np  # type: ignore[import-not-found]
    import pyarrow.parquet as pq

    from features.validation import statistics as project

    table = pq.read_table(window.eval.path)
    numeric, _, _ = _columns(window)
    columns = [table.column(n).drop_null().to_numpy(zero_copy_only=False).astype(np.float64) for n in numeric]
    columns = [c[~np.isnan(c)] for c in columns]

    def keys() -> None:
        for values in columns:
            np.unique(project.bin_keys(values), return_counts=True)

    compute_median, _, _ = _median(lambda: project.compute(table, window.eval.date), repeats)
    keys_median, _, _ = _median(keys, repeats)
    source = Path(project.__file__).read_bytes()
    return {
        "eval_day_compute_seconds_median": compute_median,
        "eval_day_bin_keys_seconds_median": keys_median,
        "statistics_py_sha256": hashlib.sha256(source).hexdigest()[:16],
    }


def _pyarrow_drift_summary(result: Any) -> dict[str, Any]:
    scores, anomalies = result
    return {"features_compared": len(scores), "top": _top_drift(scores), "anomalies": len(anomalies)}


# -- 2. duckdb: one SQL query per partition, one per window for the drift

_BIN = (
    "CASE WHEN x = 0 THEN '0' ELSE (CASE WHEN x > 0 THEN '+' ELSE '-' END)"
    " || CAST(least(greatest(floor(4 * log2(abs(x))), -160), 256) AS BIGINT) END"
)


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _duckdb_partition_sql(
    numeric: Sequence[str], categorical: Sequence[str], snapshots: Sequence[str]
) -> str:
    """The statistics of one partition (``statistics.compute``'s, bar the request sketch's hash
    function) in one query over its parquet file ($1)."""
    parts = [
        "count(*) AS rows",
        f"count(DISTINCT {REQUEST_KEY}) AS requests",
        f"coalesce(sum({LABEL}), 0) AS positives",
        f"min({EVENT_TIME}) AS event_time_min",
        f"max({EVENT_TIME}) AS event_time_max",
        f"count(*) - count(DISTINCT ({REQUEST_KEY}, pin_id)) AS duplicate_impressions",
    ]
    for i, name in enumerate(numeric):
        x = f"CAST({_q(name)} AS DOUBLE)"
        ok = f"{x} IS NOT NULL AND NOT isnan({x})"
        fin = f"{x} IS NOT NULL AND isfinite({x})"
        parts += [
            f"count({x}) FILTER (WHERE NOT isnan({x})) AS n{i}_count",
            f"count(*) - count({x}) AS n{i}_nulls",
            f"count({x}) FILTER (WHERE isnan({x})) AS n{i}_nans",
            f"count({x}) FILTER (WHERE {x} = 0) AS n{i}_zeros",
            f"min({x}) FILTER (WHERE {ok}) AS n{i}_min",
            f"max({x}) FILTER (WHERE {ok}) AS n{i}_max",
            f"avg({x}) FILTER (WHERE {fin}) AS n{i}_mean",
            f"stddev_pop({x}) FILTER (WHERE {fin}) AS n{i}_std",
            f"histogram({_BIN.replace('x', x)}) FILTER (WHERE {ok}) AS n{i}_hist",
        ]
    for i, name in enumerate(categorical):
        v = f"CAST({_q(name)} AS VARCHAR)"
        parts += [
            f"count({v}) AS c{i}_count",
            f"count(*) - count({v}) AS c{i}_nulls",
            f"count(DISTINCT {v}) AS c{i}_distinct",
            f"histogram({v}) AS c{i}_values",
        ]
    for i, name in enumerate(snapshots):
        age = f"epoch_us({EVENT_TIME}) - epoch_us({_q(name)})"
        parts += [
            f"count({_q(name)}) AS s{i}_joined",
            f"count(*) FILTER (WHERE {age} < 0) AS s{i}_after",
            f"max({age}) / 1e6 AS s{i}_max_age",
        ]
    keys = [REQUEST_KEY, *ENTITY_KEYS]
    effective = ", ".join(
        f"(SELECT sum(c)^2 / sum(c * c) FROM (SELECT count(*) AS c FROM t GROUP BY {k})) AS eff_{k}"
        for k in keys
    )
    return (
        "WITH t AS (SELECT * FROM read_parquet($1)) "
        f"SELECT {', '.join(parts)}, "
        f"(SELECT list(h ORDER BY h) FROM (SELECT DISTINCT hash({REQUEST_KEY}) AS h FROM t ORDER BY h LIMIT 256))"
        f" AS request_sketch, {effective} FROM t"
    )


def _duckdb_connect() -> Any:
    import duckdb  # type: ignore[import-not-found]

    con = duckdb.connect()
    con.execute(f"SET threads = {os.environ.get('DUCKDB_THREADS', '1')}")
    return con


def _duckdb_stats(window: Window) -> list[Any]:
    numeric, categorical, snapshots = _columns(window)
    sql = _duckdb_partition_sql(numeric, categorical, snapshots)
    con = _duckdb_connect()
    out = []
    for p in window.all:
        cursor = con.execute(sql, [str(p.path)])
        names = [d[0] for d in cursor.description]
        row = dict(zip(names, cursor.fetchone(), strict=True))
        for i, name in enumerate(categorical):  # ids keep their top 20, as statistics.compute does
            values = row[f"c{i}_values"]
            if name in ENTITY_KEYS or len(values) > 1000:
                row[f"c{i}_values"] = dict(sorted(values.items(), key=lambda kv: (-kv[1], kv[0]))[:20])
        out.append({"numeric": numeric, "categorical": categorical, **row})
    return out


def _duckdb_drift(window: Window, stats: list[Any]) -> Any:
    """JS divergence (bits, on statistics.compute's bins) of every numeric feature and the
    L-infinity distance of every bounded categorical feature, eval day vs the training days, in
    one query over the window's parquet files."""
    numeric, categorical, _ = _columns(window)
    categorical = [c for c in categorical if c not in ENTITY_KEYS]
    files = ", ".join("'" + str(p.path).replace("'", "''") + "'" for p in window.all)
    eval_file = str(window.eval.path).replace("'", "''")
    num_cols = ", ".join(f"CAST({_q(n)} AS DOUBLE) AS {_q(n)}" for n in numeric)
    cat_cols = ", ".join(f"CAST({_q(n)} AS VARCHAR) AS {_q(n)}" for n in categorical)
    on_num = ", ".join(_q(n) for n in numeric)
    on_cat = ", ".join(_q(n) for n in categorical)
    sql = f"""
    WITH t AS (
      SELECT CASE WHEN filename = '{eval_file}' THEN 'eval' ELSE 'train' END AS role, {num_cols}, {cat_cols}
      FROM read_parquet([{files}], filename = true)),
    nums AS (
      SELECT role, feature, {_BIN} AS bin, count(*) AS n
      FROM (UNPIVOT (SELECT role, {on_num} FROM t) ON {on_num} INTO NAME feature VALUE x)
      WHERE NOT isnan(x) GROUP BY ALL),
    cats AS (
      SELECT role, feature, v AS bin, count(*) AS n
      FROM (UNPIVOT (SELECT role, {on_cat} FROM t) ON {on_cat} INTO NAME feature VALUE v)
      GROUP BY ALL),
    freq AS (
      SELECT 'numeric' AS kind, feature, bin, role, n / sum(n) OVER (PARTITION BY feature, role) AS f FROM nums
      UNION ALL
      SELECT 'categorical', feature, bin, role, n / sum(n) OVER (PARTITION BY feature, role) FROM cats),
    pairs AS (
      SELECT kind, feature, bin,
        coalesce(max(f) FILTER (WHERE role = 'eval'), 0) AS a,
        coalesce(max(f) FILTER (WHERE role = 'train'), 0) AS b
      FROM freq GROUP BY ALL)
    SELECT feature, kind,
      CASE WHEN kind = 'numeric'
        THEN 0.5 * sum(CASE WHEN a > 0 THEN a * log2(2 * a / (a + b)) ELSE 0 END)
           + 0.5 * sum(CASE WHEN b > 0 THEN b * log2(2 * b / (a + b)) ELSE 0 END)
        ELSE max(abs(a - b)) END AS distance
    FROM pairs GROUP BY feature, kind ORDER BY feature"""
    con = _duckdb_connect()
    return {feature: float(d) for feature, _, d in con.execute(sql).fetchall()}


def _duckdb_check(stats: list[Any]) -> dict[str, Any]:
    row = stats[-1]
    i = row["numeric"].index(CHECK_FEATURE)
    return {"eval_rows": row["rows"], "mean": row[f"n{i}_mean"], "nulls": row[f"n{i}_nulls"]}


def _scores_summary(scores: Any) -> dict[str, Any]:
    return {"features_compared": len(scores), "top": _top_drift(scores)}


# -- pandas-based libraries: each partition read with pandas.read_parquet


def _read_pandas(partition: Partition) -> Any:
    import pandas as pd  # type: ignore[import-not-found]

    return pd.read_parquet(partition.path)


def _read_train_pandas(window: Window) -> Any:
    """The training days in one frame (what a library that keeps no mergeable statistics needs as
    its reference: the raw rows)."""
    import pandas as pd

    return pd.concat([_read_pandas(p) for p in window.train], ignore_index=True)


# -- 3. evidently: DataSummaryPreset per partition, DataDriftPreset eval day vs the training days


def _evidently_definition(window: Window) -> Any:
    from evidently import DataDefinition  # type: ignore[import-not-found]

    numeric, categorical, _ = _columns(window)
    return DataDefinition(
        numerical_columns=numeric, categorical_columns=categorical, datetime_columns=[EVENT_TIME]
    )


def _evidently_stats(window: Window) -> list[Any]:
    from evidently import Dataset, Report
    from evidently.presets import DataSummaryPreset  # type: ignore[import-not-found]

    definition = _evidently_definition(window)
    out = []
    for p in window.all:
        data = Dataset.from_pandas(_read_pandas(p), data_definition=definition)
        out.append(Report([DataSummaryPreset()]).run(current_data=data).dict())
    return out


def _evidently_drift(window: Window, stats: list[Any]) -> Any:
    """Evidently compares raw rows: the 20 training days are read again and concatenated (500,000
    rows) as the reference. Its default tests per column (Wasserstein / Jensen-Shannon distance
    above 1,000 rows); ids left out as the project leaves them out."""
    from evidently import Dataset, Report
    from evidently.presets import DataDriftPreset

    definition = _evidently_definition(window)
    numeric, categorical, _ = _columns(window)
    columns = [*numeric, *(c for c in categorical if c not in ENTITY_KEYS)]
    reference = Dataset.from_pandas(_read_train_pandas(window), data_definition=definition)
    current = Dataset.from_pandas(_read_pandas(window.eval), data_definition=definition)
    return (
        Report([DataDriftPreset(columns=columns)]).run(current_data=current, reference_data=reference).dict()
    )


def _evidently_value(report: dict[str, Any], metric: str) -> Any:
    for m in report["metrics"]:
        if m["metric_name"] == metric:
            return m["value"]
    return None


def _evidently_check(stats: list[Any]) -> dict[str, Any]:
    report = stats[-1]
    missing = _evidently_value(report, f"MissingValueCount(column={CHECK_FEATURE})") or {}
    mean = _evidently_value(report, f"MeanValue(column={CHECK_FEATURE})")
    rows = _evidently_value(report, "RowCount()")
    return {
        "eval_rows": int(rows) if rows is not None else None,
        "mean": float(mean) if mean is not None else None,
        "nulls": int(missing.get("count", -1)),
    }


def _evidently_drift_summary(report: Any) -> dict[str, Any]:
    scores = {
        m["config"]["column"]: float(m["value"])
        for m in report["metrics"]
        if m["metric_name"].startswith("ValueDrift(") and isinstance(m["value"], int | float)
    }
    drifted = [m["value"] for m in report["metrics"] if m["metric_name"].startswith("DriftedColumnsCount(")]
    return {"features_compared": len(scores), "top": _top_drift(scores), "drifted_columns": drifted[:1]}


# -- 4. whylogs: a profile per partition; drift from the merged training profiles


def _whylogs_stats(window: Window) -> list[Any]:
    import whylogs as why  # type: ignore[import-not-found]

    return [why.log(pandas=_read_pandas(p)).profile().view() for p in window.all]


def _whylogs_drift(window: Window, stats: list[Any]) -> Any:
    """whylogs profiles merge: the training days' profiles merged, then whylogs' default drift
    algorithms (Hellinger on the KLL histograms, chi-squared on frequent items). Needs the
    ``whylogs[viz]`` extra (ipython, scipy, Pillow<11)."""
    from functools import reduce

    from whylogs.viz.drift.column_drift_algorithms import (  # type: ignore[import-not-found]
        calculate_drift_scores,
    )

    reference = reduce(lambda a, b: a.merge(b), stats[:-1])
    return calculate_drift_scores(target_view=stats[-1], reference_view=reference, with_thresholds=True)


def _whylogs_check(stats: list[Any]) -> dict[str, Any]:
    summary = stats[-1].get_column(CHECK_FEATURE).to_summary_dict()
    return {
        "eval_rows": int(summary["counts/n"]),
        "mean": float(summary["distribution/mean"]),
        "nulls": int(summary.get("counts/null", 0)),
    }


def _whylogs_drift_summary(result: Any) -> dict[str, Any]:
    """Per feature (not the ids, the label or the request key): whylogs' drift category (its
    p-value thresholds) and the algorithm that gave it (KS on the KLL sketch, chi-squared on the
    frequent items)."""
    categories: dict[str, int] = {}
    algorithms: dict[str, int] = {}
    for name, r in result.items():
        if not r or name in (*NOT_FEATURES, *ENTITY_KEYS):
            continue
        categories[r["drift_category"]] = categories.get(r["drift_category"], 0) + 1
        algorithms[r["algorithm"]] = algorithms.get(r["algorithm"], 0) + 1
    return {"features_compared": sum(categories.values()), "categories": categories, "algorithms": algorithms}


# -- 5. pandera: schema checks only (types, nulls, domains, vocabularies); no statistics, no drift

_PANDERA: dict[str, Any] = {}


def _pandera_schema(window: Window) -> Any:
    """A DataFrameSchema like the project's inferred data schema: each column's dtype, counts
    >= 0, rates in [0, 1], the bounded categorical features' vocabulary of the first training
    day (built once, outside the timing)."""
    if "schema" in _PANDERA:
        return _PANDERA["schema"]
    import pandera.pandas as pa  # type: ignore[import-not-found]

    first = _read_pandas(window.train[0])
    numeric, categorical, snapshots = _columns(window)
    columns: dict[str, Any] = {
        REQUEST_KEY: pa.Column(str, nullable=False),
        EVENT_TIME: pa.Column(first[EVENT_TIME].dtype, nullable=False),
        LABEL: pa.Column(first[LABEL].dtype, pa.Check.isin([0, 1])),
    }
    for name in numeric:
        checks = [pa.Check.ge(0)] + ([pa.Check.le(1)] if "rate" in name else [])
        columns[name] = pa.Column(first[name].dtype, checks, nullable=True)
    for name in categorical:
        if name in ENTITY_KEYS:
            columns[name] = pa.Column(first[name].dtype, nullable=False)
        else:
            vocabulary = sorted(first[name].dropna().unique().tolist())
            columns[name] = pa.Column(str, pa.Check.isin(vocabulary), nullable=True)
    for name in snapshots:  # a feature view's snapshot time: null where the join found none
        columns[name] = pa.Column(first[name].dtype, nullable=True)
    _PANDERA["schema"] = pa.DataFrameSchema(columns, strict=True)
    return _PANDERA["schema"]


def _pandera_stats(window: Window) -> list[Any]:
    import pandera.errors as errors  # type: ignore[import-not-found]

    schema = _pandera_schema(window)
    out = []
    for p in window.all:
        df = _read_pandas(p)
        try:
            schema.validate(df, lazy=True)
            out.append({"rows": len(df), "failure_cases": 0})
        except errors.SchemaErrors as exc:
            out.append({"rows": len(df), "failure_cases": len(exc.failure_cases)})
    return out


def _pandera_check(stats: list[Any]) -> dict[str, Any]:
    return {"eval_rows": stats[-1]["rows"], "failure_cases": [s["failure_cases"] for s in stats]}


# -- 6. TFDV: generate_statistics_from_dataframe per partition; skew of the eval day


def _tfdv_stats(window: Window) -> list[Any]:
    import tensorflow_data_validation as tfdv  # type: ignore[import-not-found]

    return [tfdv.generate_statistics_from_dataframe(_read_pandas(p)) for p in window.all]


def _tfdv_drift(window: Window, stats: list[Any]) -> Any:
    """TFDV's statistics do not merge across days: the training days' statistics are generated
    again from their 500,000 rows; then the schema inferred from them, with a skew comparator on
    every feature (Jensen-Shannon 0.1 numeric, L-infinity 0.1 categorical, as the project's
    thresholds), and validate_statistics against the eval day's statistics."""
    import tensorflow_data_validation as tfdv

    train = tfdv.generate_statistics_from_dataframe(_read_train_pandas(window))
    schema = tfdv.infer_schema(train)
    numeric, categorical, _ = _columns(window)
    for name in numeric:
        tfdv.get_feature(schema, name).skew_comparator.jensen_shannon_divergence.threshold = 0.1
    for name in categorical:
        if name not in ENTITY_KEYS:
            tfdv.get_feature(schema, name).skew_comparator.infinity_norm.threshold = 0.1
    return tfdv.validate_statistics(statistics=train, schema=schema, serving_statistics=stats[-1])


def _tfdv_check(stats: list[Any]) -> dict[str, Any]:
    dataset = stats[-1].datasets[0]
    for feature in dataset.features:
        if feature.path.step and feature.path.step[0] == CHECK_FEATURE:
            common = feature.num_stats.common_stats
            return {
                "eval_rows": int(dataset.num_examples),
                "mean": float(feature.num_stats.mean),
                "nulls": int(dataset.num_examples - common.num_non_missing),
            }
    return {"eval_rows": int(dataset.num_examples)}


def _tfdv_drift_summary(anomalies: Any) -> dict[str, Any]:
    return {"anomalies": sorted(anomalies.anomaly_info.keys())}


# ------------------------------------------------------------------------------------ main

LIBRARIES: dict[str, Library] = {
    "pyarrow": Library(
        "pyarrow",
        _pyarrow_stats,
        _pyarrow_drift,
        "features.validation.anomalies drift_scores + skew_anomalies from the per-partition statistics",
        _pyarrow_check,
        _pyarrow_drift_summary,
        _pyarrow_profile,
    ),
    "duckdb": Library(
        "duckdb",
        _duckdb_stats,
        _duckdb_drift,
        "one SQL query over the 21 parquet files: JS (numeric, statistics.py's bins) / L-inf (categorical)",
        _duckdb_check,
        _scores_summary,
    ),
    "evidently": Library(
        "evidently",
        _evidently_stats,
        _evidently_drift,
        "DataDriftPreset (default per-column tests) of the eval day against the 20 training days' raw rows",
        _evidently_check,
        _evidently_drift_summary,
    ),
    "whylogs": Library(
        "whylogs",
        _whylogs_stats,
        _whylogs_drift,
        "calculate_drift_scores (whylogs[viz]) of the eval profile against the 20 training profiles merged",
        _whylogs_check,
        _whylogs_drift_summary,
    ),
    "pandera": Library(
        "pandera", _pandera_stats, None, "none: pandera checks a schema, it has no drift", _pandera_check
    ),
    "tfdv": Library(
        "tensorflow-data-validation",
        _tfdv_stats,
        _tfdv_drift,
        "statistics of the 20 training days' rows, infer_schema + skew comparators, validate_statistics",
        _tfdv_check,
        _tfdv_drift_summary,
    ),
}


def run_library(name: str, window: Window, repeats: int) -> dict[str, Any]:
    lib = LIBRARIES[name]
    stats_median, stats_seconds, stats = _median(lambda: lib.stats(window), repeats)
    out: dict[str, Any] = {
        "library": name,
        "version": md.version(lib.dist),
        "partitions": len(window.all),
        "repeats": repeats,
        "stats_seconds_median": stats_median,
        "stats_seconds": stats_seconds,
        "check": lib.check(stats),
        "drift_seconds_median": None,
        "drift_seconds": None,
        "drift_method": lib.drift_method,
    }
    if lib.drift is not None:
        drift = lib.drift
        drift_median, drift_seconds, result = _median(lambda: drift(window, stats), repeats)
        out |= {"drift_seconds_median": drift_median, "drift_seconds": drift_seconds}
        if lib.drift_summary is not None:
            out["drift"] = lib.drift_summary(result)
    if lib.extra is not None:
        out["profile"] = lib.extra(window, repeats)
    out["threads"] = {k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "DUCKDB_THREADS")}
    return out


# what each library is, in the figures (facts only: the measured ones come from the runs)
WHAT: dict[str, str] = {
    "pyarrow": "the project's own features.validation.statistics.compute (pyarrow.compute + numpy) and "
    "anomalies' JS / L-inf distances; no new dependency",
    "duckdb": "the same statistics written here as one duckdb SQL query per partition (histograms on "
    "statistics.py's bins, value counts, Kish sizes, a bottom-256 request-id sketch with duckdb's hash) "
    "and the drift as one query per window; duckdb is in the trainer lock already",
    "evidently": "DataSummaryPreset report per partition (counts, missing, min/max/mean/std, quantiles, "
    "value counts); DataDriftPreset compares raw frames",
    "whylogs": "a mergeable profile per partition (counts, types, KLL quantile sketch, HLL distinct, "
    "frequent items); drift from merged profiles in the whylogs[viz] extra",
    "pandera": "schema checks only (dtypes, nullability, ranges, vocabularies): no statistics to keep, "
    "no drift",
    "tfdv": "TFX's statistics protos per partition, schema inference, skew/drift comparators",
}


def _pypi(dist: str) -> dict[str, Any] | None:
    try:
        with urllib.request.urlopen(f"https://pypi.org/pypi/{dist}/json", timeout=30) as response:
            data: dict[str, Any] = json.load(response)
            return data
    except (OSError, ValueError):
        return None


def _uploaded(data: dict[str, Any] | None, version: str | None) -> str | None:
    files = (data or {}).get("releases", {}).get(version or "", [])
    times = [f["upload_time"] for f in files if f.get("upload_time")]
    return min(times)[:10] if times else None


def _glibc_needed(data: dict[str, Any] | None, version: str) -> str | None:
    """The oldest glibc that the release's CPython 3.11 x86_64 Linux wheels need (None: a
    pure-Python wheel or no such wheel)."""
    needs = []
    for f in (data or {}).get("releases", {}).get(version, []):
        name = f["filename"]
        if "cp311" in name and "x86_64" in name:
            found = re.findall(r"manylinux_(\d+)_(\d+)_x86_64", name) or (
                [("2", "17")] if "manylinux2014_x86_64" in name else []
            )
            needs += [(int(a), int(b)) for a, b in found]
    return f"{min(needs)[0]}.{min(needs)[1]}" if needs else None


def _read_json(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    text = path.read_text().strip()
    try:
        data: dict[str, Any] = json.loads(text.splitlines()[-1]) if text else {}
    except ValueError:
        return {"error": f"unreadable {path.name}"}
    return data


def _notes(
    lib: str, plain: dict[str, Any], uv: dict[str, Any], run: dict[str, Any], meta: dict[str, Any]
) -> list[str]:
    notes = [WHAT[lib]]
    if plain.get("install_timed_out"):
        last = [line for line in _log_tail(plain) if line.startswith("INFO")][-1:]
        notes.append(
            f"`pip install {plain.get('distribution')}` ran past the {plain.get('install_seconds')} s cap"
            f" (resolver backtracking{': ' + last[0] if last else ''})"
        )
        if uv.get("installed"):
            notes.append("sized and timed from `uv pip install` of the same package instead")
    source = plain if plain.get("installed") else uv
    if source.get("added_for_import"):
        notes.append(
            f"does not import after the install: needs {', '.join(source['added_for_import'])}, which "
            "no dependency declares; added for the timing"
        )
    if plain.get("installed") and plain.get("import_error"):
        notes.append(f"`pip install {plain['distribution']}` alone does not import: {plain['import_error']}")
    if (
        plain.get("installed")
        and lib not in ("pyarrow", "duckdb")
        and "pandas" not in plain.get("installed_versions", {})
    ):
        notes.append(
            "a plain install brings no pandas/numpy: it profiles DataFrames only with them installed"
        )
    if run.get("dropped_trainer_pins"):
        notes.append(
            f"timed in `pip install {run.get('spec')}` with the trainer's pins except "
            f"{', '.join(run['dropped_trainer_pins'])} (they conflict)"
        )
    if meta.get("latest") and meta.get("version") and meta["latest"] != meta["version"]:
        glibc = meta.get("latest_needs_glibc")
        notes.append(
            f"latest on PyPI is {meta['latest']} ({meta.get('latest_released')}); pip installs "
            f"{meta['version']} here"
            + (
                f": the newer releases' Linux wheels need glibc >= {glibc} (this machine has {meta.get('glibc')})"
                if glibc
                else ""
            )
        )
    return notes


def _log_tail(install: dict[str, Any]) -> list[str]:
    return [str(line) for line in install.get("install_last_lines", [])]


def _timed_with(lib: str, sized: dict[str, Any], run: dict[str, Any]) -> dict[str, Any]:
    if lib in ("pyarrow", "duckdb"):
        return {"venv": "the project's .venv (the trainer lock)"}
    if run:
        return {
            "venv": f"{lib}-run: pip install {run.get('spec')} -c <trainer lock less the dropped pins>",
            "versions": run.get("installed_versions"),
            "dropped_trainer_pins": run.get("dropped_trainer_pins", []),
        }
    return {
        "venv": f"{lib}-{sized.get('installer')}: its own resolve, no trainer pins (it does not resolve with them)",
        "versions": sized.get("installed_versions"),
    }


def _library_figures(lib: str, out_dir: Path, glibc: str) -> dict[str, Any]:
    plain = _read_json(out_dir / lib / "install.json")
    uv = _read_json(out_dir / f"{lib}-uv" / "install.json")
    lock = _read_json(out_dir / lib / "lock.json")
    run = _read_json(out_dir / f"{lib}-run" / "run.json")
    timing = _read_json(out_dir / lib / "timing.json")
    sized = plain if plain.get("installed") else uv
    version = sized.get("version") or timing.get("version")
    dist = plain.get("distribution") or lib
    pypi = _pypi(dist)
    latest = (pypi or {}).get("info", {}).get("version")
    meta = {
        "version": version,
        "latest": latest,
        "latest_released": _uploaded(pypi, latest),
        "latest_needs_glibc": _glibc_needed(pypi, latest) if latest else None,
        "glibc": glibc,
    }
    adds = run.get("not_in_trainer_lock") if run else sized.get("not_in_trainer_lock", {})
    return {
        "library": lib,
        "distribution": dist,
        "version": version,
        "released": _uploaded(pypi, version),
        "latest_on_pypi": latest,
        "latest_released": meta["latest_released"],
        "licence": sized.get("licence"),
        "installer": sized.get("installer"),
        "install_bytes": sized.get("install_bytes"),
        "packages": sized.get("packages"),
        "pip_install_seconds": plain.get("install_seconds"),
        "pip_install_timed_out": plain.get("install_timed_out"),
        "imports_after_plain_install": plain.get("installed") and plain.get("import_error") is None,
        "resolves_with_trainer_lock": lock.get("resolves_with_trainer_lock"),
        "conflicts": lock.get("conflicting_pins", []),
        "conflict_lines": lock.get("conflicts", []),
        "adds_to_trainer_packages": len(adds or {}),
        "adds_to_trainer_bytes": sum((adds or {}).values()),
        "upper_pins": sized.get("upper_pins", []),
        "timed_with": _timed_with(lib, sized, run),
        "stats_seconds_median": timing.get("stats_seconds_median"),
        "stats_seconds": timing.get("stats_seconds"),
        "drift_seconds_median": timing.get("drift_seconds_median"),
        "drift_seconds": timing.get("drift_seconds"),
        "drift_method": timing.get("drift_method"),
        "check": timing.get("check"),
        "drift_result": timing.get("drift"),
        "profile": timing.get("profile"),
        "timing_error": timing.get("error"),
        "notes": _notes(lib, plain, uv, run, meta),
    }


def assemble(args: argparse.Namespace) -> None:
    out_dir: Path = args.assemble
    machine = dict(
        line.split("=", 1) for line in (out_dir / "machine.txt").read_text().splitlines() if "=" in line
    )
    window = read_window(args.manifest)
    figures = {
        "measured_on": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "command": "bash benchmarks/validation_libraries.sh "
        + str(_read_json(out_dir / "window" / "snapshot.json").get("manifest", args.manifest)),
        "machine": {
            **machine,
            "gpu": machine.get("gpu", "none"),
            "note": "2 cores, no GPU; another job (an engineer's edits and tests) ran beside it",
        },
        "window": {
            **_read_json(out_dir / "window" / "snapshot.json"),
            "timed_on_copy": str(args.manifest),
            "partitions": len(window.all),
            "train_days": len(window.train),
            "eval_day": window.eval.date.isoformat(),
        },
        "method": {
            "repeats": args.repeats,
            "warm_up": 1,
            "statistic": "median seconds",
            "stats": "every partition read from its parquet and its per-feature statistics computed",
            "drift": "the eval day against the 20 training days, from what the stats step left: mergeable "
            "statistics (pyarrow, whylogs) compare without reading rows again; the others read the raw "
            "training rows again (duckdb: the 21 files in one query; evidently and tfdv: 500,000 rows)",
            "threads": "OMP_NUM_THREADS=1, duckdb SET threads = 1",
            "install_bytes": "site-packages of a fresh venv after `pip install <pkg>` minus an empty venv's",
            "packages": "distributions that install added to the empty venv",
            "adds_to_trainer": "distributions (and their bytes) of the runnable install that the trainer "
            "lock does not hold",
            "resolves_with_trainer_lock": "pip install --dry-run --ignore-installed -c requirements/trainer.lock <pkg>",
        },
        "libraries": [
            _library_figures(lib, out_dir, machine.get("glibc", "?")) for lib in args.libraries.split()
        ],
    }
    args.output.write_text(json.dumps(_with_earlier(figures, args.output), indent=1) + "\n")


def _stamp_of(figures: dict[str, Any]) -> dict[str, Any]:
    """When a figures file was measured and the machine's 1-minute load then (start, end)."""
    machine = figures.get("machine", {})
    return {
        "measured_on": figures.get("measured_on"),
        "load_1min": [machine.get(k) for k in ("load_1min_at_start", "load_1min_at_end")],
        "eval_partition": figures.get("window", {}).get("eval_partition"),
    }


def _with_earlier(figures: dict[str, Any], output: Path) -> dict[str, Any]:
    """The new figures, with the libraries this run left out kept from the file it replaces, and
    each rerun library's earlier medians under ``earlier_runs`` (a rerun of a part does not lose
    what the whole run measured, nor hide how much the figures moved)."""
    ran = {lib["library"]: {**lib, **_stamp_of(figures)} for lib in figures["libraries"]}
    try:
        before: dict[str, Any] = json.loads(output.read_text()) if output.exists() else {}
    except ValueError:
        before = {}
    merged = []
    for old in before.get("libraries", []):
        new = ran.pop(old["library"], None)
        if new is None:
            merged.append({**_stamp_of(before), **old})
            continue
        earlier = old.get("earlier_runs", [])
        if old.get("stats_seconds_median") is not None:
            earlier.append(
                {
                    **_stamp_of(before),
                    **{k: old[k] for k in ("measured_on", "load_1min") if k in old},
                    "stats_seconds_median": old.get("stats_seconds_median"),
                    "drift_seconds_median": old.get("drift_seconds_median"),
                }
            )
        merged.append({**new, "earlier_runs": earlier})
    merged += ran.values()
    return {**figures, "libraries": merged}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--library", choices=sorted(LIBRARIES))
    parser.add_argument("--manifest", type=Path)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--inspect", metavar="DIST")
    parser.add_argument("--empty", help="the empty venv sizes are measured against")
    parser.add_argument("--lock", help="requirements/trainer.lock")
    parser.add_argument("--install-rc", type=int, default=0)
    parser.add_argument("--install-seconds", type=int, default=0)
    parser.add_argument("--install-log")
    parser.add_argument("--module", help="what the library imports as")
    parser.add_argument("--installer", default="pip")
    parser.add_argument("--added", default="", help="modules added after the install for the import")
    parser.add_argument("--run-summary", metavar="VENV")
    parser.add_argument("--spec")
    parser.add_argument("--snapshot", metavar="MANIFEST", help="copy the window under --output's folder")
    parser.add_argument("--resolve-summary", metavar="LOG")
    parser.add_argument("--failed-timing", metavar="NAME")
    parser.add_argument("--log")
    parser.add_argument("--rc", type=int, default=1)
    parser.add_argument("--reason")
    parser.add_argument("--assemble", metavar="DIR", type=Path)
    parser.add_argument("--libraries", default=" ".join(LIBRARIES))
    parser.add_argument("--output", type=Path)
    args = parser.parse_args(argv)
    if args.inspect:
        out = inspect(args)
    elif args.resolve_summary:
        out = resolve_summary(args)
    elif args.snapshot:
        out = snapshot(args)
    elif args.run_summary:
        out = run_summary(args)
    elif args.failed_timing:
        out = failed_timing(args)
    elif args.assemble:
        assemble(args)
        return 0
    elif args.library and args.manifest:
        out = run_library(args.library, read_window(args.manifest), args.repeats)
    else:
        parser.error("give --library and --manifest (or one of the plumbing modes)")
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
